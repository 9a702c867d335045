"""The reviewer's instruments in real Chromium: a reviewer sorts and filters the review queue by
them and opens the kernel page's Instruments panel."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.boards import rescoring as board_rescoring
from leaderboard.models import Evaluation, Kernel
from tests.browser.conftest import save_screenshot
from tests.django.test_instruments_pages import record

pytestmark = pytest.mark.browser


def flag(kernel: Kernel, code: str, instruments: dict) -> None:
    """Give the kernel's latest evaluation a flag and an instruments record (a bulk update: the review
    state is stored again, as a bulk writer must)."""
    Evaluation.objects.filter(pk=kernel.latest_evaluation_id).update(
        flags=[{"code": code, "message": f"{code}: made up for the test"}], instruments=instruments
    )
    board_rescoring.refresh_kernel_states([kernel.pk])


def sign_in(page, site: str, user) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": site}])


def test_a_reviewer_sorts_and_filters_the_queue_by_the_instruments_and_reads_them(site, light_page, reviewer):
    kernels = list(Kernel.objects.filter(latest_evaluation__correct=True).order_by("pk")[:2])
    impossible, slow = kernels
    flag(impossible, "impossible_speed", record(sol=2.5, worst=0.3))
    flag(slow, "precision_downgrade", record(sol=0.3, ratio=250.0, worst=0.7))
    page = light_page
    sign_in(page, site, reviewer)

    page.goto(f"{site}/review/?sort=sol")
    rows = page.eval_on_selector_all("#review-queue tbody tr[data-kernel]", "rows => rows.map(r => r.dataset.kernel)")
    assert rows[:2] == [str(impossible.pk), str(slow.pk)]
    sol = page.inner_text(f"#review-queue tr[data-kernel='{impossible.pk}'] td[data-figure='sol']")
    assert sol.strip() == "250%"
    page.click("#review-queue th a:has-text('Tolerance used')")  # the column heading sorts
    page.wait_for_url("**sort=margin**")
    rows = page.eval_on_selector_all("#review-queue tbody tr[data-kernel]", "rows => rows.map(r => r.dataset.kernel)")
    assert rows[:2] == [str(slow.pk), str(impossible.pk)]

    page.select_option("#queue-filters select[name=flag]", "impossible_speed")
    page.click("#queue-filters button[type=submit]")
    page.wait_for_url("**flag=impossible_speed**")
    rows = page.eval_on_selector_all("#review-queue tbody tr[data-kernel]", "rows => rows.map(r => r.dataset.kernel)")
    assert rows == [str(impossible.pk)]
    save_screenshot(page, "review-queue-instruments")

    page.click(f"#review-queue tr[data-kernel='{impossible.pk}'] a")
    page.wait_for_selector("#instruments-facts")
    sol_cell = page.locator("#instruments-facts dd[data-instrument='speed_of_light']")
    assert "flagged" in sol_cell.inner_text() and "250.0% of it" in sol_cell.inner_text()
    sol_cell.locator("summary").click()
    assert sol_cell.locator("details dl").is_visible()
    assert "aten.mm" in sol_cell.inner_text()
    shapes = page.inner_text("#instruments-facts dd[data-instrument='shapes']")
    assert "halved: failed" in shapes
    # A reviewer reads the kernel's own error text too (visitors do not), as text, never as markup.
    sol_cell.page.locator("#instruments-facts dd[data-instrument='shapes'] summary").click()
    assert "RuntimeError: <secret from /etc/passwd>" in page.inner_text(
        "#instruments-facts dd[data-instrument='shapes']"
    )
    save_screenshot(page, "kernel-instruments")
