"""The field's figures without its code: a file that says what KernelBench's original leaderboard
published (models, problems, each kernel's hash, public URL and published figures, which kernels
its page ranks) and holds no kernel source and no problem text, so it can be committed and
loaded anywhere (seed_demo loads data/field/kernelbench_leaderboard_figures.json).

Made from a checkout by `manage.py export_field_figures CHECKOUT --commit SHA` (figures_document);
read back by read_figures into the same Leaderboard that a checkout gives, with every source ""
and its hash and URL given, which kernelbench_leaderboard.store_leaderboard stores as kernels and
problems without source (Kernel.source_url, Problem.source_url). Importing the checkout later fills
each source in, as the hashes match.
"""

from __future__ import annotations

import json
from pathlib import Path

from leaderboard.ingest.kernelbench_leaderboard import (
    FIGURE_KEYS,
    PUBLISHED_HARDWARE,
    RAW_PROBLEM_OFFSET,
    SHA256,
    SOURCE_URL,
    Leaderboard,
    ListedKernel,
    ListedProblem,
    public_url,
)
from problems.kernelbench_files import MalformedInput, read_source

FORMAT = "kernelbench-leaderboard-figures/1"
FIGURE_FIELDS = ("correct", *FIGURE_KEYS)


def figures_document(board: Leaderboard, made_by: str) -> dict:
    """The figures file's content: everything of `board` but the code."""
    return {
        "format": FORMAT,
        "source": SOURCE_URL,
        "commit": board.commit,
        "timed_on": PUBLISHED_HARDWARE,
        "made_by": made_by,
        "note": f"raw_data.json's problem_id + {RAW_PROBLEM_OFFSET} = problem; times in ms; no kernel code or problem text",
        "problems": [
            {"level": p.level, "number": p.number, "name": p.name, "tags": p.tags, "source_hash": p.hash,
             "url": p.source_url}
            for p in sorted(board.problems, key=lambda p: (p.level, p.number))
        ],
        "kernels": [
            {"model": k.model, "display_name": k.display_name, "level": k.level, "problem": k.number,
             "file": k.file, "source_hash": k.hash, "url": k.source_url, "ranked": k.ranked,
             **{name: k.figures.get(name) for name in FIGURE_FIELDS}}
            for k in sorted(board.kernels, key=lambda k: (k.level, k.number, k.model))
        ],
    }  # fmt: skip


def write_figures(board: Leaderboard, path: Path, made_by: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures_document(board, made_by), indent=1, sort_keys=False) + "\n", encoding="utf-8")


def read_figures(path: Path) -> Leaderboard:
    """A figures file as a Leaderboard without code; MalformedInput naming the fault."""
    try:
        document = json.loads(read_source(path))
    except json.JSONDecodeError as exc:
        raise MalformedInput(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise MalformedInput(f"{path}: not a figures file ({FORMAT})")
    commit = str(document.get("commit") or "main")
    try:
        problems = [_problem(item, commit) for item in document["problems"]]
        kernels = [_kernel(item, commit) for item in document["kernels"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedInput(f"{path}: malformed entry: {exc}") from None
    named = {(p.level, p.number) for p in problems}
    strays = [k for k in kernels if (k.level, k.number) not in named]
    if strays:
        raise MalformedInput(
            f"{path}: kernel {strays[0].file} names level {strays[0].level} problem {strays[0].number}, not listed"
        )
    return Leaderboard(problems, kernels, commit)


def _hash(item: dict) -> str:
    digest = str(item["source_hash"])
    if not SHA256.match(digest):
        raise ValueError(f"source_hash {digest[:70]!r} is not a sha256")
    return digest


def _whole(value) -> int:
    if type(value) is not int or value < 1:
        raise ValueError(f"{value!r} is not a positive whole number")
    return value


def _problem(item: dict, commit: str) -> ListedProblem:
    level, number = _whole(item["level"]), _whole(item["number"])
    url = public_url(commit, f"docs/assets/problems/l{level}_p{number}.py")
    return ListedProblem(level, number, str(item["name"]), "", _hash(item), url, str(item.get("tags", "")))


def _kernel(item: dict, commit: str) -> ListedKernel:
    figures = {name: item.get(name) for name in FIGURE_FIELDS}
    for name in FIGURE_KEYS:
        value = figures[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ValueError(f"{name} {value!r} is not a positive number")
    if figures["speedup_eager"] is None:
        raise ValueError(f"kernel {item.get('file')!r} has no speedup_eager")
    file = str(item["file"])
    return ListedKernel(
        str(item["model"]), str(item["display_name"]), _whole(item["level"]), _whole(item["problem"]), "", file,
        figures, bool(item.get("ranked")), _hash(item), public_url(commit, f"docs/assets/solutions/{file}.py"),
    )  # fmt: skip
