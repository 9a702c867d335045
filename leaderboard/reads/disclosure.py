"""What of an evaluation everyone may see; the rest only reviewers, admins and the kernel's
submitter see (leaderboard.reviews.services.can_read_raw_output decides who).

- The log and the error text are the kernel's own output: a kernel that prints /etc/passwd, or
  raises an exception carrying a file's contents, would publish them. Public
  replies leave both out and say so.
- Worker host details tell an attacker about the hosts: the worker's host name and pid
  (its name, in the progress line and in failure reasons), and from the sandbox's environment the
  uids it runs kernels as, the paths it hides, the build cache's paths. The environment is
  published by an allow-list, so a key the scoring library adds later stays private until
  someone adds it here.
- The instruments' record (evaluation/instruments/) is public, less what the kernel's process wrote:
  error text it raised (an ``error`` key anywhere in it) and the names of the GPU activities in its
  profile (a kernel names what it launches, and could name it after a file's contents). The rest of
  what that process reported (figures, kinds, math switches) is rebuilt from an allow-list before it
  is stored (evaluation.instruments.sanitize), and again here for records stored before that.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from evaluation.instruments.sanitize import clean_record
from leaderboard.evaluations.progress import Progress

# What a visitor needs to judge a timing: the machine and software, and whether isolation held.
PUBLIC_ENVIRONMENT_KEYS = frozenset(
    {
        "device", "device_name", "cpu", "torch", "python", "cuda", "driver", "sm_count", "capability",
        "torch_threads", "hardware_slug", "isolation_mode", "network_isolated", "pid_namespace",
        "filesystem_isolated", "memory_limit", "kernel_peak_rss_mb", "input_mb", "output_mb",
        "output_transport", "demo", "note", "harness", "harness_commit",
    }
)  # fmt: skip
WITHHELD_FIELDS = ("log", "error")
WITHHELD_REASON = "The log and error text of an evaluation are shown to reviewers, admins and the kernel's submitter."
A_WORKER = "a worker"
# leaderboard.evaluations.attempts writes "attempt 2 on <worker name>: <reason>".
_ATTEMPT_ON = re.compile(r"\battempt (\d+) on [^\s:]+:")


def public_environment(environment: Any) -> dict[str, Any]:
    if not isinstance(environment, Mapping):
        return {}
    return {key: value for key, value in environment.items() if key in PUBLIC_ENVIRONMENT_KEYS}


WITHHELD_NAME = "(name withheld)"


def public_instruments(instruments: Any) -> dict[str, Any]:
    """The instruments' record without the kernel's own text (module docstring)."""
    if not isinstance(instruments, Mapping):
        return {}
    # Rebuilt from the allow-list first (evaluation.instruments.sanitize): records stored before it.
    public = _without_errors(clean_record(dict(instruments)))
    kernel_profile = (public.get("profile") or {}).get("kernel") if isinstance(public.get("profile"), dict) else None
    if isinstance(kernel_profile, dict) and isinstance(kernel_profile.get("events"), list):
        kernel_profile["events"] = [{**e, "name": WITHHELD_NAME} if isinstance(e, dict) else e
                                    for e in kernel_profile["events"]]  # fmt: skip
    return public


def _without_errors(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_errors(v) for k, v in value.items() if k != "error"}
    if isinstance(value, list):
        return [_without_errors(v) for v in value]
    return value


def hide_worker(text: str, worker_name: str) -> str:
    """`text` without the worker's name: this attempt's worker, and those of earlier attempts
    that failure reasons name."""
    if not text:
        return text
    if worker_name:
        text = text.replace(worker_name, A_WORKER)
    return _ATTEMPT_ON.sub(r"attempt \1:", text)


def public_progress(progress: Progress, worker_name: str) -> Progress:
    return dataclasses.replace(
        progress,
        label=hide_worker(progress.label, worker_name),
        worker="",
        failure_reason=hide_worker(progress.failure_reason, worker_name),
    )


def public_evaluation_data(data: dict[str, Any], worker_name: str) -> dict[str, Any]:
    """An evaluation as the API serialised it, made public: log and error withheld (None, and
    named in `withheld`), the environment by the allow-list, no worker name."""
    for name in WITHHELD_FIELDS:
        if name in data:
            data[name] = None
    if "environment" in data:
        data["environment"] = public_environment(data["environment"])
    if "instruments" in data:
        data["instruments"] = public_instruments(data["instruments"])
    if "worker_name" in data:
        data["worker_name"] = ""
    if "failure_reason" in data:
        data["failure_reason"] = hide_worker(data["failure_reason"], worker_name)
    if isinstance(data.get("progress"), dict):
        progress = data["progress"]
        progress.update(worker="", label=hide_worker(progress.get("label", ""), worker_name),
                        failure_reason=hide_worker(progress.get("failure_reason", ""), worker_name))  # fmt: skip
    data["withheld"] = [name for name in WITHHELD_FIELDS if name in data]
    return data
