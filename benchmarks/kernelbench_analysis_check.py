"""Does KernelBench's own analysis, run on this site's export, give the site's fast_p?

    .venv/bin/python benchmarks/kernelbench_analysis_check.py KERNELBENCH_CHECKOUT [--level 1] [--python PY]

Uses a throwaway SQLite database (never the site's), imports the checkout's problems of the level
and its H100_Modal eager baselines, imports a synthetic run folder of that level (every problem,
two samples, a fixed mix of failures and runtimes), then exports the run as a KernelBench run
folder and runs the checkout's unchanged `scripts/benchmark_eval_analysis.py` on it, twice: with
the export's baseline_time.json and with KernelBench's own H100_Modal baseline file. It prints
both tables beside the site's numbers and exits non-zero if any fast_p differs.

KernelBench's analysis needs its own dependencies (pydra-config, tabulate, numpy, torch, tqdm,
python-dotenv, openai, litellm); give a Python that has them with --python, or a PYTHONPATH.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "results/timing/H100_Modal/baseline_time_torch.json"
PS = ("0.0", "0.5", "0.8", "1.0", "1.5", "2.0")


def synthetic_run(level: int, n_problems: int, baselines: dict, names: list[str]) -> bytes:
    """Two samples per problem: about 60% of sample 0 correct, runtimes 0.3-2.5x the baseline."""
    rng = random.Random(14)
    buffer, results = io.BytesIO(), {}
    with zipfile.ZipFile(buffer, "w") as archive:
        for number, name in zip(range(1, n_problems + 1), names, strict=True):
            entries = []
            for sample in (0, 1):
                archive.writestr(
                    f"synthetic/level_{level}_problem_{number}_sample_{sample}_kernel.py", "class ModelNew: pass\n"
                )
                correct = rng.random() < 0.6
                runtime = baselines[name]["mean"] / rng.uniform(0.3, 2.5) if correct else -1.0
                entries.append({"sample_id": sample, "compiled": correct or rng.random() < 0.5, "correctness": correct,
                                "metadata": {}, "runtime": runtime, "runtime_stats": {}})  # fmt: skip
            results[str(number)] = entries
        archive.writestr("synthetic/eval_results.json", json.dumps(results))
    return buffer.getvalue()


def site_side(checkout: Path, level: int, work: Path) -> tuple[dict[str, float], Path]:
    """Import into a throwaway database, export; the site's fast_p and the unpacked export."""
    os.environ["DATABASE_URL"] = f"sqlite:///{work / 'db.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django  # deferred: settings come from the environment set just above

    django.setup()
    from django.core.management import call_command  # deferred: needs django.setup()

    from leaderboard.ingest.kernelbench_export import export_run  # deferred: needs django.setup()
    from leaderboard.models import Run  # deferred: needs django.setup()
    from leaderboard.reads import runs as reads  # deferred: needs django.setup()

    quiet = open(os.devnull, "w")
    call_command("migrate", verbosity=0)
    call_command("import_problems", str(checkout), "--set", "KernelBench v0.1", stdout=quiet)
    call_command("import_baselines", str(checkout / BASELINE), "--hardware", "h100", stdout=quiet)
    baselines = json.loads((checkout / BASELINE).read_text())[f"level{level}"]
    names = sorted(baselines, key=lambda name: int(name.split("_", 1)[0]))
    folder = work / "synthetic.zip"
    folder.write_bytes(synthetic_run(level, len(names), baselines, names))
    call_command("import_run", str(folder), "--model", "Synthetic", "--hardware", "h100", stdout=quiet)
    run = Run.objects.get(name="synthetic")
    (score,) = reads.run_scores(run, reads.run_problems(run))
    runs_dir = work / "runs"
    with zipfile.ZipFile(io.BytesIO(export_run(run, level))) as archive:
        archive.extractall(runs_dir)
    ours = {p: score.fast_p["fast_" + format(float(p), "g")] for p in PS}
    return ours, runs_dir


def kernelbench_side(checkout: Path, python: str, level: int, runs_dir: Path, baseline_file: Path) -> dict[str, float]:
    out = runs_dir.parent / f"analysis-{baseline_file.stem}.json"
    command = [python, "scripts/benchmark_eval_analysis.py", f"run_name={next(runs_dir.iterdir()).name}",
               f"level={level}", "hardware=H100_Modal", "baseline=baseline_time_torch",
               f"baseline_file={baseline_file}", f"eval_results_dir={runs_dir}", f"output_file={out}"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=f"{checkout / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop("DATABASE_URL", None)
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    print(done.stdout[-2500:])
    if done.returncode:
        sys.exit(f"KernelBench's analysis failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())["fast_p"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ours, runs_dir = site_side(args.checkout.resolve(), args.level, work)
        exported = next(runs_dir.iterdir()) / "baseline_time.json"
        theirs_export = kernelbench_side(args.checkout.resolve(), args.python, args.level, runs_dir, exported)
        theirs_upstream = kernelbench_side(
            args.checkout.resolve(), args.python, args.level, runs_dir, args.checkout.resolve() / BASELINE
        )
    print(f"{'p':>5} {'site':>8} {'KB (export baselines)':>22} {'KB (H100_Modal file)':>21}")
    for p in PS:
        print(f"{p:>5} {ours[p]:>8.4f} {theirs_export[p]:>22.4f} {theirs_upstream[p]:>21.4f}")
    same = all(abs(ours[p] - theirs_export[p]) < 1e-12 and abs(ours[p] - theirs_upstream[p]) < 1e-12 for p in PS)
    print("same fast_p" if same else "FAST_P DIFFERS")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
