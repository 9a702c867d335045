"""`sandbox_for`: the one reading of an evaluation's limits into a sandbox; a caller's own arguments
(the CPU for the sizes found ahead, an evaluation's build entry) replace or add to them."""

from __future__ import annotations

import inspect
import os

from evaluation.phases.sandboxes import SandboxArgs, sandbox_for
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.sandbox import Sandbox


def test_a_sandbox_takes_the_configs_limits_and_the_callers_overrides():
    cfg = EvaluationConfig(device="cpu", size_scale=2, memory_limit_mb=3000, max_processes=40, cpu_threads=3,
                           file_size_limit_mb=700, isolation="none")  # fmt: skip
    with sandbox_for(cfg) as plain:
        assert (plain.device, plain.size_scale, plain.memory_limit_mb) == ("cpu", 2, 3000)
        assert (plain.max_processes, plain.cpu_threads, plain.file_size_limit_mb) == (40, 3, 700)
        assert plain.mode == "none" and plain.build_dir is None
    assert not os.path.exists(plain.root)
    with sandbox_for(cfg, cpu_threads=1, build_dir="/nonexistent/entry", extra_env={"X": "1"}) as own:
        assert own.cpu_threads == 1 and own.build_dir == "/nonexistent/entry" and own.extra_env == {"X": "1"}
        assert own.memory_limit_mb == 3000  # the rest still the config's


def test_the_typed_overrides_name_every_argument_of_sandbox():
    """``SandboxArgs`` spells ``Sandbox``'s keyword arguments out again for mypy. mypy catches a name
    there that ``Sandbox`` lacks ("Extra argument ... from **args"); this catches the other way, an
    argument added to ``Sandbox`` that ``sandbox_for`` could not be given."""
    params = set(inspect.signature(Sandbox.__init__).parameters) - {"self"}
    assert set(SandboxArgs.__annotations__) == params
