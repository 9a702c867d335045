import csv
import re
from pathlib import Path

import pytest

from leaderboard.models import Kernel, LanguageModel
from problems.models import Problem
from tests.browser.conftest import save_screenshot

pytestmark = pytest.mark.browser

HOSTILE_SOURCE = (
    'import torch\n# </textarea><script>alert("kernel")</script>\nclass ModelNew(torch.nn.Module):\n    pass\n'
)


def chart_points(page, selector: str) -> int:
    """How many traces plotly drew into the chart's div (0 if it drew nothing)."""
    page.wait_for_selector(f"{selector}[data-drawn='true']")
    return page.eval_on_selector(selector, "div => (div.data || []).length")


def table_cells(page, key: str) -> list[str]:
    texts = page.eval_on_selector_all(
        f"#level-table tbody td[data-key='{key}']", "cells => cells.map(c => c.textContent.trim())"
    )
    # A cell that ranks by the published figure carries its label after the number ("14.0%published, L40S").
    return [match.group(0) if (match := re.match(r"^[0-9.]+%", text)) else text for text in texts]


def demo_urls() -> dict[str, str]:
    kernel = (
        Kernel.objects.filter(latest_evaluation__correct=True).exclude(source="").order_by("pk").first()
    )  # the field's have no code here
    return {
        "overview": "/",
        "level": "/levels/all/",
        "model": LanguageModel.objects.get(name="Demo Alpha").get_absolute_url(),
        "problem": Problem.objects.get(pk=kernel.problem_id).get_absolute_url(),
        "kernel": kernel.get_absolute_url(),
        "run": kernel.run.get_absolute_url(),
    }


PAGE_TYPES = [
    # name, a table that must have rows, a chart that must be drawn
    ("overview", "#reported-table", "#chart-over_time"),
    ("level", "#level-table", "#chart-fast_p"),
    ("model", "#runs-table", "#chart-history"),
    ("problem", "#kernels-table", "#chart-speedups"),
    ("kernel", "#history-table", "#chart-timing"),
    ("run", "#run-problems", "#chart-fast_p"),
]


def test_it_draws_tables_and_charts_on_every_page_type(site, page):
    # One test for all six page types: the demo data is seeded once instead of six times.
    urls = demo_urls()
    for name, table, chart in PAGE_TYPES:
        page.goto(site + urls[name])
        assert page.locator(f"{table} tbody tr").count() >= 1, name
        assert chart_points(page, chart) >= 1, name
        assert page.locator(".badge.demo").first.is_visible(), name
        save_screenshot(page, name)


def test_it_changes_the_numbers_with_p(site, light_page):
    page = light_page
    page.goto(site + "/levels/all/")
    before = table_cells(page, "fast_1")
    page.fill("#p-input", "0.3")
    with page.expect_navigation():
        page.press("#p-input", "Enter")
    assert "p=0.3" in page.url
    after = table_cells(page, "fast_0.3")
    assert after and after != before
    assert page.locator("#level-table th[data-key='fast_0.3']").is_visible()


def test_it_toggles_the_diff_layout(site, light_page):
    page = light_page
    page.goto(site + demo_urls()["kernel"])
    split, unified = (
        page.locator("#reference-diff [data-diff-view='split']"),
        page.locator("#reference-diff [data-diff-view='unified']"),
    )
    assert split.is_visible() and not unified.is_visible()
    page.click("[data-diff-toggle='unified']")
    assert unified.is_visible() and not split.is_visible()
    assert "view=unified" in page.url
    page.click("[data-diff-toggle='split']")
    assert split.is_visible() and not unified.is_visible()


def test_it_downloads_the_table_as_csv(site, light_page, tmp_path: Path):
    page = light_page
    page.goto(site + "/levels/1/?p=0.9")
    with page.expect_download() as download_info:
        page.click("#download-csv")
    path = tmp_path / "board.csv"
    download_info.value.save_as(path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))

    # The CSV holds numbers (shares as fractions), the page their display text.
    def percent(cell: str) -> str:
        return f"{float(cell) * 100:.1f}%" if cell else "–"

    assert [percent(row["fast_0.9"]) for row in rows] == table_cells(page, "fast_0.9")
    assert [percent(row["Correct (fast_0)"]) for row in rows] == table_cells(page, "correct")
    speedups = [f"{float(row['Geomean speedup']):.2f}x" if row["Geomean speedup"] else "–" for row in rows]
    assert speedups == table_cells(page, "geomean")


def test_it_shows_hostile_source_as_text(site, page):
    first = Kernel.objects.order_by("pk").first()
    # A stored source never changes: the hostile one is a kernel of its own.
    kernel = Kernel.objects.create(run=first.run, problem=first.problem, sample_index=99, source=HOSTILE_SOURCE)
    model = kernel.run.model
    model.name = '<img src=x onerror=alert("name")>'
    model.save()
    page.goto(site + kernel.get_absolute_url())
    assert '</textarea><script>alert("kernel")</script>' in page.inner_text("#kernel-source")
    page.goto(site + "/levels/all/")
    chart_points(page, "#chart-fast_p")
    assert page.get_by_text('<img src=x onerror=alert("name")>').first.is_visible()
    assert page.dialogs == []


def test_it_fits_a_phone(site, phone_page):
    page = phone_page
    page.goto(site + "/levels/all/")
    chart_points(page, "#chart-fast_p")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    wide = page.eval_on_selector("#level-table", "t => t.scrollWidth > t.parentElement.clientWidth")
    save_screenshot(page, "level-phone")
    assert overflow <= 1
    assert wide  # the table scrolls inside its own box, not the page


