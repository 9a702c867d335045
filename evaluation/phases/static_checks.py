"""Static inspection of kernel source text (runs in the parent; never executes the kernel)."""

from __future__ import annotations

import ast
import copy
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


class _ReadAsModel(ast.NodeTransformer):
    """``ModelNew`` read as ``Model`` (its name, ``super(ModelNew, self)``), docstrings dropped: what
    is left of a class the reference's own differs only where the code does."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id="Model", ctx=node.ctx) if node.id == "ModelNew" else node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node = self._body_without_docstring(node)
        if node.name == "ModelNew":
            node.name = "Model"
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._body_without_docstring(node)

    def _body_without_docstring(self, node: Any) -> Any:
        self.generic_visit(node)
        body = node.body
        if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            node.body = body[1:]
        return node


def _dump(node: ast.AST) -> str:
    return ast.dump(_ReadAsModel().visit(copy.deepcopy(node)), annotate_fields=False)


def _top_level(tree: ast.Module) -> dict[str, ast.stmt]:
    """Each name a module binds at its top level, with the statement that binds it last."""
    names: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
    return names


def runs_only_reference_code(kernel_src: str, problem_src: str) -> bool:
    """Whether ``ModelNew`` is the reference's ``Model`` verbatim and so is every top-level name it
    reaches in the kernel's module (a class, a function, an assignment, an import): the problem's own
    statement for that name. Then nothing of the kernel's own can run in its forward. A forward that
    is the reference's while ``__init__`` builds the kernel's own modules (a level 3 network of custom
    layers) reaches the kernel's code, and is no fallback."""
    try:
        kernel, problem = _top_level(ast.parse(kernel_src)), _top_level(ast.parse(problem_src))
    except SyntaxError:
        return False
    if "ModelNew" not in kernel or "Model" not in problem:
        return False
    todo, seen = [("ModelNew", "Model")], set()
    while todo:
        name, problem_name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        own, reference = kernel[name], problem.get(problem_name)
        if reference is None or _dump(own) != _dump(reference):
            return False
        todo += [(n.id, n.id) for n in ast.walk(own) if isinstance(n, ast.Name) and n.id in kernel]
    return True


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
    if runs_only_reference_code(kernel_src, problem_src):
        flags.append(("fallback_to_reference", "ModelNew is the reference's Model verbatim, and so is everything "
                                               "it reaches: none of the kernel's own code runs in its forward."))
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
