"""One evaluation's result in KernelBench's own fields (`KernelExecResult` of
`src/kernelbench/eval.py`), for `python -m evaluation evaluate --json-format kernelbench` and for
anything that writes an `eval_results.json` entry (`scripts/eval_from_generations.py`).

KernelBench's fields: compiled, correctness, metadata (hardware, device, the error by its kind:
compilation_error, runtime_error, correctness_issue; correctness_trials "(passed / total)"),
runtime and runtime_stats (ms: mean, std, min, max, num_trials; runtime is the mean, -1.0 when
not timed), ref_runtime and ref_runtime_stats likewise for the reference. Our own speedup (a
ratio of medians, with its interval) and flags stay in metadata, under their own names, so that
nothing is lost. Standard library only.
"""

from __future__ import annotations

from typing import Any

# Our status -> the metadata key KernelBench files the error under.
ERROR_KEYS = {
    "compile_error": "compilation_error",
    "runtime_error": "runtime_error",
    "timeout": "runtime_error",
    "crashed": "runtime_error",
    "incorrect": "correctness_issue",
}


def timing_stats(timing: dict[str, Any] | None, environment: dict[str, Any]) -> dict[str, Any]:
    """KernelBench's runtime_stats from our timing summary ({} when not timed)."""
    if not timing:
        return {}
    stats: dict[str, Any] = {key: timing[key] for key in ("mean", "std", "min", "max") if key in timing}
    trials = timing.get("num_trials", timing.get("trials"))
    if trials is not None:
        stats["num_trials"] = trials
    if environment.get("device_name"):
        stats["hardware"] = environment["device_name"]
        stats["device"] = environment.get("device", "")
    return stats


def _metadata(result: dict[str, Any]) -> dict[str, Any]:
    environment = result.get("environment") or {}
    metadata: dict[str, Any] = {"hardware": environment.get("device_name", ""), "device": environment.get("device", "")}
    status = result.get("status", "")
    if result.get("error") and status in ERROR_KEYS:
        metadata[ERROR_KEYS[status]] = result["error"]
        metadata[ERROR_KEYS[status] + "_name"] = status
    metadata["correctness_trials"] = f"({result.get('trials_passed', 0)} / {result.get('trials_total', 0)})"
    if result.get("max_abs_diff") is not None:
        metadata["max_difference"] = [f"{result['max_abs_diff']:.6f}"]
    if result.get("speedup") is not None:
        metadata["leaderboard_speedup"] = result["speedup"]
        metadata["leaderboard_speedup_interval"] = result.get("speedup_interval")
    if result.get("flags"):
        metadata["flags"] = [flag.get("code", "") for flag in result["flags"]]
        if any(flag.get("code") == "excessive_speedup" for flag in result["flags"]):
            metadata["excessive_speedup"] = True
    if result.get("precision"):
        metadata["precision"] = result["precision"]
    return metadata


def to_kernelbench(result: dict[str, Any]) -> dict[str, Any]:
    """KernelExecResult's fields from an EvaluationResult.to_dict()."""
    environment = result.get("environment") or {}
    kernel = timing_stats(result.get("kernel_ms"), environment)
    reference = timing_stats(result.get("reference_ms"), environment)
    correct = bool(result.get("correct"))
    return {
        "compiled": bool(result.get("compiled")),
        "correctness": correct,
        "metadata": _metadata(result),
        "runtime": float(kernel["mean"]) if correct and "mean" in kernel else -1.0,
        "runtime_stats": kernel if correct else {},
        "ref_runtime": float(reference["mean"]) if "mean" in reference else -1.0,
        "ref_runtime_stats": reference,
    }


def eval_results_entry(result: dict[str, Any], sample_id: int = 0) -> dict[str, Any]:
    """The entry eval_from_generations.py appends to eval_results.json for one sample."""
    fields = to_kernelbench(result)
    keys = ("compiled", "correctness", "metadata", "runtime", "runtime_stats")
    return {"sample_id": sample_id, **{key: fields[key] for key in keys}}
