"""Reading KernelBench problem files: names, the definitions they must have, and tags.

Files are parsed, never executed: importing a checkout must not run its code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.phases.static_checks import pretrained_models, required_modules
from problems.importing import checked_int
from problems.models import LEVELS, Problem

PROBLEM_FILE = re.compile(r"^(?P<number>[1-9]\d*)_(?P<name>.+)\.py$", re.ASCII)
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")

# Tag -> (a pattern searched in the problem's name, words apart: "Conv2D ReLU BiasAdd"; a pattern that
# must match a whole name the source calls: `nn.Conv2d(` -> "conv2d", `torch.matmul(` -> "matmul").
# Docstrings, comments and variable names never count ("Performs" is no RMSNorm, `scale = ...` no
# scaling). Case-insensitive; order is display order (tests/unit/test_problem_tags.py).
TAG_RULES: dict[str, tuple[str, str]] = {
    "matmul": (
        r"\b(matmul|gemm|bmm|mlp)\b|\bmatrix (?!scalar)(\w+ )*multiplication",
        r"matmul|mm|bmm|addmm|baddbmm|einsum|linear|tensordot|mv",
    ),
    "conv": (r"\bconv", r"conv(?!ert)\w*"),
    "norm": (r"norm\b", r"\w*norm(\dd)?|normalize"),
    "activation": (
        r"(relu|gelu|sigmoid|tanh|swish|silu|softplus|softsign|elu|mish|activation)\b",
        r"(leaky_?|hard|log)?(relu6?|gelu|sigmoid|tanh|swish|silu|softplus|softsign|s?elu|mish)_?",
    ),
    "reduction": (
        r"\b(sum|mean|max(?! pool)|min|argmax|argmin|cumsum|cumprod|logsumexp|reduction)\b",
        r"sum|mean|max|min|amax|amin|argmax|argmin|cumsum|cumprod|logsumexp|prod",
    ),
    "softmax": (r"softmax", r"(log_?)?softmax"),
    "pooling": (r"pool", r"\w*pool\w*"),
    "attention": (r"attention", r"\w*attention\w*"),
    "loss": (r"loss\b", r"\w*_loss|\w*loss|cross_entropy|kl_div"),
    "recurrent": (r"lstm|gru\b|gru[a-z]|rnn", r"lstm\w*|gru\w*|rnn\w*"),
    "elementwise": (
        r"\b(\w*add|multiply|subtract|divide|scal(e|ing)|scalar|clamp|hardtanh|exp|elementwise)\b",
        r"add|mul|sub|div|clamp|exp|hardtanh",
    ),
}
LEVEL_TAGS = {2: "fused", 3: "model", 4: "model"}


@dataclass(frozen=True)
class ProblemFile:
    level: int
    number: int
    name: str
    path: Path
    source: str
    tags: str


@dataclass
class ScanResult:
    problems: list[ProblemFile] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # reported, not imported


class MalformedInput(Exception):
    """Input that cannot be imported at all; the message names the file and line or key."""


def find_levels_root(path: Path) -> Path:
    """The folder holding level1/ ... level4/: `path` itself or its `KernelBench/` folder."""
    for candidate in (path, path / "KernelBench"):
        if any((candidate / f"level{level}").is_dir() for level in LEVELS):
            return candidate
    raise MalformedInput(f"{path}: no level1/ ... level4/ folders here or under {path / 'KernelBench'}")


def missing_definitions(source: str, path: Path) -> list[str]:
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise MalformedInput(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from None
    defined = {
        node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for node in tree.body:
        if isinstance(node, ast.Assign):
            defined.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return [name for name in REQUIRED_NAMES if name not in defined]


def guess_tags(level: int, name: str, source: str) -> str:
    """Tags by TAG_RULES from the problem's name and the names its source calls, the level's tag
    first and what it needs beyond PyTorch last: "fused,conv,activation,elementwise"."""
    words = name.replace("_", " ").lower()
    called = called_names(source)
    tags = [
        tag
        for tag, (in_name, in_calls) in TAG_RULES.items()
        if re.search(in_name, words) or any(re.fullmatch(in_calls, call) for call in called)
    ]
    if level in LEVEL_TAGS:
        tags.insert(0, LEVEL_TAGS[level])
    return ",".join(tags + requirement_tags(source))


def called_names(source: str) -> set[str]:
    """The names a source calls, lowercased (`nn.Conv2d(...)` -> "conv2d", `x.sum()` -> "sum"), and
    "matmul" for the `@` operator; empty for a source that does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr.lower())
            elif isinstance(func, ast.Name):
                names.add(func.id.lower())
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            names.add("matmul")
    return names


