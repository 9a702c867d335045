import io
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from leaderboard.models import Lab, LanguageModel, ReportedScore

pytestmark = pytest.mark.django_db

HEADER = "model,organization,variant,metric,value,unit,setting,hardware,date,source_url\n"
GOOD = "GPT-4o,OpenAI,KernelBench v0 L1 fast_1 vs PyTorch Eager,fast_1,4,%,one-shot,NVIDIA L40S,2025-02-14,https://arxiv.org/html/2502.10517v1\n"
REAL_CSV = Path(settings.BASE_DIR) / "data" / "reported_scores.csv"


def run(path) -> str:
    out = io.StringIO()
    call_command("import_reported_scores", str(path), stdout=out, stderr=io.StringIO())
    return out.getvalue()


def csv_file(tmp_path, *rows: str) -> Path:
    path = tmp_path / "scores.csv"
    path.write_text(HEADER + "".join(rows))
    return path


def test_it_imports_the_published_scores_with_their_caveats():
    out = run(REAL_CSV)
    rows = sum(1 for _ in REAL_CSV.open()) - 1
    assert ReportedScore.objects.count() == rows
    assert f"{rows} created" in out
    hard = ReportedScore.objects.filter(variant="KernelBench Hard").first()
    assert "not defined by the MiniMax post" in hard.caveat
    assert "L40S" in ReportedScore.objects.filter(source_url__contains="2502.10517").first().caveat


def test_a_second_run_changes_nothing():
    run(REAL_CSV)
    out = run(REAL_CSV)
    assert "0 created, 0 updated" in out


def test_month_only_dates_keep_their_precision(tmp_path):
    run(csv_file(tmp_path, GOOD.replace("2025-02-14", "2025-07")))
    score = ReportedScore.objects.get()
    assert score.display_date == "2025-07"


def test_models_and_labs_match_case_insensitively(tmp_path):
    lab = Lab.objects.create(name="OpenAI")
    LanguageModel.objects.create(name="gpt-4o", lab=lab)
    run(csv_file(tmp_path, GOOD))
    assert LanguageModel.objects.count() == 1 and Lab.objects.count() == 1


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (GOOD.replace(",4,%,", ",140,%,"), "outside 0-100"),
        (GOOD.replace(",4,%,", ",-1,x,"), "not positive"),
        (GOOD.replace(",4,%,", ",four,%,"), "not a number"),
        (GOOD.replace("2025-02-14", "2999-01-01"), "in the future"),
        (GOOD.replace("2025-02-14", "14/02/2025"), "not YYYY-MM-DD or YYYY-MM"),
        (GOOD.replace("https://arxiv", "javascript://arxiv"), "not an http"),
        (GOOD.replace("GPT-4o,", ",", 1), "missing model"),
    ],
)
def test_a_bad_row_names_its_line_and_nothing_is_written(tmp_path, row, message):
    with pytest.raises(CommandError, match=rf"line 3: .*{message}"):
        run(csv_file(tmp_path, GOOD.replace("GPT-4o", "Other"), row))
    assert not ReportedScore.objects.exists() and not LanguageModel.objects.exists()


def test_duplicate_rows_are_refused(tmp_path):
    with pytest.raises(CommandError, match="line 3: duplicate of line 2"):
        run(csv_file(tmp_path, GOOD, GOOD))


def test_a_missing_column_is_refused(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text("model,value\nA,1\n")
    with pytest.raises(CommandError, match="header lacks column"):
        run(path)


def test_non_utf8_is_refused(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_bytes(HEADER.encode() + b"\xff\xfe\n")
    with pytest.raises(CommandError, match="not UTF-8"):
        run(path)
