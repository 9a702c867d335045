"""Which code measured a result: a digest of this package's own source, and the commit an operator
names (``KB_HARNESS_COMMIT``, e.g. set by the field script from its checkout). The digest needs no
git: a bare GPU host given a copy of ``evaluation/`` says the same as the checkout it came from."""

from __future__ import annotations

import functools
import hashlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from evaluation.paths import PACKAGE_DIR

_PACKAGE = Path(PACKAGE_DIR).resolve()


@functools.lru_cache(maxsize=1)
def harness_digest() -> str:
    """The first 12 hex digits of a SHA-256 over every ``.py`` file of the package (path and text,
    in path order): equal digests, equal code."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        h.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def harness_identity() -> dict[str, str]:
    """``harness`` (the digest) and, where the operator named it, ``harness_commit``."""
    out = {"harness": harness_digest()}
    commit = os.environ.get("KB_HARNESS_COMMIT", "").strip()
    if commit:
        out["harness_commit"] = commit[:40]
    return out


@functools.lru_cache(maxsize=1)
def torch_version() -> str:
    """The installed torch's version, read from its metadata (torch itself is not imported)."""
    try:
        return version("torch")
    except PackageNotFoundError:
        return "unknown"
