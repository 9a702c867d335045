"""A run folder's `generation_config.yaml`, as KernelBench's `scripts/generate_samples.py` saves it
(pydra's save_yaml of its GenerationConfig: `model_name`, `level`, `prompt_option`, `num_samples`,
`precision`, `backend`, `run_name`, ... with unset values written as the string "None").

Its metadata becomes the import's defaults; what the user gives (command flags, API fields)
overrides it. Only the keys below are read; every other key is ignored.
"""

from __future__ import annotations

from typing import Any

import yaml

from leaderboard.ingest.uploads import RowErrors
from leaderboard.models import Precision

CONFIG_NAME = "generation_config.yaml"
PROMPT_SETTINGS = {"zero_shot": "zero-shot", "one_shot": "one-shot", "few_shot": "few-shot"}


def prompt_option(setting: str) -> str:
    """A run's setting as KernelBench's prompt_option names it ("one-shot" -> "one_shot"): the
    inverse of PROMPT_SETTINGS, so that an export reads back as KernelBench wrote it."""
    return {ours: theirs for theirs, ours in PROMPT_SETTINGS.items()}.get(setting, setting)


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in ("", "None", "null"))


def _whole(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RowErrors([f"{CONFIG_NAME}: {key} must be a whole number from {low} to {high}, not {value!r}"])
    return value


def _text(value: Any, key: str, max_length: int) -> str:
    text = str(value).strip()
    if not text.isprintable() or len(text) > max_length:
        raise RowErrors([f"{CONFIG_NAME}: {key} must be one line of at most {max_length} characters"])
    return text


def parse(text: str) -> dict[str, Any]:
    """The import defaults the file gives: any of model, level, setting, samples, precision, name."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RowErrors([f"{CONFIG_NAME}: not valid YAML ({str(exc).splitlines()[0]})"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RowErrors([f"{CONFIG_NAME}: must be a mapping of settings"])
    found = {key: value for key, value in data.items() if not _unset(value)}
    defaults: dict[str, Any] = {}
    if "model_name" in found:
        defaults["model"] = _text(found["model_name"], "model_name", 120)
    if "level" in found:
        defaults["level"] = _whole(found["level"], "level", 1, 4)
    if "prompt_option" in found:
        option = _text(found["prompt_option"], "prompt_option", 120).lower()
        defaults["setting"] = PROMPT_SETTINGS.get(option, option)
    if "num_samples" in found:
        defaults["samples"] = _whole(found["num_samples"], "num_samples", 1, 10_000)
    if "precision" in found:
        precision = _text(found["precision"], "precision", 10).lower()
        if precision not in Precision.values:
            raise RowErrors(
                [f"{CONFIG_NAME}: precision must be one of {', '.join(Precision.values)}, not {precision!r}"]
            )
        defaults["precision"] = precision
    if "run_name" in found:
        defaults["name"] = _text(found["run_name"], "run_name", 200)
    return defaults


def with_defaults(given: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`given` (flags, API fields) over `defaults` (the file): a given value that is empty or None
    leaves the file's value in place."""
    return defaults | {key: value for key, value in given.items() if value not in (None, "")}
