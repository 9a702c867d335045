import io

import pytest
from django.core.management import CommandError, call_command

from leaderboard.models import LaunchPost

CSV = (
    "date,lab,model,title,url,lists_kernelbench,kernelbench_score\n"
    "2025-06-01,Lab A,Model A,Model A is here,https://a.example/a,yes,L1 fast_1 40%\n"
    "2025-07-01,Lab B,,Lab B news,https://b.example/b,,\n"
)


def run(path) -> str:
    out = io.StringIO()
    call_command("import_launch_posts", str(path), stdout=out)
    return out.getvalue()


def test_it_imports_launch_posts_idempotently(tmp_path, db):
    path = tmp_path / "posts.csv"
    path.write_text(CSV)
    assert "2 created" in run(path)
    assert "0 created, 0 updated, 2 unchanged" in run(path)
    assert LaunchPost.objects.get(lists_kernelbench=True).model.name == "Model A"


def test_bad_rows_write_nothing(tmp_path, db):
    path = tmp_path / "posts.csv"
    path.write_text(CSV.replace("2025-07-01", "2999-07-01"))
    with pytest.raises(CommandError, match="line 3: date 2999-07-01 is in the future"):
        run(path)
    assert LaunchPost.objects.count() == 0


def test_missing_or_non_utf8_files(tmp_path, db):
    with pytest.raises(CommandError, match="no such file"):
        run(tmp_path / "none.csv")
    path = tmp_path / "bad.csv"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(CommandError, match="not UTF-8"):
        run(path)
