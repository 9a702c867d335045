"""Typed readers for settings that come from the environment.

Kept apart from settings.py so that system checks and tests can use the same parsing.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"{name}={raw!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


def env_optional_int(name: str) -> int | None:
    """An integer from the environment, or None when unset (the consumer then uses its own default)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    return env_int(name, 0)


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def secret_key_from_file(path: Path) -> str:
    """Read the local secret key, creating it (mode 0600) on first use.

    Used only when SECRET_KEY is not in the environment, so that a fresh checkout runs without
    anyone committing a key; the file is git-ignored.
    """
    try:
        key = path.read_text().strip()
        if key:
            return key
    except FileNotFoundError:
        pass
    key = secrets.token_urlsafe(50)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under a name of its own, then linked into place: processes starting together (the
    # web server, a worker, test runs) all end up with the one key that won, never a half-written one.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        key = path.read_text().strip() or key
    finally:
        tmp.unlink(missing_ok=True)
    return key
