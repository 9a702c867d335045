"""Issue 19, case 9: zip amplification within the old caps. A 246 KB zip of 200 kernel files of
999 KB each (mostly spaces) was imported with 201 after 22.8 s and 200 MB stored: the ratio check
skipped members under 1 MB, and the total cap (200 MB) did not look at the archive's own size. Now
the members together may inflate to RUN_MAX_ARCHIVE_RATIO times the archive (checked from the
central directory before a member is read, and on the bytes read), and every member, however
small, is held to RUN_MAX_COMPRESSION_RATIO. Each refusal is a 400 naming the limit, nothing stored."""

from __future__ import annotations

import io
import zipfile

import pytest

from leaderboard.ingest.archives import Limits, read_zip
from leaderboard.ingest.uploads import RowErrors
from leaderboard.models import Evaluation, Kernel, Run
from tests.budgets import PADDED_KERNEL, amplified_run_zip

from .conftest import KERNEL
from .test_run_import import FIELDS, RESULTS, errors_of, make_zip, run_zip, upload


@pytest.fixture(scope="module")
def issue_zip() -> bytes:
    return amplified_run_zip()


def test_the_payload_is_the_issues(issue_zip):
    with zipfile.ZipFile(io.BytesIO(issue_zip)) as archive:
        infos = archive.infolist()
        assert len(infos) == 200 and archive.read(infos[-1]).decode() == PADDED_KERNEL
    assert len(issue_zip) < 300_000


def test_the_issue_zip_is_refused_from_its_directory_naming_the_limit(
    token_client, ingestor, problem_set, hardware, issue_zip
):
    archive = make_zip({})
    archive.write(issue_zip)
    archive.seek(0)
    errors = errors_of(upload(token_client(ingestor), archive))
    assert f"the archive inflates to {200 * 999_000} bytes; the limit is 50 times the archive's" in errors
    assert Evaluation.objects.count() == 0


def test_the_whole_archive_budget_is_its_size_times_the_ratio(issue_zip):
    budget = Limits.from_settings().inflated_budget(len(issue_zip))
    assert budget.bytes == 50 * len(issue_zip) < 200 * 999_000
    with pytest.raises(RowErrors, match="the limit is 50 times"):
        read_zip(io.BytesIO(issue_zip))


def test_a_small_member_that_compresses_too_well_is_refused(token_client, ingestor, problem_set, hardware):
    """Under the old 1 MB floor, no valid kernel file was ever checked."""
    padded = make_zip(
        {
            "level_1_problem_1_sample_0_kernel.py": "import torch\n" + " " * 50_000,
            **{f"level_1_problem_1_sample_{i}_kernel.py": KERNEL for i in range(1, 40)},
        }
    )
    errors = errors_of(upload(token_client(ingestor), padded))
    assert "level_1_problem_1_sample_0_kernel.py: compression ratio above 200:1, the limit" in errors


def test_the_total_cap_still_holds_for_big_archives(token_client, ingestor, problem_set, hardware, settings):
    settings.RUN_UNCOMPRESSED_MAX_BYTES = 100
    assert "the limit is 100 bytes" in errors_of(upload(token_client(ingestor), run_zip()))


def test_a_real_run_still_imports(token_client, ingestor, problem_set, hardware):
    response = upload(token_client(ingestor), run_zip(results=RESULTS))
    assert response.status_code == 201, response.content
    assert Run.objects.count() == 1 and Kernel.objects.count() == 2
    assert FIELDS["name"] == Run.objects.get().name
