"""Every page type in Chromium, read by tests that only look: they share one seed of the demo data
(`shared_site`); the tests that write first are in test_pages_written_in_browser.py."""

import csv
import re
from pathlib import Path

import pytest

from leaderboard.models import Kernel, LanguageModel
from problems.models import Problem
from tests.browser.conftest import save_screenshot

pytestmark = pytest.mark.browser


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


def test_it_draws_tables_and_charts_on_every_page_type(shared_site, page):
    # One test for all six page types: the demo data is seeded once instead of six times.
    urls = demo_urls()
    for name, table, chart in PAGE_TYPES:
        page.goto(shared_site + urls[name])
        assert page.locator(f"{table} tbody tr").count() >= 1, name
        assert chart_points(page, chart) >= 1, name
        assert page.locator(".badge.demo").first.is_visible(), name
        save_screenshot(page, name)


def test_it_changes_the_numbers_with_p(shared_site, light_page):
    page = light_page
    page.goto(shared_site + "/levels/all/")
    before = table_cells(page, "fast_1")
    page.fill("#p-input", "0.3")
    with page.expect_navigation():
        page.press("#p-input", "Enter")
    assert "p=0.3" in page.url
    after = table_cells(page, "fast_0.3")
    assert after and after != before
    assert page.locator("#level-table th[data-key='fast_0.3']").is_visible()


def test_it_toggles_the_diff_layout(shared_site, light_page):
    page = light_page
    page.goto(shared_site + demo_urls()["kernel"])
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


def test_it_downloads_the_table_as_csv(shared_site, light_page, tmp_path: Path):
    page = light_page
    page.goto(shared_site + "/levels/1/?p=0.9")
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


def test_it_fits_a_phone(shared_site, phone_page):
    page = phone_page
    page.goto(shared_site + "/levels/all/")
    chart_points(page, "#chart-fast_p")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    wide = page.eval_on_selector("#level-table", "t => t.scrollWidth > t.parentElement.clientWidth")
    save_screenshot(page, "level-phone")
    assert overflow <= 1
    assert wide  # the table scrolls inside its own box, not the page


def test_the_overview_is_compact(shared_site, light_page):
    light_page.goto(shared_site + "/")
    height = light_page.evaluate("document.body.scrollHeight")
    print(f"overview height at 1280 px wide, demo data: {height} px")
    assert height < 4500, height


def test_the_board_leads_with_its_answer_at_1280_wide(shared_site, browser):
    # issue 21.3: at 1280x800 the headline column (fast_p at the picked p) and its interval are
    # inside the viewport, header and first row, with no sideways scrolling.
    from tests.browser.conftest import _new_page

    context, page = _new_page(browser, charts=False, viewport={"width": 1280, "height": 800})
    try:
        page.goto(shared_site + "/levels/1/")
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


def test_the_launch_chart_draws_what_its_caption_says(shared_site, page):
    # issue 21.4: the caption is read from the figure; here, plotly's drawn strokes are the
    # figure's marker colours, so the caption's colours are what the visitor sees.
    import json

    page.goto(shared_site + "/")
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
