"""Where the site is and who the client is: flags, then the environment, then the config file."""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

from kbl.errors import UsageError

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class Settings:
    url: str
    token: str


def config_path() -> Path:
    return Path(os.environ.get("KBL_CONFIG") or Path.home() / ".config" / "kbl" / "config")


def read_file(path: Path) -> dict[str, str]:
    """The [kbl] section of the INI file at `path` ({} when there is none)."""
    parser = configparser.ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    return dict(parser["kbl"]) if parser.has_section("kbl") else {}


def settings(url: str | None = None, token: str | None = None) -> Settings:
    from_file = read_file(config_path())
    return Settings(
        url=(url or os.environ.get("KBL_URL") or from_file.get("url") or DEFAULT_URL).rstrip("/"),
        token=token or os.environ.get("KBL_TOKEN") or from_file.get("token") or "",
    )
