import html as html_lib
import json

import pytest
from django.core.management import call_command

from leaderboard.models import LaunchPost
from tests.pagekit import count_queries, make_model, make_reported, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


def chart_json(page: str, name: str) -> str:
    """The figure a chart's json_script carries."""
    start = page.index(f'id="chart-data-{name}"')
    return html_lib.unescape(page[page.index(">", start) + 1 : page.index("</script>", start)])


def test_it_renders_empty(client):
    response = client.get("/")
    assert response.status_code == 200
    assert b"No reported scores yet" in response.content


def test_it_shows_demo_data_labelled(client):
    call_command("seed_demo", stdout=open("/dev/null", "w"))
    html = client.get("/").content.decode()
    assert "Strongest measured (fast_1)" in html
    assert "Demo Alpha" in html and "demo data" in html
    assert 'id="chart-data-over_time"' in html and 'id="chart-data-launch_posts"' in html


def test_it_ranks_reported_scores_within_variants_only(client):
    a, b = make_model("Alpha"), make_model("Beta")
    make_reported(a, 30, variant="Variant A")
    make_reported(b, 90, variant="Variant B")
    make_reported(b, 20, variant="Variant A", caveat="Measured on a subset.")
    html = client.get("/").content.decode()
    assert "Variant A" in html and "Variant B" in html
    assert "Measured on a subset." in html
    table = html[html.index('id="reported-table"') :]
    assert table.index("Alpha") < table.index("Beta")  # within Variant A, 30% beats 20%


def test_it_blanks_non_http_source_links(client):
    make_reported(make_model("Evil"), source_url="javascript:alert(1)")
    html = client.get("/").content.decode()
    assert "javascript:alert" not in html


def test_it_escapes_model_names(client):
    make_reported(make_model("<script>alert(1)</script>"))
    html = client.get("/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_it_names_the_latest_launch_post_listing_kernelbench(client):
    model = make_model("Listed")
    lab = model.lab
    LaunchPost.objects.create(
        lab=lab, model=model, title="Old post", url="https://e.com/1", published_on="2025-01-01", lists_kernelbench=True
    )
    LaunchPost.objects.create(
        lab=lab, model=model, title="New post", url="https://e.com/2", published_on="2025-06-01", lists_kernelbench=True
    )
    LaunchPost.objects.create(lab=lab, title="Newest, unlisted", url="https://e.com/3", published_on="2025-09-01")
    html = client.get("/").content.decode()
    card = html[html.index("Latest launch post listing KernelBench") :]
    assert card.index("New post") < card.index("</div>")


def test_it_costs_the_same_queries_with_more_rows(client):
    problem_set = make_set()
    make_run(problem_set)
    make_reported(make_model())
    before = count_queries(client, "/")
    for _ in range(4):
        model = make_model()
        make_run(problem_set, model=model)
        make_reported(model, variant="Other")
    assert count_queries(client, "/") == before


def test_it_cuts_long_variants_and_links_to_all(client):
    for index in range(12):
        make_reported(make_model(f"Many {index:02d}"), value=index, variant="Crowded")
    html = client.get("/").content.decode()
    table = html[html.index('id="reported-table"') : html.index("</table>", html.index('id="reported-table"'))]
    assert "best 3 of 12" in table and "Many 11" in table and "Many 09" in table and "Many 08" not in table


def test_it_carries_the_almanacs_facts(client):
    make_reported(make_model("Counted"), 12)
    html = client.get("/").content.decode()
    assert 'Released</dt><dd id="released">December 2024 (paper February 2025)' in html
    assert "In the authors' words" in html and "generate efficient GPU kernels" in html
    assert "KernelBench v0.1</strong> (July 2025)" in html and "randomised correctness tests" in html
    assert "1 model scored in lab cards and papers (1 reported score)" in html


def test_scores_over_time_are_coloured_by_variant_with_the_model_on_hover(client):
    make_reported(make_model("Alpha"), 40, variant="Variant A")
    make_reported(make_model("Beta"), 50, variant="Variant B")
    make_run(make_set(), model=make_model("Gamma"))
    run_rescorer()
    figure = json.loads(chart_json(client.get("/").content.decode(), "over_time"))
    reported = [t for t in figure["data"] if t.get("legendgroup") == "reported"]
    assert sorted(t["name"] for t in reported) == ["Variant A", "Variant B"]
    assert len({t["marker"]["color"] for t in reported}) == 2
    assert any(text.startswith("Alpha: 40%") for t in reported for text in t["hovertext"])
    (measured,) = [t for t in figure["data"] if t.get("legendgroup") == "measured"]
    assert measured["hovertext"][0].startswith("Gamma: fast_1")
    assert figure["layout"]["shapes"][0]["y0"] == 85
