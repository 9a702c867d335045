"""Self-check of the starter catalogue (problems/catalogue): plain pytest, no Django, no database.

Every problem must load, define KernelBench's three names, build under a seed, be small enough at
KB_SCALE=1 to run in milliseconds on a CPU (bounded by counted work, not by a clock), give bitwise-identical finite outputs for the same seeds, have
outputs that are not near zero in scale, and grow with KB_SCALE.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

CATALOGUE_DIR = Path(__file__).resolve().parents[2] / "problems" / "catalogue"
LEVELS = (1, 2, 3, 4)
FILE_NAME = re.compile(r"^([1-9][0-9]*)_([A-Za-z0-9_]+)\.py$")
# Work bounds at KB_SCALE=1, about 4x the largest problem's (1_MLP: 2.3e8 counted FLOPs; the norms:
# 4.2e6 elements), so each forward takes milliseconds on 2 cores. Counted, not timed: a clock in a
# test fails on a busy machine.
MAX_FORWARD_FLOPS = 1_000_000_000  # matmuls and convolutions, as torch's FlopCounterMode counts them
MAX_ELEMENTS = 16_000_000  # inputs + parameters + outputs: bounds the elementwise work
MIN_MEAN_ABS = 0.05  # outputs smaller than this could let an all-zero kernel pass a tolerance

_counter = itertools.count()


def _problem_files() -> list[Path]:
    return sorted(CATALOGUE_DIR.glob("level*/*.py"))


def _load(path: Path) -> ModuleType:
    """Import a problem file as a fresh module (its constants read KB_SCALE at import time)."""
    name = f"_catalogue_problem_{next(_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _tensors(output: object) -> Iterator[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        yield output
    elif isinstance(output, (tuple, list)):
        for item in output:
            yield from _tensors(item)
    else:
        raise AssertionError(f"forward returned {type(output).__name__}, not tensors")


def _build(module: ModuleType) -> torch.nn.Module:
    torch.manual_seed(0)
    return module.Model(*module.get_init_inputs())


def _run(module: ModuleType, model: torch.nn.Module, seed: int) -> tuple[list[torch.Tensor], int]:
    """The forward's outputs, and the work it did: counted FLOPs plus the elements it touched."""
    torch.manual_seed(seed)
    inputs = module.get_inputs()
    with torch.no_grad(), FlopCounterMode(display=False) as flops:
        output = model(*inputs)
    outputs = list(_tensors(output))
    elements = sum(t.numel() for t in [*inputs, *model.parameters(), *outputs] if isinstance(t, torch.Tensor))
    assert elements <= MAX_ELEMENTS, f"{module.__name__}: {elements:,} elements at KB_SCALE=1"
    return outputs, flops.get_total_flops()


PROBLEMS = _problem_files()


@pytest.fixture
def scale_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_SCALE", "1")


def test_catalogue_has_at_least_12_problems_over_all_four_levels():
    levels = {int(path.parent.name.removeprefix("level")) for path in PROBLEMS}
    assert len(PROBLEMS) >= 12
    assert levels == set(LEVELS)


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_is_numbered_from_1_without_gaps(level):
    folder = CATALOGUE_DIR / f"level{level}"
    names = sorted(path.name for path in folder.iterdir() if path.suffix == ".py")
    matches = [FILE_NAME.match(name) for name in names]
    assert all(matches), f"badly named files in {folder}: {names}"
    numbers = sorted(int(match.group(1)) for match in matches if match)
    assert numbers == list(range(1, len(numbers) + 1))


def test_package_exposes_the_catalogue_dir():
    # Load the package's __init__ by path: importing `problems` could need Django settings.
    module = _load(CATALOGUE_DIR / "__init__.py")
    assert module.CATALOGUE_DIR == CATALOGUE_DIR
    assert isinstance(module.CATALOGUE_DIR, Path)


def test_readme_lists_every_problem():
    readme = (CATALOGUE_DIR / "README.md").read_text()
    missing = [path.name for path in PROBLEMS if path.name not in readme]
    assert not missing, f"README.md does not mention {missing}"


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_problem_builds_runs_fast_and_is_deterministic(path, scale_one):
    module = _load(path)
    assert module.KB_SCALE == 1
    for name in ("Model", "get_inputs", "get_init_inputs"):
        assert hasattr(module, name), f"{path.name} does not define {name}"
    assert issubclass(module.Model, torch.nn.Module)
    assert module.Model.__doc__, f"{path.name}: Model has no docstring"
    assert isinstance(module.get_init_inputs(), list)
    inputs = module.get_inputs()
    assert isinstance(inputs, list) and inputs
    assert all(isinstance(tensor, torch.Tensor) for tensor in inputs)

    model = _build(module)
    first, first_flops = _run(module, model, seed=1234)
    again, _ = _run(module, model, seed=1234)
    fresh, _ = _run(module, _build(module), seed=1234)  # a second model built under the seed

    assert len(first) == len(again) == len(fresh) >= 1
    for a, b, c in zip(first, again, fresh, strict=True):
        assert torch.equal(a, b), f"{path.name}: two forwards on the same inputs differ"
        assert torch.equal(a, c), f"{path.name}: two models built under seed 0 differ"
        if a.is_floating_point():
            assert torch.isfinite(a).all(), f"{path.name}: output has NaN or Inf"
            mean_abs = a.abs().mean().item()
            assert mean_abs >= MIN_MEAN_ABS, f"{path.name}: output near zero ({mean_abs:.2e})"
    assert first_flops <= MAX_FORWARD_FLOPS, f"{path.name}: {first_flops:,} FLOPs at KB_SCALE=1"


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_problem_sizes_grow_with_kb_scale(path, monkeypatch):
    sizes = {}
    for scale in (1, 2):
        monkeypatch.setenv("KB_SCALE", str(scale))
        module = _load(path)
        assert module.KB_SCALE == scale
        torch.manual_seed(0)
        sizes[scale] = sum(tensor.numel() for tensor in module.get_inputs())
    assert sizes[2] > sizes[1], f"{path.name}: KB_SCALE=2 does not grow the inputs"
