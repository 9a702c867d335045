"""The layout's rules, checked on the source (docs/architecture.md draws them):

- no import cycle among the modules of leaderboard/, problems/ and evaluation/, counting imports
  inside functions (only `if TYPE_CHECKING:` blocks are left out: they never run);
- an import inside a function only defers a heavy or optional dependency, and says so in a comment
  that contains "deferred" (on its line or the line above);
- no function longer than 60 lines;
- the layers import downwards only (LAYERS below; the same picture as docs/architecture.md).

Migrations are left out: Django writes them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("leaderboard", "problems", "evaluation")
MAX_FUNCTION_LINES = 60
# Module prefix -> layer. A module may import modules of its own layer or lower ones, never higher.
LAYERS = {
    "evaluation": 0,  # the scoring library: no Django
    "problems": 1,
    "leaderboard.models": 2,
    "leaderboard.evaluations": 3,
    "leaderboard.reads": 3,
    "leaderboard.ingest": 4,
    "leaderboard.reviews.services": 4,  # the rules and actions; reviews' views, urls and api are pages/API
    "leaderboard": 5,  # pages, api/, admin, management commands, templatetags, demo
}


def source_files() -> list[Path]:
    return sorted(
        path for package in PACKAGES for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts
    )


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[ast.stmt, list[str], bool]]:
    """(node, imported module names, inside a function) for every import that can run."""
    found: list[tuple[ast.stmt, list[str], bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for orelse in child.orelse:
                    visit(orelse, in_function)
                continue
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.append((child, [alias.name for alias in child.names], in_function))
            elif isinstance(child, ast.ImportFrom):
                found.append((child, _from_targets(child, module, is_package), in_function))
            visit(child, inside)

    visit(tree, False)
    return found


def _from_targets(node: ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    # `from pkg import name` imports pkg.name when that is a module; otherwise it imports pkg.
    return [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in source_files()}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for _node, targets, _in_function in _imports(tree, name, path.name == "__init__.py"):
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    found = cycles(import_graph())
    assert not found, f"import cycles: {found}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_inside_functions_say_why_they_are_deferred() -> None:
    hidden = []
    for path in source_files():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines), filename=str(path))
        for node, _targets, in_function in _imports(tree, module_name(path), path.name == "__init__.py"):
            if not in_function:
                continue
            context = " ".join(lines[max(0, node.lineno - 2) : node.end_lineno]).lower()
            if "deferred" not in context:
                hidden.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not hidden, "imports inside functions without a deferred comment:\n" + "\n".join(hidden)


def test_no_function_is_longer_than_sixty_lines() -> None:
    long = []
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, "functions over 60 lines:\n" + "\n".join(long)


def layer(module: str) -> int:
    prefix = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[prefix]


def test_layers_import_downwards_only() -> None:
    upward = [
        f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
        for a, targets in sorted(import_graph().items())
        for b in sorted(targets)
        if layer(b) > layer(a)
    ]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer("leaderboard.reads.board.rows") < layer("leaderboard.api.views")
    assert layer("evaluation.runner") < layer("problems.models") < layer("leaderboard.models")


def test_the_site_never_imports_the_benchmarks() -> None:
    """The benchmarks drive the site (benchmarks/web/bench.py sets Django up); never the reverse."""
    files = [*source_files(), *sorted((ROOT / "config").rglob("*.py"))]
    upward = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in files
        for node, targets, _ in _imports(ast.parse(path.read_text()), module_name(path), path.name == "__init__.py")
        if any(target == "benchmarks" or target.startswith("benchmarks.") for target in targets)
    ]
    assert not upward, "the site imports the benchmarks:\n" + "\n".join(upward)
