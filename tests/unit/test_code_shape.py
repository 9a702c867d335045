"""The layout's rules, checked on the source (docs/architecture.md draws them):

- no import cycle among the modules of leaderboard/, problems/ and evaluation/, counting imports
  inside functions, nor one through `if TYPE_CHECKING:` blocks (checked apart: they never run);
- an import inside a function only defers a heavy or optional dependency, and says so in a comment
  that contains "deferred" (on its line or the line above);
- no function longer than 60 lines (in benchmarks/ too), no module longer than 800;
- the layers import downwards only (LAYERS below; the same picture as docs/architecture.md), and so do
  the rooms of evaluation/ (EVALUATION_ROOMS);
- pages, the API and the admin never write a model themselves (`.save()`, `.delete()`, a manager's
  or a QuerySet's `create`/`update`, ...): they call the service that writes and records its user;
- a comment in product code gives its reason, never an issue number ("issue 28, case 1", "#38"):
  the reason outlives the tracker, and a reader should not need it to understand the code.

Migrations are left out: Django writes them.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("leaderboard", "problems", "evaluation")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 800
# Module prefix -> layer. A module may import modules of its own layer or lower ones, never higher.
LAYERS = {
    "evaluation": 0,  # the scoring library: no Django
    "problems": 1,
    "leaderboard.models": 2,
    "leaderboard.evaluations": 3,
    "leaderboard.boards": 3,  # the read model: marks, re-scoring, stored rows
    "leaderboard.reads": 3,
    "leaderboard.ingest": 4,
    "leaderboard.reviews.services": 4,  # the rules and actions; reviews' views, urls and api are pages/API
    "leaderboard": 5,  # pages, api/, admin, management commands, templatetags, demo
}
#: The rooms of evaluation/ (layer 0), lowest first, the same way (docs/evaluation.md, "Modules").
EVALUATION_ROOMS = {
    "evaluation.paths": 0,  # where the package lies
    "evaluation.sandbox": 1,  # the sandboxed processes seen from their parent
    "evaluation.results": 2,  # the result's types (its configuration's defaults from sandbox.limits), figures
    "evaluation.builds": 3,
    "evaluation.phases": 3,
    "evaluation.instruments": 4,  # run after timing, by the runner and inside the processes
    "evaluation.child": 5,  # what runs inside a sandboxed process
    "evaluation": 6,  # runner, sweep, cli and the package's face
}


def source_files() -> list[Path]:
    return sorted(
        path for package in PACKAGES for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts
    )


def function_files() -> list[Path]:
    """The files whose functions are held to MAX_FUNCTION_LINES: the packages' and the benchmarks'
    (scripts, but read and changed like the rest)."""
    return sorted([*source_files(), *(ROOT / "benchmarks").rglob("*.py")])


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


def _imports(
    tree: ast.AST, module: str, is_package: bool, type_only: bool = False
) -> list[tuple[ast.stmt, list[str], bool]]:
    """(node, imported module names, inside a function) for every import that can run (and, with
    `type_only`, those in `if TYPE_CHECKING:` blocks too)."""
    found: list[tuple[ast.stmt, list[str], bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not type_only:
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


def import_graph(type_only: bool = False) -> dict[str, set[str]]:
    modules = {module_name(path): path for path in source_files()}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for _node, targets, _in_function in _imports(tree, name, path.name == "__init__.py", type_only):
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


def test_no_cycle_hides_behind_type_checking() -> None:
    # A type-only import never runs, but two modules that name each other's types are one module
    # in two files: what one of them defines belongs in a third both import.
    found = cycles(import_graph(type_only=True))
    assert not found, f"import cycles through `if TYPE_CHECKING:` imports: {found}"


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


def long_functions(text: str, filename: str = "<source>") -> list[str]:
    """'line name (length lines)' for each function of the source over MAX_FUNCTION_LINES, counted
    from its def line to its last line."""
    long = []
    for node in ast.walk(ast.parse(text, filename=filename)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                long.append(f"{node.lineno} {node.name} ({length} lines)")
    return long


def test_no_function_is_longer_than_sixty_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path in function_files()
        for hit in long_functions(path.read_text(), filename=str(path))
    ]
    assert not long, "functions over 60 lines:\n" + "\n".join(long)


def test_the_length_check_sees_a_long_function_and_the_benchmarks() -> None:
    at_the_bound = "def short():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1)  # lines 1-60
    one_over = "class A:\n    def long(self):\n" + "        x = 1\n" * MAX_FUNCTION_LINES  # a method, from line 62
    assert long_functions(at_the_bound + one_over) == [f"62 long ({MAX_FUNCTION_LINES + 1} lines)"]
    checked = {path.relative_to(ROOT).as_posix() for path in function_files()}
    assert {"benchmarks/three_judges.py", "benchmarks/gpu/gpu_suite.py", "evaluation/runner.py"} <= checked


def test_no_module_is_longer_than_eight_hundred_lines() -> None:
    long = []
    for path in source_files():
        name, length = str(path.relative_to(ROOT)), len(path.read_text().splitlines())
        if length > MAX_MODULE_LINES:
            long.append(f"{name} ({length} lines)")
    assert not long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)


def layer(module: str, layers: dict[str, int] = LAYERS) -> int:
    prefix = max((p for p in layers if module == p or module.startswith(p + ".")), key=len)
    return layers[prefix]


def upward_imports(graph: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """'a (layer n) imports b (layer m)' for each import of a module of ``layers`` from a higher layer."""
    within = [m for m in graph if any(m == p or m.startswith(p + ".") for p in layers)]
    return [
        f"{a} (layer {layer(a, layers)}) imports {b} (layer {layer(b, layers)})"
        for a in sorted(within)
        for b in sorted(graph[a])
        if b in within and layer(b, layers) > layer(a, layers)
    ]


def test_layers_import_downwards_only() -> None:
    upward = upward_imports(import_graph(), LAYERS)
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_the_rooms_of_evaluation_import_downwards_only() -> None:
    upward = upward_imports(import_graph(), EVALUATION_ROOMS)
    assert not upward, "imports against evaluation/'s rooms:\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer("leaderboard.reads.board.rows") < layer("leaderboard.api.views")
    assert layer("evaluation.runner") < layer("problems.models") < layer("leaderboard.models")
    graph = {"evaluation.sandbox.limits": {"evaluation.results.types"}, "evaluation.results.types": set()}
    assert upward_imports(graph, EVALUATION_ROOMS) == [
        "evaluation.sandbox.limits (layer 1) imports evaluation.results.types (layer 2)"
    ]


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


# Product code for the issue-number check: everything but tests/, benchmarks/, docs (*.md) and migrations.
PRODUCT_DIRS = (*PACKAGES, "config", "kbl", "site", "templates", "static")
PRODUCT_TOP_FILES = ("Makefile", "manage.py")
# "issue 29", "Issue #13", "issues 19" and a bare "#38"; a standard's number ("UTS #39") is no issue.
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\s*\d+|(?<![\w&#/])(?<!UTS )(?<!UAX )#\d+\b(?![\w-])", re.IGNORECASE)
_HTML_COMMENT = re.compile(r"\{#.*?#\}|\{%\s*comment\s*%\}.*?\{%\s*endcomment\s*%\}|<!--.*?-->", re.DOTALL)
_C_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENT = {"js": re.compile(r"(?<![:\\])//[^\n]*"), "hash": re.compile(r"(?:^|(?<=\s))#[^\n]*", re.MULTILINE)}


def product_files() -> list[Path]:
    found = [ROOT / name for name in PRODUCT_TOP_FILES if (ROOT / name).is_file()]
    for folder in PRODUCT_DIRS:
        for path in (ROOT / folder).rglob("*"):
            skipped = {"migrations", "__pycache__"} & set(path.parts) or path.suffix in {".md", ".pyc"}
            if path.is_file() and not skipped:
                found.append(path)
    return sorted(found)


def _python_comments(text: str) -> list[tuple[int, str]]:
    """Comments and docstrings (any string standing alone as a statement), never string values."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.append((node.lineno, node.value.value))
    return found


