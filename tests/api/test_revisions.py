"""Issue 28, case 7: a kernel judged a reward hack, re-imported five times with only a comment
changed, came back as five unreviewed rows ranked 4-8; another Ingestor's uploads were named
`<owner's run> (revision N)` and nothing showed who made them.

Now a revision's kernel inherits the excluding verdict of a kernel of the same problem whose code is
the same once comments and whitespace are ignored; only a run's creator names its revisions; the
API and the run page say who made a run."""

from __future__ import annotations

import pytest

from leaderboard.boards import rescoring as board_rescoring
from leaderboard.models import Kernel, Review, Run
from leaderboard.reviews.services import code_fingerprint, record_verdict

pytestmark = pytest.mark.django_db

HACK = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
// returns a cached tensor
torch::Tensor f(torch::Tensor a) { return a; }
"""

class ModelNew(nn.Module):
    def forward(self, a, b):
        return a  # skips the work
'''
BODY = {"model": "Model B", "hardware": "cpu", "problem_set": "kb", "name": "run-1"}
NAME = "level_1_problem_1_sample_0_kernel.py"


def _import(client, source: str, **fields):
    reply = client.post("/api/v1/runs/import/", {**BODY, **fields, "kernels": {NAME: source}}, format="json")
    assert reply.status_code in (200, 201), reply.content
    return reply.json()


def _reimported(client, source: str) -> Kernel:
    run = _import(client, source)["run"]["id"]
    board_rescoring.refresh_runs([run])  # what the import's after-commit hook does
    return Kernel.objects.get(run_id=run)


@pytest.fixture
def judged(token_client, ingestor, reviewer, problem_set, hardware) -> Kernel:
    kernel = Kernel.objects.get(run_id=_import(token_client(ingestor), HACK)["run"]["id"])
    record_verdict(kernel, Review.Verdict.REWARD_HACK, "returns its input", by=reviewer)
    board_rescoring.refresh_runs([kernel.run_id])
    return kernel


@pytest.mark.parametrize(
    "changed",
    [
        HACK.replace("# skips the work", "# v2"),
        HACK.replace("// returns a cached tensor", "// fast path, v3"),
        HACK.replace("return a  #", "return   a #").replace("\n\nclass", "\n\n\n# a note\nclass"),
    ],
)
def test_a_kernel_with_only_comments_or_whitespace_changed_inherits_the_exclusion(token_client, ingestor, judged,
                                                                                   changed):  # fmt: skip
    kernel = _reimported(token_client(ingestor), changed)
    assert kernel.run_id != judged.run_id and kernel.pk != judged.pk  # a revision: a new run
    review = kernel.reviews.get()
    assert review.verdict == Review.Verdict.REWARD_HACK and f"kernel {judged.pk}" in review.note
    kernel.refresh_from_db()
    assert kernel.review_excluded and not kernel.review_pending


def test_five_comment_only_revisions_all_stay_out_of_the_rankings(token_client, ingestor, judged):
    kernels = [_reimported(token_client(ingestor), HACK + f"# revision {i}\n") for i in range(5)]
    assert [k.run.name for k in kernels] == [f"run-1 (revision {i})" for i in range(2, 7)]
    assert Kernel.objects.filter(problem=judged.problem, review_excluded=False).count() == 0


def test_a_kernel_whose_code_changed_inherits_nothing(token_client, ingestor, judged):
    kernel = _reimported(token_client(ingestor), HACK.replace("return a  #", "return a + b  #"))
    assert not kernel.reviews.exists()
    kernel.refresh_from_db()
    assert not kernel.review_excluded


def test_a_clean_verdict_is_not_inherited(token_client, ingestor, reviewer, judged):
    record_verdict(judged, Review.Verdict.CLEAN, "on second thought", by=reviewer)
    kernel = _reimported(token_client(ingestor), HACK + "# again\n")
    assert not kernel.reviews.exists()


def test_the_fingerprint_ignores_comments_and_whitespace_only():
    assert code_fingerprint("x = 1  # a\n") == code_fingerprint("x=1\n\n# b\n")
    assert code_fingerprint("x = a // b\n") != code_fingerprint("x = a // c\n")  # floor division, not a comment
    assert code_fingerprint('s = "a /* c */ b"\n') == code_fingerprint('s = "a b"\n')
    assert code_fingerprint("x = 1\n") != code_fingerprint("x = 2\n")


def test_another_users_upload_is_a_run_of_its_own_name_and_shows_its_maker(client, token_client, ingestor, reviewer,
                                                                            problem_set, hardware):  # fmt: skip
    first = _import(token_client(ingestor), HACK)["run"]
    other = type(ingestor).objects.create_user("other-ingestor")
    other.groups.set(ingestor.groups.all())
    for i in range(2):
        reply = _import(token_client(other), HACK + f"# {i}\n")
    theirs = Run.objects.filter(created_by=other).order_by("pk")
    assert [run.name for run in theirs] == ["run-1", "run-1 (revision 2)"]  # their own chain, not the owner's
    assert not Run.objects.filter(created_by=ingestor).exclude(pk=first["id"]).exists()
    # Staff and reviewers see who (tests/api/test_run_makers.py: anyone else reads "an Ingestor").
    shown = token_client(reviewer).get(f"/api/v1/runs/{reply['run']['id']}/").json()
    assert shown["created_by"] == "other-ingestor"
    assert token_client(reviewer).get(f"/api/v1/runs/{first['id']}/").json()["created_by"] == "ingestor"
    client.force_login(reviewer)
    page = client.get(f"/runs/{reply['run']['id']}/").content.decode()
    assert 'by <span class="run-creator">other-ingestor</span>' in page
