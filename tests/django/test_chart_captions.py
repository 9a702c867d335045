"""A chart's caption says what the chart draws: the launch-post chart's caption is read from its
own figure, never written beside it (issue 21.4). tests/browser checks the drawn colours."""

import datetime as dt
import html as html_lib
import json

import pytest

from leaderboard.models import Lab, LaunchPost
from leaderboard.reads import charts
from tests.pagekit import plain_static  # noqa: F401

pytestmark = pytest.mark.django_db


def posts(*lists: bool) -> list[LaunchPost]:
    lab = Lab.objects.get_or_create(name="Lab A")[0]
    return [
        LaunchPost.objects.create(
            lab=lab, title=f"Post {n}", url=f"https://example.org/{lab.pk}/{len(lists)}/{n}", published_on=dt.date(2025, 1, 1 + n),
            lists_kernelbench=listed,
        )
        for n, listed in enumerate(lists)
    ]  # fmt: skip


def test_the_caption_names_the_colour_and_height_each_trace_draws():
    figure = charts.launch_timeline(posts(True, False))
    marks = [trace["marker"] for trace in figure["data"]]
    assert [m["color"] for m in marks] == [charts.MEASURED_COLOUR, charts.DEMO_COLOUR]  # stroked in marker.color
    assert marks[0]["size"] > marks[1]["size"]
    assert charts.marks_caption(figure) == (
        "Tall red marks: posts that list KernelBench; short grey marks: posts that do not."
    )


def test_the_caption_follows_the_figure_not_a_fixed_text():
    figure = charts.launch_timeline(posts(True, False))
    figure["data"][0]["marker"].update(color=charts.REPORTED_COLOUR, size=12)  # one height now, blue
    assert charts.marks_caption(figure) == "Blue marks: posts that list KernelBench; grey marks: posts that do not."
    figure["data"][0]["marker"]["color"] = "#123456"  # a colour with no name: not guessed
    assert charts.marks_caption(figure).startswith("Marks: posts that list KernelBench")
    LaunchPost.objects.all().delete()
    assert charts.marks_caption(charts.launch_timeline(posts(False))) == "Grey marks: posts that do not."


def test_the_overview_shows_the_caption_of_the_chart_it_carries(client):
    posts(True, False)
    page = client.get("/").content.decode()
    start = page.index('id="chart-data-launch_posts"')
    figure = json.loads(html_lib.unescape(page[page.index(">", start) + 1 : page.index("</script>", start)]))
    assert f'<p class="muted" id="launch-marks">{charts.marks_caption(figure)}</p>' in page