def comments(name: str, text: str) -> list[tuple[int, str]]:
    """(first line, text) of each comment in a file, chosen by the file's kind."""
    if name.endswith(".py"):
        return _python_comments(text)
    if name.endswith(".html"):
        patterns = [_HTML_COMMENT]
    elif name.endswith(".css"):
        patterns = [_C_COMMENT]
    elif name.endswith(".js"):
        patterns = [_C_COMMENT, _LINE_COMMENT["js"]]
    else:  # shell, Makefile, Dockerfile, nginx, systemd, YAML, env files: `#` comments
        patterns = [_LINE_COMMENT["hash"]]
    return [(text.count("\n", 0, m.start()) + 1, m.group()) for p in patterns for m in p.finditer(text)]


def issue_numbers(name: str, text: str) -> list[str]:
    """'line: match' for each issue number in the file's comments, in line order."""
    hits = sorted(
        (line + comment.count("\n", 0, m.start()), m.group())
        for line, comment in comments(name, text)
        for m in ISSUE_NUMBER.finditer(comment)
    )
    return [f"{line}: {match}" for line, match in hits]


def test_product_comments_give_reasons_not_issue_numbers() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path in product_files()
        for hit in issue_numbers(path.name, path.read_text(errors="replace"))
    ]
    assert not found, "comments that explain code by an issue number (say the reason instead):\n" + "\n".join(found)