def test_the_overview_is_compact(site, light_page):
    light_page.goto(site + "/")
    height = light_page.evaluate("document.body.scrollHeight")
    print(f"overview height at 1280 px wide, demo data: {height} px")
    assert height < 4500, height


def test_the_run_page_follows_its_verification_live(site, light_page):
    from leaderboard.models import Evaluation  # deferred: the ORM runs beside the browser only inside tests

    kernel = (
        Kernel.objects.filter(latest_evaluation__correct=True).exclude(source="").order_by("pk").first()
    )  # the field's have no code here
    pending = Evaluation.objects.create(kernel=kernel, hardware=kernel.run.hardware, state="running")
    light_page.goto(site + kernel.run.get_absolute_url())
    label = light_page.locator("#run-progress-label")
    assert "1 running" in label.text_content()
    Evaluation.objects.filter(pk=pending.pk).update(state="failed", failure_reason="worker lost")
    light_page.wait_for_function(
        "() => document.querySelector('#run-progress-label').textContent.includes('1 failed')", timeout=20_000
    )
    assert "running" not in light_page.locator("#run-progress-label").text_content()


def test_the_board_leads_with_its_answer_at_1280_wide(site, browser):
    # issue 21.3: at 1280x800 the headline column (fast_p at the picked p) and its interval are
    # inside the viewport, header and first row, with no sideways scrolling.
    from tests.browser.conftest import _new_page

    context, page = _new_page(browser, charts=False, viewport={"width": 1280, "height": 800})
    try:
        page.goto(site + "/levels/1/")
        assert page.input_value("#p-input") == "1"
        cells = [
            "#level-table th.picked[data-key='fast_1']",
            "#level-table th[data-key='interval']",
            "#level-table tbody tr:first-child td.picked[data-key='fast_1']",
            "#level-table tbody tr:first-child td[data-key='interval']",
        ]
        for selector in cells:
            box = page.locator(selector).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 1280, (selector, box)
            assert box["y"] + box["height"] <= 800, (selector, box)
        assert page.locator(cells[3]).inner_text().strip().endswith("%") or "≈" in page.locator(cells[3]).inner_text()
        assert page.evaluate("window.scrollX") == 0
    finally:
        context.close()


def test_the_launch_chart_draws_what_its_caption_says(site, page):
    # issue 21.4: the caption is read from the figure; here, plotly's drawn strokes are the
    # figure's marker colours, so the caption's colours are what the visitor sees.
    import json

    page.goto(site + "/")
    page.wait_for_selector("#chart-launch_posts[data-drawn='true']", timeout=60_000)  # four charts on a busy box
    figure = json.loads(page.inner_text("#chart-data-launch_posts"))

    def rgb(hex_colour: str) -> str:
        return "rgb({}, {}, {})".format(*(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)))

    drawn = page.eval_on_selector_all(
        "#chart-launch_posts .trace",
        "ts => ts.map(t => [...t.querySelectorAll('path.point')].map(p => p.style.stroke))",
    )
    assert [set(strokes) for strokes in drawn] == [{rgb(t["marker"]["color"])} for t in figure["data"]]
    caption = page.inner_text("#launch-marks")
    assert caption.startswith("Tall red marks") and "short grey marks" in caption


def test_the_field_board_shows_its_leader_by_each_source_at_1280_wide(site, browser):
    # issue 26.3: with the field's shape of data (runs from a published leaderboard, timed on an
    # L40S and not measured here, beside runs measured here), the level-1 board names its leader by
    # published figures and by measured ones, both inside a 1280x800 viewport without scrolling.
    from leaderboard.models import Origin, Run
    from tests.browser.conftest import _new_page
    from tests.pagekit import REFERENCE, make_hardware, make_model, make_run, make_set

    field = make_set("Field board", levels=(1, 1, 1, 1))
    h200 = make_hardware("h200")
    for name, speedups in (("field-o1", [13.2, 2.0, 1.3, 0.5]), ("field-4o", [1.2, 0.8, None, None])):
        run = Run.objects.create(
            model=make_model(name), problem_set=field, hardware=h200, origin=Origin.IMPORTED,
            published_source="KernelBench's original leaderboard", setting="best correct (published)",
        )  # fmt: skip
        for problem, speedup in zip(field.problems.order_by("number"), speedups, strict=True):
            if speedup is not None:
                Kernel.objects.create(
                    run=run, problem=problem, source=REFERENCE.replace("class Model(", "class ModelNew(") + f"# {name}\n",
                    published_speedup=speedup, published_hardware="L40S",
                )  # fmt: skip
    make_run(field, [1.6, 1.1, 0.7, None], model=make_model("measured-here-model"), hardware=h200)
    context, page = _new_page(browser, charts=False, viewport={"width": 1280, "height": 800})
    try:
        page.goto(site + f"/levels/1/?set={field.slug}")
        leaders = {
            "#leader-published": ("field-o1", "75.0%"),
            "#leader-measured": ("measured-here-model", "50.0%"),
        }
        for card, (model, value) in leaders.items():
            for selector in (f"{card} a", f"{card} [data-leader-value]"):
                box = page.locator(selector).bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= 1280, (selector, box)
                assert box["y"] >= 0 and box["y"] + box["height"] <= 800, (selector, box)
            assert page.locator(f"{card} a").inner_text() == model
            assert page.locator(f"{card} [data-leader-value]").inner_text() == value
        assert "published, L40S" in page.locator("#leader-published").inner_text()
        first = page.locator("#level-table tbody tr:first-child td.picked[data-key='fast_1']")
        assert first.get_attribute("data-ranked-by") == "published" and "published, L40S" in first.inner_text()
        assert page.evaluate("[window.scrollX, window.scrollY]") == [0, 0]
        save_screenshot(page, "level-board-field")
    finally:
        context.close()
