"""Other shapes: is the kernel correct at sizes other than the one problem's constants give?

KernelBench's problems set their sizes as module-level constants (``batch_size``, ``dim``, ``N``)
that ``get_inputs`` and ``get_init_inputs`` read when called. The reference process lists the
constants those two functions read whose values look like sizes (integers of at least
``MIN_SIZE``, names that are not hyper-parameters such as ``kernel_size``, ``stride`` or
``num_heads``); both processes then set them anew in the problem module, rebuild their models
under the same seed, and run one correctness trial, compared as usual. Two variants, never larger
than the original (no memory budget to check): every size halved, and every size at three quarters
plus one (odd, not a power of two: tiles without bounds checks show). Where the reference itself
fails at a variant, that variant says so and counts for nothing.

A kernel correct at the given shape but not at a variant is flagged ``shape_specialised``.
KernelBench's rules do not fail it (they test one shape); the flag tells the reviewer.
"""

from __future__ import annotations

import re
from typing import Any

MIN_SIZE = 8
#: Names of constants that are hyper-parameters, not sizes (matched anywhere in the lower-cased name).
NOT_SIZES = re.compile(r"kernel|stride|pad|dilation|group|head|eps|axis|pool|window|scale|seed|iter|step|"
                       r"topk|layers")


def size_constants(problem: Any) -> dict[str, int]:
    """Child side: the problem module's size constants that get_inputs/get_init_inputs read."""
    names: list[str] = []
    for fn in (getattr(problem, "get_inputs", None), getattr(problem, "get_init_inputs", None)):
        code = getattr(fn, "__code__", None)
        names += [n for n in (code.co_names if code is not None else ()) if n not in names]
    found = {}
    for name in names:
        value = vars(problem).get(name)
        if type(value) is int and value >= MIN_SIZE and not NOT_SIZES.search(name.lower()):
            found[name] = value
    return found


def apply_sizes(problem: Any, sizes: dict[str, int], originals: dict[str, Any]) -> None:
    """Child side: set ``sizes`` in the problem module (remembering the first values in ``originals``);
    empty ``sizes`` restores them."""
    if not sizes:
        for name, value in originals.items():
            setattr(problem, name, value)
        return
    for name, value in sizes.items():
        originals.setdefault(name, getattr(problem, name))
        setattr(problem, name, int(value))


def variants(sizes: dict[str, int]) -> list[tuple[str, dict[str, int]]]:
    """Parent side: the other shapes to try, each (label, sizes)."""
    if not sizes:
        return []
    out = [("halved", {k: max(1, v // 2) for k, v in sizes.items()}),
           ("odd", {k: max(1, (3 * v) // 4 + 1) for k, v in sizes.items()})]
    return [(label, s) for label, s in out if s != sizes]


def judge(results: list[dict[str, Any]]) -> str | None:
    """The flag's message when the kernel failed a variant at which the reference ran."""
    failed = [r for r in results if r.get("verdict") in ("incorrect", "failed")]
    if not failed:
        return None
    shown = "; ".join(f"{r['label']} ({', '.join(f'{k}={v}' for k, v in r['sizes'].items())}): {r['detail']}"
                      for r in failed)
    return (f"Correct at the problem's shapes but not at {len(failed)} other size(s) of the same problem: {shown}. "
            "KernelBench's rules test one shape and do not fail it.")
