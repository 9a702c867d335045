"""The browser tests of pages that write first (a hostile kernel, a running evaluation, a board of
their own): each seeds the demo data for itself (`site`), or writes all it shows into an empty
database (`bare_site`), apart from the pages module's tests that share one seed."""

from __future__ import annotations

import pytest

from leaderboard.models import Kernel
from tests.browser.conftest import save_screenshot
from tests.browser.test_pages_in_browser import chart_points

pytestmark = pytest.mark.browser

HOSTILE_SOURCE = (
    'import torch\n# </textarea><script>alert("kernel")</script>\nclass ModelNew(torch.nn.Module):\n    pass\n'
)


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


def test_the_field_board_shows_its_leader_by_each_source_at_1280_wide(bare_site, browser):
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
        page.goto(bare_site + f"/levels/1/?set={field.slug}")
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