# Modules every evaluation host has; anything else a problem imports is a requirement worth naming.
BASE_MODULES = {"torch", "numpy", "triton"}


def requirement_tags(source: str) -> list[str]:
    """What a problem needs beyond PyTorch, as tags: `needs-<module>` for each module it imports
    (level 4 imports `transformers`) and `needs-weights` when it loads pretrained weights, which
    a sandbox with no network cannot download."""
    tags = [f"needs-{module}" for module in required_modules(source) if module not in BASE_MODULES]
    if pretrained_models(source):
        tags.append("needs-weights")
    return tags


def read_source(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedInput(f"{path}: byte {exc.start} is not UTF-8") from None


def scan_checkout(path: Path) -> ScanResult:
    """Every problem file under a KernelBench checkout, validated; raises MalformedInput."""
    root = find_levels_root(path)
    result = ScanResult()
    for level in LEVELS:
        folder = root / f"level{level}"
        if not folder.is_dir():
            continue
        for file in sorted(folder.iterdir()):
            if file.suffix != ".py" or file.name.startswith("__"):
                continue
            match = PROBLEM_FILE.match(file.name)
            if not match:
                result.skipped.append(f"{file}: name is not <number>_<Name>.py")
                continue
            try:
                number = checked_int(match["number"], Problem, "number")
            except ValueError as exc:
                result.skipped.append(f"{file}: problem number {exc}")
                continue
            source = read_source(file)
            missing = missing_definitions(source, file)
            if missing:
                result.skipped.append(f"{file}: does not define {', '.join(missing)}")
                continue
            name = match["name"]
            result.problems.append(ProblemFile(level, number, name, file, source, guess_tags(level, name, source)))
    seen: dict[tuple[int, int], Path] = {}
    for problem in result.problems:
        key = (problem.level, problem.number)
        if key in seen:
            raise MalformedInput(f"{problem.path}: level {key[0]} number {key[1]} is also {seen[key]}")
        seen[key] = problem.path
    return result


# KernelBench's harness names its per-precision tolerances with this function since its main branch
# changed fp32 from 1e-2 to 1e-4 (Nov 2025); a checkout whose harness has it is scored by "main".
_CURRENT_TOLERANCE_MARK = "get_tolerance_for_precision"


def infer_kernelbench_version(path: Path) -> tuple[str, str]:
    """The KernelBench version a checkout's problems were scored under, with the evidence:
    "main" when its harness has per-precision tolerances, else "v0.1" when it has the v0.1 changelog,
    else "v0". `path` is the checkout or its KernelBench/ folder; other folders (the starter catalogue)
    get the current rules."""
    levels_root = find_levels_root(path)
    if levels_root.name != "KernelBench":
        return "main", "not a KernelBench checkout (no KernelBench/ folder): KernelBench's current rules"
    checkout = levels_root.parent
    for harness in (checkout / "src" / "kernelbench" / "eval.py", checkout / "src" / "eval.py"):
        if harness.is_file() and _CURRENT_TOLERANCE_MARK in harness.read_text(encoding="utf-8", errors="replace"):
            return "main", f"{harness.relative_to(checkout)} has per-precision tolerances"
    if (levels_root / "changelog" / "v0.1").exists():
        return "v0.1", "KernelBench/changelog/v0.1 is there and the harness has one tolerance for all"
    return "v0", "no changelog and no per-precision tolerances in the harness"
