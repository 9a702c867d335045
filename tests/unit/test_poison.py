"""evaluation.child.poison: new tensors start as NaN within the block, and torch's modes and the
warning filters are as they were after it, also when the block raises."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from evaluation.child.poison import poison_unwritten
from evaluation.phases.correctness import poisons

ROOT = Path(__file__).resolve().parents[2]


def modes() -> tuple[bool, bool, bool]:
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.utils.deterministic.fill_uninitialized_memory,
    )


@pytest.fixture(autouse=True)
def restore_modes():
    before = modes()
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.utils.deterministic.fill_uninitialized_memory = before[2]


def test_it_fills_new_tensors_with_nan_and_integers_with_their_largest_value():
    with poison_unwritten(torch):
        floats = torch.empty_like(torch.zeros(64, 64))
        ints = torch.empty(8, dtype=torch.int32)
    assert bool(floats.isnan().all())
    assert bool((ints == torch.iinfo(torch.int32).max).all())


def test_it_restores_torchs_modes_and_the_warning_filters():
    torch.utils.deterministic.fill_uninitialized_memory = False
    before, filters = modes(), list(warnings.filters)
    with poison_unwritten(torch):
        assert modes() == (True, True, True)
    assert modes() == before == (False, False, False)
    assert warnings.filters == filters


def test_it_restores_a_deterministic_mode_that_was_on_before():
    torch.use_deterministic_algorithms(True)
    with poison_unwritten(torch):
        pass
    assert modes() == (True, False, True)


def test_it_restores_them_when_the_block_raises():
    before, filters = modes(), list(warnings.filters)
    with pytest.raises(ValueError, match="boom"), poison_unwritten(torch):
        raise ValueError("boom")
    assert modes() == before
    assert warnings.filters == filters


def test_it_restores_them_when_the_block_switched_the_mode_off():
    before = modes()
    with poison_unwritten(torch):
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = False
    assert modes() == before


def test_it_silences_the_alerts_of_warn_only_mode_and_nothing_else():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with poison_unwritten(torch):
            # put_ without accumulate has no deterministic implementation on the CPU: torch alerts.
            torch.zeros(5).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))
            warnings.warn("the kernel's own warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["the kernel's own warning"]


def test_the_parent_poisons_every_trial_but_the_first_unless_the_defence_is_off():
    on = SimpleNamespace(defence_on=lambda name: True)
    off = SimpleNamespace(defence_on=lambda name: name != "poison_unwritten")
    assert [poisons(on, i) for i in range(4)] == [False, True, True, True]
    assert not any(poisons(off, i) for i in range(4))


def _in_a_fresh_process(block: str, after: str) -> list[str]:
    """What ``print(after)`` prints, split, after ``block`` ran within the poison in a new Python that
    has imported torch (and ``c``, torch.compile's config, where ``block`` names it)."""
    imports = "import torch._inductor.config as c\n" if "c." in block else ""
    code = (
        f"import sys, torch\n{imports}from evaluation.child.poison import poison_unwritten\n"
        f"with poison_unwritten(torch):\n{block}print({after})\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return run.stdout.split()


def test_it_does_not_import_torch_compile():
    """``torch.use_deterministic_algorithms`` imports torch._inductor (and torch._dynamo, Triton) to
    set torch.compile's switch: 1.5 s on this CPU, about 5 s of each GPU evaluation's correctness
    phase. The block sets torch's own switch alone; in a fresh process, nothing else comes in."""
    out = _in_a_fresh_process(
        "    x = torch.empty(4)\n",
        "bool(x.isnan().all()), 'torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules",
    )
    assert out == ["True", "False", "False"], out


def test_torch_compiles_switch_follows_the_mode_where_it_is_loaded_and_is_set_back():
    """Where a kernel's process has loaded torch.compile (it compiles), its own deterministic switch is
    on within the block, as ``torch.use_deterministic_algorithms`` would set it, and back after it,
    also when a compile inside the block set it on again (torch.compile restores the mode after each
    compile through that function)."""
    out = _in_a_fresh_process(
        "    inside = c.deterministic\n"
        "    torch.use_deterministic_algorithms(True, warn_only=True)  # what a compile's restore does\n",
        "inside, c.deterministic, torch.are_deterministic_algorithms_enabled()",
    )
    assert out == ["True", "False", "False"], out
