"""The first screen answers (a 1400x1000 window, the demo data with the field): on the overview and
a level page the answer cards (who leads, measured and published) start inside the first screen,
and the grid's fifth kernel column ends inside 1400 px, with no sideways scrolling."""

from __future__ import annotations

import pytest

from tests.browser.conftest import _new_page

pytestmark = pytest.mark.browser
WIDTH, HEIGHT = 1400, 1000


@pytest.fixture
def screen(browser):
    context, page = _new_page(browser, charts=False, viewport={"width": WIDTH, "height": HEIGHT})
    yield page
    context.close()


def box_of(page, selector: str) -> dict:
    page.wait_for_selector(selector, timeout=60_000)  # a board being built reloads itself until served
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box


def top_of(page, selector: str) -> float:
    return box_of(page, selector)["y"]


def assert_on_first_screen(page, selector: str) -> None:
    """The card's heading and figure on the first screen: its top within it, and its first line."""
    box = box_of(page, selector)
    assert 0 <= box["y"] and box["y"] + min(box["height"], 120) <= HEIGHT, (selector, box)


def test_the_overview_answer_cards_start_on_the_first_screen(shared_site, screen):
    screen.goto(shared_site + "/")
    for card in ("#strongest-measured", "#strongest-published", "#overview-runs-measured"):
        assert_on_first_screen(screen, card)
    # the benchmark's description follows the answer
    assert top_of(screen, "#about") > top_of(screen, "#strongest-measured")


def test_the_level_page_answer_cards_start_on_the_first_screen(shared_site, screen):
    screen.goto(shared_site + "/levels/1/")
    for card in ("#leader-measured", "#leader-published"):
        assert_on_first_screen(screen, card)


def test_the_grid_shows_five_kernels_a_problem_within_1400_px(shared_site, screen):
    screen.goto(shared_site + "/levels/1/grid/")
    screen.wait_for_selector("#level-grid thead th:nth-child(6)", timeout=60_000)
    fifth = screen.locator("#level-grid thead th:nth-child(6)").bounding_box()
    assert fifth is not None and screen.locator("#level-grid thead th:nth-child(6)").inner_text() == "#5"
    assert fifth["x"] + fifth["width"] <= WIDTH, fifth
    assert screen.evaluate("document.documentElement.scrollWidth") <= WIDTH
