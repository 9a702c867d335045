"""Which code measured a result (evaluation.results.harness_id): a digest of the package's source that moves
with any change to it, and the commit an operator names."""

from __future__ import annotations

import re

from evaluation.results import harness_id


def _digest_of(folder, monkeypatch) -> str:
    monkeypatch.setattr(harness_id, "_PACKAGE", folder)
    harness_id.harness_digest.cache_clear()
    try:
        return harness_id.harness_digest()
    finally:
        harness_id.harness_digest.cache_clear()


def test_the_digest_moves_with_the_code(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "timing.py").write_text("TARGET = 0.01\n")
    (tmp_path / "sub" / "x.py").write_text("pass\n")
    first = _digest_of(tmp_path, monkeypatch)
    assert re.fullmatch(r"[0-9a-f]{12}", first)
    assert _digest_of(tmp_path, monkeypatch) == first  # the same code, the same digest
    (tmp_path / "timing.py").write_text("TARGET = 0.02\n")
    assert _digest_of(tmp_path, monkeypatch) != first
    (tmp_path / "timing.py").write_text("TARGET = 0.01\n")
    (tmp_path / "sub" / "x.py").rename(tmp_path / "sub" / "y.py")  # a file's name is part of the code
    assert _digest_of(tmp_path, monkeypatch) != first


def test_the_operators_commit_is_named_where_given(monkeypatch):
    monkeypatch.delenv("KB_HARNESS_COMMIT", raising=False)
    assert set(harness_id.harness_identity()) == {"harness"}
    monkeypatch.setenv("KB_HARNESS_COMMIT", "e586974")
    identity = harness_id.harness_identity()
    assert identity["harness_commit"] == "e586974"
