"""Lay out the corpus of real, model-written KernelBench kernels as a sweep run folder.

The kernels' code is never committed: ``benchmarks/corpus/manifest.jsonl`` names each one
(repository, commit, path, problem, backend, model) and the problem file it was written for. This
script reads them from local clones and writes::

    OUT/problems/level<L>/<problem>.py     the problem each kernel was written for
    OUT/kernels/level<L>/<problem>.py      the kernel

so that ``python -m evaluation sweep OUT/problems --kernels OUT/kernels --device cuda`` runs them.

    python benchmarks/kernel_corpus.py OUT [--mirrors DIR] [--backend cuda|triton] [--limit N] [--skip N]

``--mirrors DIR`` holds clones as ``DIR/<owner>+<name>/repo`` (what the session's fetch tool makes)
or ``DIR/<owner>/<name>``; a repository found in neither is cloned from GitHub into ``DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "corpus", "manifest.jsonl")


def load_manifest(path: str = MANIFEST) -> list[dict[str, object]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def clone_for(repo: str, mirrors: str) -> str:
    owner, name = repo.split("/")
    for cand in (os.path.join(mirrors, f"{owner}+{name}", "repo"), os.path.join(mirrors, owner, name)):
        if os.path.isdir(cand):
            return cand
    target = os.path.join(mirrors, owner, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", f"https://github.com/{repo}", target], check=True)
    return target


def show(clone: str, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", clone, "show", f"{commit}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--mirrors", default=os.environ.get("KB_MIRRORS", "/work/.mirror"))
    ap.add_argument("--backend", choices=["cuda", "triton"], default=None)
    ap.add_argument("--skip", type=int, default=0, help="leave out the first N entries (after --backend)")
    ap.add_argument("--limit", type=int, default=None, help="at most N entries")
    args = ap.parse_args(argv)
    rows = [r for r in load_manifest() if args.backend in (None, r["backend"])]
    rows = rows[args.skip :][: args.limit]
    for r in rows:
        kernel = show(clone_for(str(r["repository"]), args.mirrors), str(r["commit"]), str(r["path"]))
        problem = show(
            clone_for(str(r["problem_repository"]), args.mirrors), str(r["problem_commit"]), str(r["problem_path"])
        )
        rel = os.path.join(f"level{r['level']}", f"{r['problem']}.py")
        write(os.path.join(args.out, "kernels", rel), kernel)
        write(os.path.join(args.out, "problems", rel), problem)
    print(
        f"{len(rows)} kernels laid out under {args.out} "
        f"({sum(r['backend'] == 'cuda' for r in rows)} CUDA, {sum(r['backend'] == 'triton' for r in rows)} Triton)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
