import csv
import io
import re

import pytest

from leaderboard.models import Origin
from tests.pagekit import count_queries, make_hardware, make_model, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture
def board():
    problem_set = make_set(levels=(1, 1, 1, 1, 2))
    fast = make_run(problem_set, [2.5, 1.6, 0.9, None, 1.2], model=make_model("Fast"))
    slow = make_run(problem_set, [1.1, None, None, None, None], model=make_model("Slow"), origin=Origin.IMPORTED)
    run_rescorer()
    return problem_set, fast, slow


def test_it_shows_a_row_per_run_best_first(client, board):
    html = client.get("/levels/1/").content.decode()
    table = html[html.index('id="level-table"') :]
    assert table.index("Fast") < table.index("Slow")
    assert "imported, unverified" in table


def test_it_computes_fast_p_against_the_level(client, board):
    rows = list(csv.DictReader(io.StringIO(client.get("/levels/1/?export=csv").content.decode())))
    fast = next(row for row in rows if row["Model"] == "Fast")
    assert float(fast["Correct (fast_0)"]) == 0.75  # 3 of 4 level-1 problems
    assert float(fast["fast_1"]) == 0.5
    assert fast["Attempted"] == "4" and fast["problems"] == "4"


def test_it_adds_the_picked_p_column(client, board):
    html = client.get("/levels/1/?p=2").content.decode()
    assert re.search(r'<th scope="col" class="num picked" data-key="fast_2"', html)
    rows = client.get("/levels/1/?p=0.95&export=json").json()["rows"]
    assert next(r for r in rows if r["model"] == "Fast")["fast_0.95"] == 0.5


def test_it_rejects_a_bad_p(client, board):
    response = client.get("/levels/1/?p=-3")
    assert response.status_code == 200
    assert b"p must lie between" in response.content


def test_it_filters_by_origin_and_hardware(client, board):
    rows = client.get("/levels/all/?origin=measured&export=json").json()["rows"]
    assert [r["model"] for r in rows] == ["Fast"]
    make_hardware("cpu")
    assert client.get("/levels/all/?hardware=cpu&export=json").json()["rows"] == []


def test_it_ranks_by_fast_1_by_default(client, board):
    html = client.get("/levels/1/").content.decode()
    assert re.search(r'data-key="fast_1"[^>]*aria-sort="descending"', html)


def test_it_sorts_by_a_column(client, board):
    rows = client.get("/levels/1/?sort=model&dir=asc&export=json").json()["rows"]
    assert [r["model"] for r in rows] == ["Fast", "Slow"]
    rows = client.get("/levels/1/?sort=fast_1&dir=asc&export=json").json()["rows"]
    assert [r["model"] for r in rows] == ["Slow", "Fast"]


def test_it_exports_what_the_table_shows(client, board):
    html = client.get("/levels/1/?p=1.3").content.decode()
    exported = client.get("/levels/1/?p=1.3&export=csv").content.decode()
    for row in csv.DictReader(io.StringIO(exported)):
        shown = f"{float(row['fast_1.3']) * 100:.1f}%"
        assert f'<td data-key="fast_1.3" class="num sorted picked" data-ranked-by="measured">{shown}</td>' in html


def test_its_csv_holds_numbers_and_the_precision(client, board):
    """Numeric columns are numbers a spreadsheet can sum (shares as fractions, as in the JSON),
    never display strings like "88.9%"; each row says its run's precision."""
    problem_set, fast, _ = board
    fast.precision = "bf16"
    fast.save()
    exported = client.get("/levels/1/?export=csv").content.decode()
    assert "%" not in exported.split("\n", 1)[1] and "x," not in exported
    rows = {row["Model"]: row for row in csv.DictReader(io.StringIO(exported))}
    fast_row, slow_row = rows["Fast"], rows["Slow"]
    assert fast_row["Precision"] == "bf16" and slow_row["Precision"] == "fp32"
    numeric = ["Compiled", "Correct (fast_0)", "fast_1", "Geomean speedup", "pass@1", "fast_1 best-of-n"]
    numeric += ["95% interval low", "95% interval high", "Correct, unscored", "Attempted", "problems"]
    for title in numeric:
        float(fast_row[title])  # raises on "75.0%" or "1.60x"
    assert float(fast_row["Geomean speedup"]) == pytest.approx((2.5 * 1.6 * 0.9) ** (1 / 3))
    low, high = float(fast_row["95% interval low"]), float(fast_row["95% interval high"])
    assert 0 <= low <= float(fast_row["fast_1"]) <= high <= 1
    assert slow_row["Geomean speedup"] == "" or float(slow_row["Geomean speedup"]) == pytest.approx(1.1)


def test_its_json_holds_numbers_and_the_precision(client, board):
    problem_set, fast, _ = board
    fast.precision = "fp16"
    fast.save()
    body = client.get("/levels/1/?export=json").json()
    assert "precision" in body["columns"]
    row = next(r for r in body["rows"] if r["model"] == "Fast")
    assert row["precision"] == "fp16"
    assert row["correct"] == 0.75 and row["fast_1"] == 0.5 and row["attempted"] == 4
    assert all(isinstance(row[key], float) for key in ("compiled", "geomean", "pass_at_1", "best_fast_1"))
    assert all(isinstance(bound, float) for bound in row["interval"])


