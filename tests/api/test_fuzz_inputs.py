"""Fuzzing the inputs a hostile or careless client sends (issue 12), by class rather than by the
exact repro: hypothesis draws CSV headers and cells (huge, control characters, formulas, unknown
columns, no rows), JSON bodies (nesting depth, duplicate keys), run zips (member names, numbers in
names and keys, runtimes) and query parameters (control characters), and checks the properties the
site promises:

- no input gives a 5xx;
- a refused input (4xx) writes nothing;
- unknown columns, empty tables, duplicate JSON keys, control characters in a query parameter,
  numbers outside a column's range and runtimes that are not finite and positive are refused.

Runs on SQLite and PostgreSQL (tests/run-suites.sh runs tests/api on both; NUL reaches the
database only there). Deterministic (derandomized; KB_FUZZ_RANDOM=1 explores) and bounded:
KB_FUZZ_INPUT_EXAMPLES (200) examples per test, well under a minute on two cores.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import pytest
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from leaderboard.ingest import launch_posts, reported_scores
from leaderboard.models import Evaluation, Kernel, KernelReport, LaunchPost, ReportedScore, Review, Run
from problems.models import DB_INT_MAX

from .conftest import KERNEL

EXAMPLES = int(os.environ.get("KB_FUZZ_INPUT_EXAMPLES", "200"))
FUZZ = hsettings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=not os.environ.get("KB_FUZZ_RANDOM"),
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
pytestmark = [pytest.mark.timeout(300)]

CONTROL = [chr(c) for c in [*range(0, 32), 127]]
FORMULA_STARTS = ["=", "+", "-", "@", "\t", "\r"]


def row_counts() -> dict[str, int]:
    models = (ReportedScore, LaunchPost, Run, Kernel, Evaluation, Review, KernelReport)
    return {model.__name__: model.objects.count() for model in models}


def short(response) -> str:
    return f"{response.status_code} {response.content[:300]!r}"


@pytest.fixture
def unthrottled(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"writes": "1000000/min"}}
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False


def post(client, url: str, body, content_type: str):
    return client.generic("POST", url, body, content_type=content_type)


def check_written_only_on_success(response, before: dict[str, int]) -> None:
    assert response.status_code < 500, short(response)
    if response.status_code >= 400:
        assert row_counts() == before, f"a refused request wrote rows: {short(response)}"


# ---------------------------------------------------------------------------------------------
# CSV: headers and cells

huge = st.integers(min_value=10_001, max_value=300_000).map(lambda n: "x" * n)
control_text = st.builds(lambda a, c, b: a + c + b, st.text(max_size=5), st.sampled_from(CONTROL), st.text(max_size=5))
formula = st.builds(lambda s, t: s + t, st.sampled_from(FORMULA_STARTS), st.text(max_size=30))
cell = st.one_of(st.text(max_size=40), huge, control_text, formula, st.sampled_from(["", "4", "2025-01-01", "%", "x"]))
GOOD_SCORE = {
    "model": "Model A",
    "organization": "Lab",
    "variant": "KernelBench L1",
    "metric": "fast_1",
    "value": "4",
    "unit": "%",
    "setting": "one-shot",
    "hardware": "H100",
    "date": "2025-01-01",
    "source_url": "https://e.com/p",
}


def to_csv(header: list[str], rows: list[list[str]]) -> str:
    import csv

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


@st.composite
def score_tables(draw):
    """A reported-scores CSV: mostly the right columns with some cells replaced, sometimes an
    odd header (huge, control characters, formulas, an unknown column), sometimes no rows."""
    header = list(reported_scores.COLUMNS)
    if draw(st.booleans()):
        header[draw(st.integers(0, len(header) - 1))] = draw(cell)
    if draw(st.booleans()):
        header.append(draw(st.one_of(st.sampled_from(["notes", "comment"]), cell)))
    rows = []
    for _ in range(draw(st.integers(0, 3))):
        row = [GOOD_SCORE.get(column, "") for column in header]
        for index in draw(st.lists(st.integers(0, len(header) - 1), max_size=3)):
            row[index] = draw(cell)
        rows.append(row)
    return header, rows


@FUZZ
@given(table=score_tables(), as_file=st.booleans())
def _reported_scores_csv(token_client, ingestor, table, as_file):
    header, rows = table
    text = to_csv(header, rows)
    client = token_client(ingestor)
    before = row_counts()
    if as_file:
        response = client.post(
            "/api/v1/reported-scores/", {"file": io.BytesIO(text.encode("utf-8", "surrogatepass"))}, format="multipart"
        )
    else:
        response = post(client, "/api/v1/reported-scores/", text.encode("utf-8", "surrogatepass"), "text/csv")
    check_written_only_on_success(response, before)
    unknown = [column for column in header if column not in reported_scores.COLUMNS]
    if unknown or not rows:
        assert response.status_code == 400, f"unknown columns {[c[:30] for c in unknown]} or no rows: {short(response)}"
    if response.status_code < 300:
        stored = ReportedScore.objects.values_list("model__name", "variant", "setting", "hardware_name", "source_url")
        assert not any(ch in text for values in stored for text in values for ch in CONTROL), (
            "a control character was stored"
        )


def test_reported_scores_csv_fuzz(db, token_client, ingestor, unthrottled):
    _reported_scores_csv(token_client, ingestor)


@FUZZ
@given(
    header=st.lists(st.one_of(st.sampled_from(launch_posts.COLUMNS), cell), min_size=1, max_size=8),
    cells=st.lists(cell, max_size=8),
)
def _launch_posts_csv(token_client, ingestor, header, cells):
    client = token_client(ingestor)
    before = row_counts()
    response = post(
        client,
        "/api/v1/launch-posts/",
        to_csv(header, [cells] if cells else []).encode("utf-8", "surrogatepass"),
        "text/csv",
    )
    check_written_only_on_success(response, before)


def test_launch_posts_csv_fuzz(db, token_client, ingestor, unthrottled):
    _launch_posts_csv(token_client, ingestor)


# ---------------------------------------------------------------------------------------------
# JSON: depth and duplicate keys, on every JSON write route


def nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def json_routes(kernel_id: int) -> list[str]:
    return [
        "/api/v1/reported-scores/",
        "/api/v1/launch-posts/",
        "/api/v1/runs/import/",
        "/api/v1/submissions/",
        "/api/v1/reviews/",
        f"/api/v1/kernels/{kernel_id}/reports/",
        f"/api/v1/kernels/{kernel_id}/reviews/",
    ]


@FUZZ
@given(
    depth=st.one_of(st.integers(1, 70), st.integers(70, 200_000)),
    kind=st.sampled_from(["list", "object"]),
    route=st.integers(0, 6),
)
def _json_depth(client, run, depth, kind, route):
    url = json_routes(run.kernels.first().pk)[route]
    before = row_counts()
    response = post(client, url, nested(depth, kind), "application/json")
    check_written_only_on_success(response, before)


def test_json_nesting_fuzz(db, token_client, admin_user, run, unthrottled):
    _json_depth(token_client(admin_user), run)


@FUZZ
@given(
    key=st.sampled_from(["model", "value", "date", "url", "verdict", "source", "kernels"]),
    route=st.integers(0, 6),
    values=st.tuples(st.text(max_size=5), st.text(max_size=5)),
)
def _json_duplicate_keys(client, run, key, route, values):
    url = json_routes(run.kernels.first().pk)[route]
    body = "{" + ", ".join(f"{json.dumps(key)}: {json.dumps(value)}" for value in values) + "}"
    before = row_counts()
    response = post(client, url, body, "application/json")
    check_written_only_on_success(response, before)
    assert response.status_code == 400 and b"duplicate key" in response.content, short(response)


def test_json_duplicate_keys_are_refused_everywhere(db, token_client, admin_user, run, unthrottled):
    _json_duplicate_keys(token_client(admin_user), run)


# ---------------------------------------------------------------------------------------------
# Run zips: member names, numbers in names and results keys, runtimes

number_text = st.one_of(
    st.integers(0, 5).map(str),
    st.integers(0, 10**30).map(str),
    st.integers(1, 5000).map(lambda n: "9" * n),
    st.sampled_from(["²", "١", "-1", "0x1", " 1", "1.0", "2147483647", "2147483648"]),
)
member_name = st.one_of(
    # Mostly a level and problem of the set, so that the sample number reaches the database.
    st.builds(
        lambda lv, p, s: f"level_{lv}_problem_{p}_sample_{s}_kernel.py",
        st.one_of(st.just("1"), number_text),
        st.one_of(st.sampled_from(["1", "2"]), number_text),
        number_text,
    ),
    st.sampled_from(["../x.py", "/abs/level_1_problem_1_sample_0_kernel.py", "a/../../b", "C:/x.py", "__MACOSX/._a"]),
    st.text(min_size=1, max_size=40),
)
runtime = st.one_of(
    st.none(), st.floats(allow_nan=False), st.sampled_from([-1, 0, -0.0, 1e999, -1e999]), st.text(max_size=3)
)
result = st.fixed_dictionaries(
    {
        "sample_id": st.one_of(st.integers(-2, 3), st.integers(2**31 - 2, 2**31 + 2), st.integers(10**19, 10**20)),
        "compiled": st.booleans(),
        "correctness": st.booleans(),
        "runtime": runtime,
        "runtime_stats": st.dictionaries(
            st.sampled_from(["mean", "std", "hardware"]),
            st.one_of(st.floats(allow_nan=False), st.text(max_size=3)),
            max_size=3,
        ),
    }
)
results = st.dictionaries(
    st.one_of(
        st.sampled_from(["1", "2"]), number_text, st.builds("level_{}_problem_{}".format, number_text, number_text)
    ),
    st.lists(result, max_size=2),
    max_size=3,
)


def run_zip(names: list[str], eval_results) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            try:
                archive.writestr(name, KERNEL)
            except (ValueError, IndexError):
                pass  # zipfile itself cannot write some names (e.g. ones that are only NUL and more)
        if eval_results is not None:
            archive.writestr("eval_results.json", json.dumps(eval_results, allow_nan=True))
    buffer.seek(0)
    buffer.name = "run.zip"
    return buffer


@FUZZ
@given(
    names=st.lists(member_name, min_size=1, max_size=3),
    eval_results=st.one_of(st.none(), results),
    level=st.sampled_from(["", "1"]),
)
def _run_zips(client, names, eval_results, level):
    fields = {"model": "Fuzz", "hardware": "cpu", "problem_set": "kb", "name": "fuzz"}
    if level:
        fields["level"] = level
    before = row_counts()
    response = client.post("/api/v1/runs/import/", {**fields, "file": run_zip(names, eval_results)}, format="multipart")
    check_written_only_on_success(response, before)
    if response.status_code < 300:
        assert Kernel.objects.filter(sample_index__gt=DB_INT_MAX).count() == 0
        for kernel_ms, speedup in Evaluation.objects.filter(origin="imported").values_list("kernel_ms", "speedup"):
            assert kernel_ms is None or 0 < kernel_ms < float("inf"), kernel_ms
            assert speedup is None or 0 < speedup < float("inf"), speedup
        correct = [r for rs in (eval_results or {}).values() for r in rs if r["correctness"] and r["compiled"]]
        assert not any(isinstance(r["runtime"], (int, float)) and not 0 < r["runtime"] < 1e300 for r in correct), (
            f"a correct result with runtime {[r['runtime'] for r in correct]} was accepted"
        )


# Hypothesis draws repeated member names on purpose (a zip may hold them); zipfile warns each time.
@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
def test_run_zip_fuzz(db, token_client, ingestor, problem_set, hardware, baseline, unthrottled):
    _run_zips(token_client(ingestor))


# ---------------------------------------------------------------------------------------------
# Query parameters of pages and API

PAGES = [
    "/search/?q=",
    "/reported/?variant=",
    "/levels/all/?setting=",
    "/problems/?q=",
    "/models/?q=",
    "/api/v1/runs/?setting=",
    "/api/v1/problems/?search=",
    "/api/v1/reported-scores/?variant=",
]


@FUZZ
@given(page=st.sampled_from(PAGES), value=st.one_of(control_text, st.text(max_size=20)))
def _query_parameters(client, page, value):
    from urllib.parse import quote

    response = client.get(page + quote(value.encode("utf-8", "surrogatepass")))
    assert response.status_code < 500, short(response)
    if any(ch in value for ch in CONTROL):
        assert response.status_code == 400, f"{page}{value!r}: {short(response)}"


def test_query_parameter_fuzz(db, client, run):
    _query_parameters(client)
