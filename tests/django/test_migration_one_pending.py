"""Migration 0015 ends duplicate pending evaluations (keeping the running one, else the oldest)
before it builds the unique index evaluation_one_pending: on a database that held duplicates, it
must not fail."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# problems back to 0003 too: its 0004 (source_url) is newer than the state this test writes in.
BEFORE = [("leaderboard", "0014_published_figures"), ("problems", "0003_scoring_rules")]
AFTER = [("leaderboard", "0015_integrity_quotas_one_pending")]


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


@pytest.mark.django_db(transaction=True)
def test_the_migration_ends_duplicates_already_pending():
    apps = _migrate(BEFORE)
    try:
        Evaluation = apps.get_model("leaderboard", "Evaluation")
        problem_set = apps.get_model("problems", "ProblemSet").objects.create(slug="m", name="M")  # default rules
        rules = problem_set.rules
        problem = apps.get_model("problems", "Problem").objects.create(
            problem_set=problem_set, level=1, number=1, name="p", source="x"
        )
        hardware = apps.get_model("problems", "Hardware").objects.create(slug="cpu", name="CPU", kind="cpu")
        model = apps.get_model("leaderboard", "LanguageModel").objects.create(name="M", slug="m")
        run = apps.get_model("leaderboard", "Run").objects.create(
            model=model, problem_set=problem_set, hardware=hardware, rules=rules
        )
        kernel = apps.get_model("leaderboard", "Kernel").objects.create(run=run, problem=problem, source="k" * 10)
        queued, running, later = (
            Evaluation.objects.create(kernel=kernel, hardware=hardware, state=state)
            for state in ("queued", "running", "queued")
        )
        apps = _migrate(AFTER)
        states = dict(apps.get_model("leaderboard", "Evaluation").objects.values_list("pk", "state"))
        assert states == {queued.pk: "failed", running.pk: "running", later.pk: "failed"}
        assert apps.get_model("leaderboard", "Kernel").objects.get().source_bytes == 10
    finally:  # back to the newest schema of every app, whatever migrations follow 0015
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
