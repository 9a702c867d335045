"""benchmarks/gpu/in_tree.sh: a command run in an earlier commit's tree, with the carried folders
linked in, so that a measurement spread over several sessions keeps the code it began with."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu" / "in_tree.sh"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_the_command_runs_in_the_archived_tree_with_the_carried_folders(tmp_path):
    old = tmp_path / "repo"
    old.mkdir()
    _git(old, "init", "-q")
    (old / "code.txt").write_text("the old code\n")
    _git(old, "add", "code.txt")
    _git(old, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old")
    checkout = tmp_path / "checkout"
    (checkout / ".whl").mkdir(parents=True)
    (checkout / ".whl" / "a.whl").write_text("wheel")
    (checkout / ".field" / "KernelBenchLeaderboard").mkdir(parents=True)
    (checkout / "code.txt").write_text("the new code\n")
    archive = checkout / ".field" / "tree-old.tar.gz"
    _git(old, "archive", "--format=tar.gz", "-o", str(archive), "HEAD")

    r = subprocess.run(
        [
            "bash",
            str(SCRIPT),
            ".field/tree-old.tar.gz",
            "sh",
            "-c",
            "pwd; cat code.txt; cat .whl/a.whl; echo; ls -d .field/KernelBenchLeaderboard; ls -a .redis 2>&1 | head -1",
        ],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == str(checkout / ".field" / "tree")
    assert lines[2:5] == ["the old code", "wheel", ".field/KernelBenchLeaderboard"]
    assert "No such file" in lines[5]  # nothing carried, nothing linked
    assert (checkout / "code.txt").read_text() == "the new code\n"


def test_it_says_how_to_call_it_when_given_no_command(tmp_path):
    r = subprocess.run(["bash", str(SCRIPT), "only-an-archive"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2
    assert "usage:" in r.stderr


def test_an_overlay_runs_this_checkout_with_the_archived_folders_as_they_were(tmp_path):
    """The field's second pass: the site's code of today, the evaluation library the pass began with."""
    old = tmp_path / "repo"
    (old / "evaluation").mkdir(parents=True)
    (old / "evaluation" / "runner.py").write_text("old runner\n")
    (old / "site.txt").write_text("the old site\n")
    _git(old, "init", "-q")
    _git(old, "add", ".")
    _git(old, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old")
    checkout = tmp_path / "checkout"
    (checkout / "evaluation").mkdir(parents=True)
    (checkout / "evaluation" / "runner.py").write_text("new runner\n")
    (checkout / "evaluation" / "added_since.py").write_text("new module\n")
    (checkout / "site.txt").write_text("the new site\n")
    (checkout / ".whl").mkdir()
    (checkout / ".whl" / "a.whl").write_text("wheel")
    (checkout / ".field").mkdir()
    archive = checkout / ".field" / "evaluation-old.tar.gz"
    _git(old, "archive", "--format=tar.gz", "-o", str(archive), "HEAD", "evaluation")

    r = subprocess.run(
        ["bash", str(SCRIPT), "--overlay", ".field/evaluation-old.tar.gz", "sh", "-c",
         "cat evaluation/runner.py site.txt .whl/a.whl; echo; ls evaluation; ls -d .field/tree 2>&1 | head -1"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip

    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "over this checkout" in lines[0]
    assert lines[1:4] == ["old runner", "the new site", "wheel"]
    assert lines[4:5] == ["runner.py"], "a module the archived library lacked does not stay behind"
    assert "No such file" in lines[5], "the tree holds no copy of itself"
    assert (checkout / "evaluation" / "runner.py").read_text() == "new runner\n"
