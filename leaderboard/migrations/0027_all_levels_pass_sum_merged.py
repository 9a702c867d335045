"""The all-levels rows' pass@1 sum becomes the fsum of their levels' sums (scoring.merge), so that a
result re-folds its own level and merges the others' stored aggregates without reading their
entries. The stored rows move by an ulp at most; the rows whose sum moves are written here, so
that a check of the stored boards (`rebuild_boards --verify`) finds them equal."""

import math
from collections import defaultdict

from django.db import migrations

ALL_LEVELS = 0


def merge_pass_sums(apps, schema_editor):
    RunScore = apps.get_model("leaderboard", "RunScore")
    sums = defaultdict(list)
    levels = RunScore.objects.exclude(level=ALL_LEVELS).values_list("run_id", "with_excluded", "pass_at_1_sum")
    for run_id, with_excluded, value in levels.iterator(chunk_size=10_000):
        sums[(run_id, with_excluded)].append(value)
    moved = []
    rows = RunScore.objects.filter(level=ALL_LEVELS).values_list("pk", "run_id", "with_excluded", "pass_at_1_sum")
    for pk, run_id, with_excluded, value in rows.iterator(chunk_size=10_000):
        merged = math.fsum(sums.get((run_id, with_excluded), ()))
        if merged != value:
            moved.append(RunScore(pk=pk, pass_at_1_sum=merged))
    RunScore.objects.bulk_update(moved, ["pass_at_1_sum"], batch_size=1_000)


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0026_evaluation_instruments_later")]

    operations = [migrations.RunPython(merge_pass_sums, migrations.RunPython.noop)]