def test_the_issue_number_check_finds_one() -> None:
    python = (
        'COLOR = "#555"  # guards the boards (issue 28, case 1)\n'
        "def f():\n"
        '    """Issue 29: a kernel near the tolerance."""\n'
        "    return 1  # see #38\n"
        "# UTS #39 confusables; the issues tracker\n"
    )
    assert issue_numbers("a.py", python) == ["1: issue 28", "3: Issue 29", "4: #38"]
    assert issue_numbers("Makefile", "# Pages (issue 13; results)\nall:\n\techo '#1'\n") == ["1: issue 13"]
    assert issue_numbers("a.html", '<p style="color: #000">{# issue #7 #}</p>') == ["1: issue #7"]
    assert issue_numbers("a.css", "td { color: #999; } /* see issue 19 */") == ["1: issue 19"]
    assert issue_numbers("a.js", "const c = '#333';\n// fixes #12\n") == ["2: #12"]


# Pages, the API and the admin call a service for every write (docs/architecture.md, "Where
# things go"); the service records who made it. These modules may not write a model themselves.
WRITE_FREE = (
    "leaderboard/views.py", "leaderboard/forms.py", "leaderboard/admin.py", "leaderboard/ingest/admin_actions.py",
    "leaderboard/api/", "leaderboard/reviews/views.py", "leaderboard/reviews/forms.py", "leaderboard/runs/",
    "problems/admin.py",
)  # fmt: skip
#: Calls that write whatever they are called on: a model, a ModelForm, a serializer, a QuerySet.
ALWAYS_WRITES = {"save", "delete", "bulk_create", "bulk_update", "get_or_create", "update_or_create"}
#: Calls that write when called on a manager or a QuerySet, and are harmless on a dict (`update`).
QUERY_WRITES = {"create", "update"}
_QUERY_STEPS = {"objects", "filter", "exclude", "all", "select_related", "select_for_update", "queryset"}


def _chain(node: ast.AST) -> list[str]:
    """The names along a call's receiver: `Run.objects.filter(x=1)` gives Run, objects, filter."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            return [node.id, *reversed(names)]
        else:
            return list(reversed(names))


def model_writes(text: str) -> list[str]:
    """Lines of `text` that write a model directly (see ALWAYS_WRITES and QUERY_WRITES)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, receiver = node.func.attr, _chain(node.func.value)
        if receiver[:1] == ["super"]:  # the framework's own write path, extended (e.g. a form's clean)
            continue
        if method in ALWAYS_WRITES or (method in QUERY_WRITES and _QUERY_STEPS & set(receiver)):
            found.append(f"{node.lineno}: {'.'.join(receiver)}.{method}()")
    return found


def test_pages_the_api_and_the_admin_write_only_through_services() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in source_files()
        if str(path.relative_to(ROOT)).startswith(WRITE_FREE)
        for line in model_writes(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "write through a service (which records its user): " + "; ".join(offenders)


def test_the_write_check_sees_writes_and_not_dicts() -> None:
    source = (
        "Run.objects.create(name='x')\n"
        "Run.objects.filter(pk=1).update(name='y')\n"
        "queryset.update(name='z')\n"
        "form.save()\n"
        "run.delete()\n"
        "body.update(run=1)\n"
        "data = serializer.validated_data\n"
        "form.cleaned_data.get('x')\n"
        "super().save_model(request, obj, form, change)\n"
    )
    assert [line.split(":")[0] for line in model_writes(source)] == ["1", "2", "3", "4", "5"]
