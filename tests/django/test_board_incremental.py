"""Incremental re-scoring (issue 30, item 3): a write that changes one kernel marks its problem, and
the re-scoring reads only that problem's kernels and folds the run's stored entries again
(leaderboard/boards/, `_fold_problems`). What it stores must equal, to the bit, what a
whole re-scoring of the run stores, through any mix of writes. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from unittest import mock

import pytest
from django.db import transaction

from leaderboard.boards import marks as board_marks
from leaderboard.boards import patches, rebuild, scoring
from leaderboard.boards import rescoring as board_rescoring
from leaderboard.boards import stored as board_stored
from leaderboard.models import DirtyProblem, DirtyRun, Evaluation, Kernel, LanguageModel, RunScore
from tests.django.reviews_factories import report, review, world_fixture  # noqa: F401  (fixtures)
from tests.django.test_board_read_model import VERDICTS, random_kernel, random_world
from tests.django.test_board_rebuild import read_model
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


def rows_read() -> tuple[mock._patch, list[int]]:
    """A spy on the kernel query of re-scorings: how many kernel rows each read."""
    sizes: list[int] = []
    real = board_stored.kernel_rows

    def counted(kernels, with_stored=False):
        rows = real(kernels, with_stored)
        sizes.append(len(rows))
        return rows

    return mock.patch.object(board_rescoring, "kernel_rows", side_effect=counted), sizes


def test_a_result_reads_only_its_problems_kernels(world):
    kernels = [world.kernel(problem, sample=sample) for problem in world.problems for sample in range(3)]
    run_rescorer()
    spy, sizes = rows_read()
    world.evaluate(kernels[4], correct=True, speedup=3.25)  # problem 2, sample 1
    assert DirtyRun.objects.get(run_id=world.run.pk).whole is False
    assert list(DirtyProblem.objects.values_list("problem_id", flat=True)) == [world.problems[1].pk]
    with spy:
        assert run_rescorer() == 1
    assert sizes == [3]  # the problem's three kernels, not the run's twelve
    assert not DirtyRun.objects.exists() and not DirtyProblem.objects.exists()
    assert board_rescoring.verify_all() == []
    assert rebuild.verify_runs([world.run.pk]) == []


def test_a_write_that_names_no_problem_rescores_the_whole_run(world):
    for problem in world.problems:
        world.kernel(problem)
    run_rescorer()
    with transaction.atomic():
        board_marks.mark_problems([(world.run.pk, world.problems[0].pk)])
        board_marks.mark_runs([world.run.pk])  # an import, say: the whole run
        board_marks.mark_problems([(world.run.pk, world.problems[1].pk)])  # does not make it partial again
    assert DirtyRun.objects.get(run_id=world.run.pk).whole is True
    spy, sizes = rows_read()
    with spy:
        run_rescorer()
    assert sizes == [4]
    assert not DirtyProblem.objects.exists()


def test_rows_stored_in_the_older_form_are_rescored_whole(world):
    """Rows written before the entries carried what a fold needs (four fields) are never folded:
    their run is re-scored whole (the migration also marks every run)."""
    kernels = [world.kernel(problem) for problem in world.problems]
    run_rescorer()
    for row in RunScore.objects.all():
        row.problems = {pid: entry[:4] for pid, entry in row.problems.items()}
        row.save(update_fields=["problems"])
    world.evaluate(kernels[0], correct=False)
    spy, sizes = rows_read()
    with spy:
        run_rescorer()
    # the marked problem's kernel first (read before the stored rows), then, nothing to patch or
    # fold into, the whole run
    assert sizes == [1, 4]
    assert all(len(entry) == scoring.ENTRY_LENGTH for row in RunScore.objects.all() for entry in row.problems.values())
    assert board_rescoring.verify_all() == []


def random_write(world, rng: random.Random, reviewer, visitor, kernels: list[Kernel]) -> str:
    """One write of the kinds that mark a problem (and a few that mark the run), at random."""
    kernel = rng.choice(kernels)
    kind = rng.choice(["evaluate", "evaluate", "evaluate", "review", "report", "delete", "add", "publish", "forget"])
    if kind == "evaluate":
        correct = rng.random() < 0.6
        speedup = None if correct and rng.random() < 0.2 else round(rng.uniform(0.2, 5.0), 3)
        origin = rng.choice(["measured", "imported"])
        world.evaluate(kernel, correct=correct, speedup=speedup, origin=origin)
    elif kind == "review":
        review(kernel, reviewer, rng.choice(VERDICTS))
    elif kind == "report":
        report(kernel, visitor)
    elif kind == "delete" and len(kernels) > 5:
        kernels.remove(kernel)
        kernel.delete()
    elif kind == "add":
        taken = set(
            Kernel.objects.filter(run=kernel.run, problem=kernel.problem).values_list("sample_index", flat=True)
        )
        sample = min(set(range(len(taken) + 1)) - taken)
        kernels.append(random_kernel(world, rng, kernel.run, kernel.problem, sample))
    elif kind == "publish":
        kernel.published_speedup = rng.choice([None, 2.0, 1.37, 0.8])
        kernel.published_hardware = rng.choice(["L40S", "A100", "h100", ""]) if kernel.published_speedup else ""
        kernel.save(update_fields=["published_speedup", "published_hardware"])
    elif kind == "forget" and kernel.latest_evaluation_id:
        Evaluation.objects.filter(pk=kernel.latest_evaluation_id).delete()
        kernel.refresh_from_db()
    return kind


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("path", ["patch", "fold"])
def test_incremental_rows_equal_a_whole_rescoring_through_any_writes(world, reviewer, visitor, seed, path):
    """Through random writes (results stored, replaced, turned incorrect or deleted; reviews,
    reports, kernels added and deleted, published figures), the rows the re-scorer patches (or,
    `fold`, folds: the path a run takes when its rows cannot take a patch) equal, to the bit, what
    re-scoring every run whole stores."""
    rng = random.Random(seed)
    kernels = random_world(world, rng, reviewer, visitor)
    world.new_run(LanguageModel.objects.create(name="nothing yet"))
    board_rescoring.rebuild_all()
    patched, folded = [], []
    real_patch, real_fold = patches.patch_runs, board_rescoring._fold_stored

    def patch(changed, levels):
        done = real_patch(changed, levels) if path == "patch" else {}
        patched.append(len(done))
        return done

    def fold(changed, levels):
        done = real_fold(changed, levels)
        folded.append(len(done))
        return done

    with (
        mock.patch.object(patches, "patch_runs", side_effect=patch),
        mock.patch.object(board_rescoring, "_fold_stored", side_effect=fold),
    ):
        for step in range(60):
            random_write(world, rng, reviewer, visitor, kernels)
            if step % 3 == 2:  # sometimes several writes wait for one re-scoring
                run_rescorer()
        run_rescorer()
    if path == "patch":
        assert sum(patched) >= 15 and sum(folded) <= sum(patched) // 4  # most writes were patched
    else:
        assert sum(folded) >= 15  # most writes were folded, not re-scored whole
    incremental = read_model()
    board_rescoring.rebuild_all()
    assert read_model() == incremental
    assert rebuild.verify_runs(world.problem_set.runs.values_list("pk", flat=True)) == []
    assert rebuild.verify_problem_counts() == []


def test_a_result_folds_its_own_level_and_never_reads_the_other_levels_entries(world):
    """The all-levels rows are merged from the levels' stored aggregates (scoring.merge): a level-1
    result folds level 1 again and leaves level 2's entries unread. Here level 2's are in an older
    form, which a fold reading them would refuse (re-scoring the run whole, which mends them)."""
    kernels = [world.kernel(problem) for problem in world.problems]
    world.kernel(world.level2, speedup=4.0)
    run_rescorer()
    level2 = RunScore.objects.filter(run=world.run, level=world.level2.level)
    for row in level2:
        row.problems = {pid: entry[:4] for pid, entry in row.problems.items()}
        row.save(update_fields=["problems"])
    world.evaluate(kernels[0], correct=True, speedup=2.5)
    spy, sizes = rows_read()
    with spy:
        run_rescorer()
    assert sizes == [1]  # folded: the one problem's kernel, not the run's five
    assert all(len(entry) == 4 for row in level2.all() for entry in row.problems.values())  # left as it was
    differing = board_rescoring.verify_all()
    assert differing == [
        f"run {world.run.pk} level 2 with_excluded=False: stored differs",
        f"run {world.run.pk} level 2 with_excluded=True: stored differs",
    ]  # only level 2's older entries: level 1 and all levels equal a whole re-scoring


def test_a_run_deleted_while_marked_by_problem_leaves_a_pass_sound(world):
    kernels = [world.kernel(problem) for problem in world.problems]
    other = world.new_run(LanguageModel.objects.create(name="other"))
    kept = world.kernel(world.problems[0], run=other)
    run_rescorer()
    world.evaluate(kernels[0], correct=True, speedup=2.0)  # marks the run by problem
    world.evaluate(kept, correct=True, speedup=1.5)
    world.run.delete()
    assert run_rescorer() == 1  # the other run; the deleted one's marks go with it
    assert not DirtyRun.objects.exists() and not DirtyProblem.objects.exists()
    assert board_rescoring.verify_all() == [] and rebuild.verify_problem_counts() == []


def test_a_problem_that_loses_its_last_kernel_leaves_its_entry_and_an_emptied_level_its_rows(world):
    kernels = [world.kernel(problem) for problem in world.problems]
    alone = world.kernel(world.level2, speedup=4.0)
    run_rescorer()
    kernels[0].delete()  # a patch: the entry goes, the level stays
    run_rescorer()
    alone.delete()  # level 2 has no problem left: its rows go (the fold removes them)
    run_rescorer()
    assert not RunScore.objects.filter(run=world.run, level=world.level2.level).exists()
    assert board_rescoring.verify_all() == [] and rebuild.verify_problem_counts() == []


def test_all_levels_rows_that_still_hold_entries_are_rescored_whole(world):
    """All levels' rows store no entries (they are their levels'); rows of an older form that do are
    neither patched nor folded (either would keep the entries), but re-scored whole."""
    kernels = [world.kernel(problem) for problem in world.problems]
    run_rescorer()
    level1 = RunScore.objects.get(run=world.run, level=world.problems[0].level, with_excluded=False)
    RunScore.objects.filter(run=world.run, level=board_stored.ALL_LEVELS).update(problems=level1.problems)
    world.evaluate(kernels[0], correct=False)
    spy, sizes = rows_read()
    with spy:
        run_rescorer()
    assert sizes == [1, 4]  # the marked problem's kernel, then the whole run
    assert not any(row.problems for row in RunScore.objects.filter(level=board_stored.ALL_LEVELS))
    assert board_rescoring.verify_all() == []
