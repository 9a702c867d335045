"""Demo data for a first visit: the starter catalogue, the real reported scores, the field (the
kernels KernelBench's original leaderboard published, with their published figures and, where the
results file exists, their re-measurement here: seed_field), and a few synthetic labs, models,
runs, kernels and evaluations.

Synthetic rows carry is_demo=True (runs, models, labs, posts) and their evaluations say so in
their environment, so pages can mark them; none of their numbers is a measurement.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from leaderboard.ingest.field_figures import read_figures
from leaderboard.ingest.kernelbench_leaderboard import store_leaderboard
from leaderboard.ingest.model_names import find_model
from leaderboard.ingest.reported_scores import read_csv, store_rows
from leaderboard.ingest.results_exchange import import_records, read_jsonl
from leaderboard.models import Evaluation, Kernel, Lab, LanguageModel, LaunchPost, Origin, Run, WriteRecord
from problems.catalogue import CATALOGUE_DIR
from problems.importing import upsert
from problems.kernelbench_files import scan_checkout
from problems.models import Hardware, Problem, ProblemSet

STARTER_SET = "Starter v1"
REPORTED_SCORES_CSV = settings.BASE_DIR / "data" / "reported_scores.csv"
# The field without its code (export_field_figures) and its re-measurement (export_results on the GPU
# host): two passes, each on its own fresh host, so that a kernel's page shows whether its figure repeats.
FIELD_DIR = settings.BASE_DIR / "data" / "field"
FIELD_FIGURES = FIELD_DIR / "kernelbench_leaderboard_figures.json"
# The cards the field may be re-measured on; its runs are stored on the card of its results files.
FIELD_CARDS = {"h200": "NVIDIA H200", "h100": "NVIDIA H100"}
FIELD_CARD_WITHOUT_RESULTS = "h200"
DEMO_LAB = "Demo Lab (synthetic)"
# name, skill: the chance that a kernel is correct, and the centre of its speedups.
DEMO_MODELS = (("Demo Alpha", 0.85, 1.4), ("Demo Beta", 0.65, 1.0), ("Demo Gamma", 0.45, 0.8))
DEMO_NOTE = "Synthetic demo data made by seed_demo: not a measurement."
DEMO_AUTHOR = "manage.py seed_demo"  # who the records of its writes name: an operator runs it, with no user
REAL_LAUNCH_POSTS = (
    # lab, model, title, url, date, lists KernelBench, score as stated
    (
        "MiniMax",
        "MiniMax-M3",
        "MiniMax-M3",
        "https://www.minimax.io/blog/minimax-m3",
        "2026-06-01",
        True,
        "KernelBench Hard 28.8%",
    ),
)


def kernel_source_from_reference(reference: str) -> str:
    """A plain-PyTorch 'kernel' for the demo: the reference module renamed to ModelNew."""
    return re.sub(r"\bclass Model\(", "class ModelNew(", reference, count=1)


def seed_starter_catalogue() -> ProblemSet:
    problem_set, _ = ProblemSet.objects.get_or_create(
        name=STARTER_SET,
        defaults={
            "slug": "starter-v1",
            "version": "1",
            "description": "Problems written for this project; small on CPU, scaled up on GPUs with KB_SCALE.",
        },
    )
    for problem in scan_checkout(CATALOGUE_DIR).problems:
        upsert(
            Problem,
            {"problem_set": problem_set, "level": problem.level, "number": problem.number},
            {"name": problem.name, "source": problem.source, "tags": problem.tags},
        )
    return problem_set


def seed_hardware() -> dict[str, Hardware]:
    cpu, _ = Hardware.objects.get_or_create(slug="cpu", defaults={"name": "CPU", "kind": Hardware.Kind.CPU})
    return {"cpu": cpu, "h200": gpu_hardware("h200")}


def gpu_hardware(slug: str) -> Hardware:
    hardware, _ = Hardware.objects.get_or_create(
        slug=slug, defaults={"name": FIELD_CARDS.get(slug, slug.upper()), "kind": Hardware.Kind.GPU}
    )
    return hardware


def field_results_files(folder: Path | None = None) -> tuple[str, list[Path]]:
    """The card the field was re-measured on and its results files present, pass 1 first
    (`<card>_results.jsonl`, `<card>_results_pass2.jsonl`, as export_results writes them on the GPU
    host). One card's only: a second card's would put every field kernel on two runs."""
    folder = folder or FIELD_DIR
    cards = sorted({path.name.split("_", 1)[0] for path in folder.glob("h[0-9]00_results*.jsonl")})
    if len(cards) > 1:
        raise ValueError(f"{folder} holds the field's results of {len(cards)} cards ({', '.join(cards)}); keep one")
    card = cards[0] if cards else FIELD_CARD_WITHOUT_RESULTS
    names = (f"{card}_results.jsonl", f"{card}_results_pass2.jsonl")
    return card, [folder / name for name in names if (folder / name).is_file()]


def seed_launch_posts(models: list[LanguageModel], lab: Lab) -> None:
    for lab_name, model_name, title, url, date, lists, score in REAL_LAUNCH_POSTS:
        post_lab = Lab.objects.filter(name__iexact=lab_name).first() or Lab.objects.create(name=lab_name)
        model = find_model(model_name)
        upsert(
            LaunchPost,
            {"url": url},
            {
                "lab": post_lab,
                "model": model,
                "title": title,
                "published_on": dt.date.fromisoformat(date),
                "lists_kernelbench": lists,
                "kernelbench_score": score,
            },
        )
    for index, model in enumerate(models):
        upsert(
            LaunchPost,
            {"url": f"https://example.com/demo/{model.slug}"},
            {
                "lab": lab,
                "model": model,
                "title": f"Introducing {model.name} (demo)",
                "published_on": model.release_date,
                "lists_kernelbench": index != 1,
                "kernelbench_score": "" if index == 1 else "demo",
                "is_demo": True,
            },
        )


def demo_evaluation_values(rng: random.Random, correct_rate: float, centre: float) -> dict:
    roll = rng.random()
    if roll > correct_rate + (1 - correct_rate) * 0.5:
        return {
            "status": Evaluation.Status.COMPILE_ERROR,
            "compiled": False,
            "correct": False,
            "error": "demo: build failed",
        }
    if roll > correct_rate:
        return {
            "status": Evaluation.Status.INCORRECT,
            "compiled": True,
            "correct": False,
            "error": "demo: outputs differ",
        }
    speedup = round(max(0.05, rng.lognormvariate(0, 0.45) * centre), 3)
    reference_ms = round(rng.uniform(0.2, 8.0), 3)
    return {
        "status": Evaluation.Status.CORRECT,
        "compiled": True,
        "correct": True,
        "speedup": speedup,
        "speedup_low": round(speedup * 0.97, 3),
        "speedup_high": round(speedup * 1.03, 3),
        "reference_ms": reference_ms,
        "kernel_ms": round(reference_ms / speedup, 4),
    }


def seed_demo_runs(problem_set: ProblemSet, hardware: Hardware) -> list[LanguageModel]:
    lab, _ = Lab.objects.get_or_create(name=DEMO_LAB, defaults={"is_demo": True})
    problems = list(problem_set.problems.all())
    models = []
    for index, (name, correct_rate, centre) in enumerate(DEMO_MODELS):
        model, _ = LanguageModel.objects.get_or_create(
            name=name, defaults={"lab": lab, "is_demo": True, "release_date": dt.date(2026, 3 + 2 * index, 1)}
        )
        models.append(model)
        run, _ = Run.objects.get_or_create(
            model=model,
            problem_set=problem_set,
            hardware=hardware,
            setting="one-shot",
            defaults={"is_demo": True, "origin": Origin.DEMO, "name": f"{name} demo run", "notes": DEMO_NOTE},
        )
        rng = random.Random(f"{name}-{problem_set.slug}")
        for problem in problems:
            values = demo_evaluation_values(rng, correct_rate, centre)
            kernel, created = Kernel.objects.get_or_create(
                run=run,
                problem=problem,
                sample_index=0,
                defaults={"source": kernel_source_from_reference(problem.source)},
            )
            if created or kernel.latest_evaluation_id is None:
                evaluation = Evaluation.objects.create(
                    kernel=kernel,
                    hardware=hardware,
                    origin=Origin.DEMO,
                    state=Evaluation.State.DONE,
                    trials_total=5,
                    trials_passed=5 if values["correct"] else 0,
                    environment={"demo": True, "note": DEMO_NOTE},
                    **values,
                )
                kernel.latest_evaluation = evaluation
                kernel.save(update_fields=["latest_evaluation"])
    return models


def seed_field(hardware: Hardware, results: list[Path]) -> dict[str, int]:
    """The field's published figures (kernels stored without their code, linked to it) on runs
    measured on `hardware`, and its committed re-measurements on that card (`results`)."""
    counts = {"field_kernels": 0, "field_results": 0}
    if FIELD_FIGURES.is_file():
        result = store_leaderboard(read_figures(FIELD_FIGURES), hardware, None, lambda _: None, by=DEMO_AUTHOR)
        counts["field_kernels"] = sum(run_import.run.kernels.count() for run_import in result.runs)
    for path in results:
        with open(path, encoding="utf-8") as handle:
            counts["field_results"] += import_records(read_jsonl(handle), by=DEMO_AUTHOR).counts["created"]
    return counts


@transaction.atomic
def seed_demo() -> dict[str, int]:
    problem_set = seed_starter_catalogue()
    hardware = seed_hardware()
    report = store_rows(
        read_csv(REPORTED_SCORES_CSV.read_text(encoding="utf-8"), str(REPORTED_SCORES_CSV)), by=DEMO_AUTHOR
    )
    field_card, field_results = field_results_files()
    field = seed_field(gpu_hardware(field_card), field_results)
    models = seed_demo_runs(problem_set, hardware["h200"])
    seed_launch_posts(models, Lab.objects.get(name=DEMO_LAB))
    WriteRecord.objects.note(DEMO_AUTHOR, "seed_demo", problem_set, summary="demo runs, kernels and launch posts")
    _analyze()
    return {
        "problems": problem_set.problems.count(),
        "reported_scores_created": report.counts["created"],
        **field,
        "demo_kernels": Kernel.objects.filter(run__is_demo=True).count(),
    }


def _analyze() -> None:
    """PostgreSQL's statistics brought up to date after the load, as autovacuum would do later: a
    table emptied by TRUNCATE (a test's flush) is recorded as empty until then, and plans made on
    that nest loops over what they take for single rows (a board query once ran 17 minutes on a
    few hundred rows; in a whole suite's run, seeding a second time took 61 s, and 3 s alone). Inside
    a transaction it counts the transaction's own rows."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