def test_it_404s_an_unknown_level(client):
    assert client.get("/levels/7/").status_code == 404


def test_it_draws_the_fast_p_curves(client, board):
    assert b'id="chart-data-fast_p"' in client.get("/levels/all/").content


def test_it_costs_the_same_queries_with_more_runs(client, board):
    problem_set = board[0]
    before = count_queries(client, "/levels/all/")
    for _ in range(5):
        make_run(problem_set, [1.2, 1.3, None, 2.0, 0.5])
    assert count_queries(client, "/levels/all/") == before


def test_it_notes_kernels_left_out_by_reviews(client, board, django_user_model):
    from leaderboard.models import Review

    problem_set, fast, _ = board
    reviewer = django_user_model.objects.create(username="reviewer")
    Review.objects.create(
        kernel=fast.kernels.order_by("pk").first(), reviewer=reviewer, verdict=Review.Verdict.REWARD_HACK
    )
    run_rescorer()
    rows = client.get("/levels/1/?export=json").json()["rows"]
    fast_row = next(r for r in rows if r["model"] == "Fast")
    assert fast_row["excluded"] == 1 and "1 excluded by review" in fast_row["notes"]
    assert fast_row["correct"] == 0.5  # the hacked kernel no longer counts


def test_it_says_when_the_set_has_no_problems_at_the_level(client, board):
    assert b"has no problems at this level" in client.get("/levels/4/").content


def test_it_toggles_kernelbench_rule_and_best_of_n_visibly(client):
    """Sample 0 (KernelBench's rule) by default, best-of-n on ?rule=best; the page says which,
    links to the other, and the filters form and the downloads keep the choice."""
    from leaderboard.models import Kernel
    from tests.pagekit import evaluate

    problem_set = make_set(levels=(1, 1))
    run = make_run(problem_set, [None, 1.5], model=make_model("Retry"))
    first = problem_set.problems.order_by("number").first()
    evaluate(Kernel.objects.create(run=run, problem=first, sample_index=1, source="class ModelNew: ...\n"), 2.0)
    run_rescorer()

    html = client.get("/levels/1/").content.decode()
    toggle = html[html.index('id="rule-toggle"') :].split("</p>")[0]
    assert 'data-rule="sample0"' in toggle and "KernelBench&#x27;s rule" in toggle
    assert "?rule=best" in toggle and 'name="rule"' not in html
    assert client.get("/levels/1/?export=json").json()["rows"][0]["fast_1"] == 0.5

    html = client.get("/levels/1/?rule=best").content.decode()
    toggle = html[html.index('id="rule-toggle"') :].split("</p>")[0]
    assert 'data-rule="best"' in toggle and "best-of-n" in toggle and "Back to KernelBench" in toggle
    assert '<input type="hidden" name="rule" value="best">' in html
    body = client.get("/levels/1/?rule=best&export=json").json()
    assert body["rule"] == "best" and body["rows"][0]["rule"] == "best" and body["rows"][0]["fast_1"] == 1.0
    row = next(csv.DictReader(io.StringIO(client.get("/levels/1/?rule=best&export=csv").content.decode())))
    assert row["rule"] == "best" and float(row["fast_1"]) == 1.0
    assert client.get("/levels/1/?rule=bogus&export=json").json()["rule"] == "sample0"


@pytest.mark.parametrize("key", ["unscored", "best_fast_1", "pass_at_1", "compiled", "geomean"])
def test_every_sortable_column_sorts(client, board, key):
    ascending = client.get(f"/levels/1/?sort={key}&dir=asc&export=json").json()["rows"]
    descending = client.get(f"/levels/1/?sort={key}&dir=desc&export=json").json()["rows"]
    assert [r[key] for r in ascending] == sorted(r[key] for r in ascending)
    assert [r[key] for r in descending] == sorted((r[key] for r in descending), reverse=True)
    assert [r["model"] for r in descending] == ["Fast", "Slow"]  # Fast leads on each of these


def test_every_sortable_column_has_a_sort_key():
    from leaderboard.reads.board.columns import columns_for
    from leaderboard.reads.board.rows import SORT_KEYS

    keys = {c.key for c in columns_for(1.2) if c.sortable and not c.key.startswith("fast_")}
    assert keys <= set(SORT_KEYS)


def test_it_leads_with_the_picked_p_and_its_interval_and_the_p_field_agrees(client, board):
    # issue 21.3: rank, model, then fast_p at the picked p (default 1) and its interval; the p
    # field says the p of the highlighted column, and the board is ranked by it.
    html = client.get("/levels/1/").content.decode()
    head = html[html.index('id="level-table"') : html.index("</thead>")]
    assert re.findall(r'data-key="([^"]+)"', head)[:3] == ["model", "fast_1", "interval"]
    assert re.search(r'class="num picked" data-key="fast_1"[^>]*aria-sort="descending"', head)
    assert re.search(r'id="p-input"[^>]*value="1"', html)
    html = client.get("/levels/1/?p=1.5").content.decode()
    head = html[html.index('id="level-table"') : html.index("</thead>")]
    assert re.findall(r'data-key="([^"]+)"', head)[:3] == ["model", "fast_1.5", "interval"]
    assert "fast_1.5" in re.search(r'data-key="interval" title="([^"]+)"', head).group(1)
