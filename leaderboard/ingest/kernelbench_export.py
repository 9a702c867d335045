"""Any run, out again as a KernelBench run folder (zip), the shape KernelBench's own scripts read.

The zip holds one folder, named after the run, with:

- `level_<L>_problem_<P>_sample_<S>_kernel.py`: every kernel of the run (of the level asked for);
- `eval_results.json`: what KernelBench's `scripts/eval_from_generations.py` writes, keyed by the
  problem id within the level (sorted numerically), a list per problem with one entry per
  evaluated sample: `sample_id`, `compiled`, `correctness`, `metadata`, `runtime` (ms, -1.0 when
  not measured) and `runtime_stats` (`mean`, `std`, `min`, `max`, `num_trials`, ...). Where the
  run spans several levels and no level is asked for, the keys are `level_<L>_problem_<P>`
  instead (this site's importer reads both; KernelBench's analysis wants one level per folder);
- `baseline_time.json`: the reference times the site's speedups came from, shaped like
  KernelBench's `results/timing/<hardware>/*.json` ({"level1": {"<problem file>": {"mean": ms}}}),
  so that `scripts/benchmark_eval_analysis.py ... baseline_file=<it>` reproduces the site's fast_p;
- `generation_config.yaml`: model_name, level, num_samples, prompt_option (the run's setting),
  precision and hardware, as KernelBench's `generate_samples.py` saves them.

The reference of a correct sample is its speedup × its runtime, so baseline / runtime gives back
exactly the site's speedup. A correct kernel without a speedup (no baseline on the hardware) is
written with runtime -1.0 (its measured runtime stays in `runtime_stats`), so KernelBench counts it
correct and never faster. Problems whose sample 0 is not correct need a reference only so that the
analysis keeps them in its denominator: the run hardware's eager baseline when there is one,
otherwise 1.0 (marked `"placeholder": true`); it never changes a score.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterable
from typing import Any

import yaml
from django.utils.text import slugify

from leaderboard.ingest.generation_config import prompt_option
from leaderboard.models import Evaluation, Kernel, Run
from problems.models import Baseline, Problem

RESULTS_NAME = "eval_results.json"
BASELINE_NAME = "baseline_time.json"
CONFIG_NAME = "generation_config.yaml"
STATS_KEYS = ("mean", "std", "min", "max", "median")
ErrorRule = Callable[[Kernel], bool]  # whether the export may carry a kernel's error text


class ExportError(ValueError):
    """The export cannot be made as asked (e.g. a level the run has no kernel in)."""


def folder_name(run: Run) -> str:
    """The run folder's name: KernelBench's run_name (the run's own name, else run_<id>)."""
    return slugify(run.name)[:80] or f"run_{run.pk}"


def runtime_stats(evaluation: Evaluation) -> dict[str, Any]:
    """KernelBench's runtime_stats from the evaluation's kernel timing (imported or measured)."""
    timing = evaluation.kernel_timing if isinstance(evaluation.kernel_timing, dict) else {}
    stats: dict[str, Any] = {key: timing[key] for key in STATS_KEYS if isinstance(timing.get(key), int | float)}
    trials = timing.get("num_trials", timing.get("trials"))
    if isinstance(trials, int):
        stats["num_trials"] = trials
    if evaluation.kernel_ms is not None:
        stats.setdefault("mean", evaluation.kernel_ms)
    stats["hardware"] = evaluation.hardware.name if evaluation.hardware_id else ""
    return stats


def scored_runtime(evaluation: Evaluation) -> float | None:
    """The runtime (ms) written for a correct kernel with a speedup: its kernel time, or (for a
    record without one) the reference time over the speedup, or 1.0; None when it has no speedup.
    The reference written for it is always speedup x runtime."""
    if not (evaluation.correct and evaluation.speedup):
        return None
    if evaluation.kernel_ms:
        return float(evaluation.kernel_ms)
    return evaluation.reference_ms / evaluation.speedup if evaluation.reference_ms else 1.0


def result_entry(kernel: Kernel, evaluation: Evaluation, with_error: bool = True) -> dict[str, Any]:
    """One sample's entry of eval_results.json, as eval_from_generations.py writes it; the error
    text (the kernel's own output) only `with_error` (leaderboard/reads/disclosure.py)."""
    runtime = scored_runtime(evaluation)
    metadata: dict[str, Any] = {"hardware": evaluation.hardware.name, "status": evaluation.status}
    metadata |= {"origin": evaluation.origin, "leaderboard_kernel_id": kernel.pk}
    if evaluation.flags:
        metadata["flags"] = [flag.get("code", "") for flag in evaluation.flags if isinstance(flag, dict)]
    if evaluation.error and with_error:
        metadata[f"{evaluation.status or 'error'}"] = evaluation.error[:2000]
    return {
        "sample_id": kernel.sample_index,
        "compiled": bool(evaluation.compiled) or bool(evaluation.correct),
        "correctness": bool(evaluation.correct),
        "metadata": metadata,
        "runtime": runtime if runtime is not None else -1.0,
        "runtime_stats": runtime_stats(evaluation),
    }


def _kernels(run: Run, level: int | None) -> list[Kernel]:
    kernels = Kernel.objects.filter(run=run).select_related("run", "problem", "latest_evaluation__hardware")
    if level is not None:
        kernels = kernels.filter(problem__level=level)
    return list(kernels.order_by("problem__level", "problem__number", "sample_index"))


def _results(kernels: Iterable[Kernel], multi_level: bool, with_error: ErrorRule) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {}
    for kernel in kernels:
        evaluation = kernel.latest_evaluation
        if evaluation is None:
            continue
        problem = kernel.problem
        key = f"level_{problem.level}_problem_{problem.number}" if multi_level else str(problem.number)
        results.setdefault(key, []).append(result_entry(kernel, evaluation, with_error(kernel)))
    return results


def baseline_times(run: Run, kernels: list[Kernel], levels: list[int]) -> dict[str, dict[str, dict[str, Any]]]:
    """Every problem of the levels, with the reference the site's speedup of its sample 0 came from."""
    eager = dict(
        Baseline.objects.filter(
            problem__problem_set=run.problem_set_id,
            hardware=run.hardware_id,
            mode=Baseline.Mode.EAGER,
            compile_variant="",
        ).values_list("problem_id", "mean_ms")
    )
    derived = {}
    for kernel in kernels:
        evaluation = kernel.latest_evaluation
        runtime = scored_runtime(evaluation) if evaluation and kernel.sample_index == 0 else None
        if runtime is not None:
            derived[kernel.problem_id] = evaluation.speedup * runtime
    problems = Problem.objects.filter(problem_set=run.problem_set_id, level__in=levels).order_by("level", "number")
    table: dict[str, dict[str, dict[str, Any]]] = {f"level{level}": {} for level in levels}
    for problem in problems.only("pk", "level", "number", "name"):
        if problem.pk in derived:
            entry = {"mean": derived[problem.pk], "source": "reference of sample 0"}
        elif problem.pk in eager:
            entry = {"mean": eager[problem.pk], "source": f"eager baseline on {run.hardware.slug}"}
        else:
            entry = {"mean": 1.0, "placeholder": True}
        table[f"level{problem.level}"][problem.file_name] = entry
    return table


def generation_config(run: Run, level: int | None) -> str:
    config = {
        "run_name": folder_name(run),
        "model_name": str(run.model.name),
        "level": level,
        "num_samples": run.samples_per_problem,
        "prompt_option": prompt_option(str(run.setting)),
        "precision": str(run.precision),
        "hardware": run.hardware.slug,
        "problem_set": run.problem_set.slug,
        # Which verdicts these are: KernelBench's rules of one version (tolerance, trials).
        "scoring_rules": run.rules.as_dict(run.hardware.kind),
    }
    return yaml.safe_dump(config, sort_keys=False)


def _sorted_results(results: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    def order(key: str) -> tuple[int, ...]:
        return tuple(int(part) for part in key.split("_") if part.isdigit())

    return {key: sorted(results[key], key=lambda e: e["sample_id"]) for key in sorted(results, key=order)}


def export_run(run: Run, level: int | None = None, with_error: ErrorRule = lambda kernel: True) -> bytes:
    """The run (or one level of it) as the bytes of a zip holding one KernelBench run folder, with
    the error text of the kernels `with_error` admits."""
    kernels = _kernels(run, level)
    levels = sorted({kernel.problem.level for kernel in kernels})
    if level is not None and not levels:
        raise ExportError(f"run {run.pk} has no kernel in level {level}")
    if level is None and len(levels) == 1:
        level = levels[0]
    folder = folder_name(run)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for kernel in kernels:
            name = (
                f"level_{kernel.problem.level}_problem_{kernel.problem.number}_sample_{kernel.sample_index}_kernel.py"
            )
            archive.writestr(f"{folder}/{name}", kernel.source)
        results = _sorted_results(_results(kernels, multi_level=level is None, with_error=with_error))
        archive.writestr(f"{folder}/{RESULTS_NAME}", json.dumps(results, indent=4))
        archive.writestr(f"{folder}/{BASELINE_NAME}", json.dumps(baseline_times(run, kernels, levels), indent=4))
        archive.writestr(f"{folder}/{CONFIG_NAME}", generation_config(run, level))
    return buffer.getvalue()
