"""The Ingestors and Reviewers groups made by migration 0002."""


def test_ingestors_add_and_change_scores_posts_runs_kernels_and_evaluations(ingestor):
    for model in ("reportedscore", "launchpost", "run", "kernel", "evaluation"):
        assert ingestor.has_perm(f"leaderboard.add_{model}") and ingestor.has_perm(f"leaderboard.change_{model}")
    assert not ingestor.has_perm("leaderboard.add_review")
    assert not ingestor.has_perm("leaderboard.delete_run")


def test_reviewers_add_reviews_and_view_everything(reviewer):
    assert reviewer.has_perm("leaderboard.add_review")
    for perm in (
        "leaderboard.view_kernel",
        "leaderboard.view_evaluation",
        "leaderboard.view_reportedscore",
        "problems.view_problem",
        "problems.view_baseline",
    ):
        assert reviewer.has_perm(perm)
    assert not reviewer.has_perm("leaderboard.add_run") and not reviewer.has_perm("leaderboard.change_kernel")


def test_a_plain_user_holds_no_permission(visitor):
    assert not visitor.get_all_permissions()
