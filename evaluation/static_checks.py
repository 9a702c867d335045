"""Static inspection of kernel source text (runs in the parent; never executes the kernel)."""

from __future__ import annotations

import ast
import re
from typing import Any

CUDA_MARKERS = ("__global__", "cuda_sources", "<cuda_runtime", "cuda.h>", "load_inline(" + "")
TRITON_MARKERS = ("import triton", "from triton", "@triton.jit", "triton.jit")
CPP_MARKERS = ("load_inline", "cpp_extension", "cpp_sources")
OTHER_NATIVE = ("cupy", "numba", "ctypes.CDLL", "tilelang", "cutlass", "thunderkittens", "torch.ops.load_library")
HARNESS_PATTERNS = (
    (r"\bgc\s*\.\s*get_(objects|referrers|referents)\b", "gc.get_objects/get_referrers"),
    (r"\b_getframe\b", "sys._getframe"),
    (r"\bcurrentframe\b", "inspect.currentframe"),
    (r"\bf_back\b", "frame.f_back"),
    (r"\bf_locals\b", "frame.f_locals"),
    (r"\bf_globals\b", "frame.f_globals"),
    (r"\binspect\s*\.\s*stack\b", "inspect.stack"),
)


def detect_backend(src: str) -> str:
    if any(m in src for m in TRITON_MARKERS):
        return "triton"
    if "__global__" in src or "cuda_sources" in src or "<<<" in src:
        return "cuda"
    if any(m in src for m in CPP_MARKERS):
        return "cpp"
    if any(m in src for m in OTHER_NATIVE):
        return "other"
    return "torch"


def _forward_dump(src: str, cls_name: str) -> str | None:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    body = item.body
                    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                                             ast.Constant):
                        body = body[1:]  # ignore docstrings
                    return ast.dump(ast.Module(body=body, type_ignores=[]), annotate_fields=False)
    return None


def _has_try_fallback(src: str) -> bool:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and node.handlers:
            return True
    return False


def analyse(kernel_src: str, problem_src: str) -> dict[str, Any]:
    """Return {'backend': str, 'flags': [(code, msg)], 'notes': [(code, msg)]}."""
    flags: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    backend = detect_backend(kernel_src)
    if backend == "torch":
        notes.append(("pytorch_only", "The kernel uses only PyTorch operators: no custom C++, CUDA or Triton code."))
    if _has_try_fallback(kernel_src):
        notes.append(("try_except_fallback", "The kernel contains try/except blocks; a failing custom path may "
                                             "silently fall back to PyTorch."))
    ref_fwd = _forward_dump(problem_src, "Model")
    ker_fwd = _forward_dump(kernel_src, "ModelNew")
    if ref_fwd is not None and ker_fwd is not None and ref_fwd == ker_fwd:
        flags.append(("fallback_to_reference", "ModelNew.forward is the reference Model.forward verbatim."))
    hits = [label for pat, label in HARNESS_PATTERNS if re.search(pat, kernel_src)]
    if hits:
        flags.append(("harness_memory_access", "The kernel source uses " + ", ".join(hits) +
                      ", which can reach the harness's objects."))
    return {"backend": backend, "flags": flags, "notes": notes}
