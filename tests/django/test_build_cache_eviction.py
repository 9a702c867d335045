"""The sweeper's eviction of the host's build cache (issue 28 case 4): the settings reach
evaluation.builds.cache_evict, and the entry budget reaches the job's EvaluationConfig."""

from __future__ import annotations

import os

from evaluation.builds.entry import BuildDir
from leaderboard.evaluations import host_space


def _published(root: str, tag: str, age_s: float) -> BuildDir:
    b = BuildDir(root, f"# load_inline {tag}", "cpu")
    assert b.lock() and b.begin() and b.publish()
    b.unlock()
    lock = os.path.join(root, ".locks", b.key + ".lock")
    when = os.stat(lock).st_mtime - age_s
    os.utime(lock, (when, when))
    return b


def test_the_sweeper_evicts_entries_older_than_the_setting(tmp_path, monkeypatch, settings):
    monkeypatch.setenv("KB_BUILD_CACHE", str(tmp_path))
    settings.EVAL_BUILD_CACHE_MAX_AGE_DAYS = 2
    settings.EVAL_BUILD_CACHE_MAX_MB = 1000
    old, fresh = _published(str(tmp_path), "old", 3 * 86400), _published(str(tmp_path), "fresh", 86400)
    assert host_space.evict_build_cache() == [old.key]
    assert fresh.built and not old.built
