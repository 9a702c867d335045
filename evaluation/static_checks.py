"""Static inspection of kernel source text (runs in the parent; never executes the kernel)."""

from __future__ import annotations

import ast
import re
import sys
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


def required_modules(source: str) -> list[str]:
    """Top-level modules outside the standard library that ``source`` imports unconditionally (at
    module level, outside try blocks and functions), in order: e.g. ``["torch", "transformers"]`` for
    a KernelBench level 4 problem. Empty for a source that does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found = [node.module.split(".")[0]]
        else:
            continue
        names += [n for n in found if n not in sys.stdlib_module_names and n != "__future__" and n not in names]
    return names


_PRETRAINED = re.compile(r"\bfrom_pretrained\s*\(")
_MODEL_NAME = re.compile(r"""\bmodel_(?:name|id)\s*=\s*["']([^"'\s]+)["']""")
_MODEL_ID = re.compile(r"""["']([A-Za-z0-9][\w.-]*/[\w.-]+)["']""")


def pretrained_models(source: str) -> list[str]:
    """Hugging Face models whose weights ``source`` loads with ``from_pretrained`` (KernelBench level 4):
    the quoted ``org/name`` ids in the source, or ``["(unnamed)"]``; empty when it loads none."""
    if not _PRETRAINED.search(source):
        return []
    ids = list(dict.fromkeys(_MODEL_NAME.findall(source) + _MODEL_ID.findall(source)))
    return ids or ["(unnamed)"]
