"""Browser tests: Debian's Chromium driven by Playwright, against pytest-django's live server with
the demo data seeded. One browser launch for the suite; each test gets a fresh context (cookies, storage).

Set SCREENSHOTS_DIR (e.g. docs/screenshots) to save a screenshot of each page type.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.pagekit import PLAIN_STORAGES

HERE = Path(__file__).resolve().parent
MAX_SCREENSHOT_HEIGHT = 2600
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser(django_db_setup):
    # One launch for the browser suite (its tests live in one module). Module scope, not session:
    # the browser must be gone before other suites run in the same pytest session, because its
    # event loop would make the ORM refuse to run. The test database is set up before it starts.
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (requirements-dev.txt)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if "shared_site" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.django_db)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Playwright's sync API keeps an asyncio loop running in this thread, and Django's ORM refuses
    to run beside one. Allow it around each browser test (setup, call and teardown, including the
    browser's own teardown after the last test) and nowhere else, so that the variable never leaks
    to other suites or to the subprocesses they start (`check --deploy` rejects it)."""
    if HERE not in Path(item.path).parents:  # this hook is called for every item of the session
        yield
        return
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def bare_site(browser, transactional_db, live_server, settings):
    """The live server's base URL over an empty database, for a test that writes all it shows (no
    seed: seeding takes 5-12 s), emptied after it."""
    settings.STORAGES = PLAIN_STORAGES
    return live_server.url


@pytest.fixture
def site(bare_site):
    """The live server's base URL, with the demo data in its database, for a test that writes: seeded
    for it alone, and the database emptied after it."""
    from leaderboard.demo import seed_demo  # deferred: Django is set up once the fixtures run

    seed_demo()
    return bare_site


@pytest.fixture(scope="module")
def shared_site(browser, django_db_setup, django_db_blocker):
    """A live server's base URL with the demo data seeded once for a module whose tests only read
    (seeding takes 5-10 s; most browser tests only look). It is its own server, not pytest-django's
    `live_server`, whose every user is given a transactional database that is emptied after each
    test; this one is emptied once, when the module ends, as `site`'s is after its test. A test that
    writes uses `site`, in a module of its own: its emptying would take the shared data with it.
    Its tests are marked `django_db` (pytest_collection_modifyitems): each runs in a transaction
    rolled back after it, which also makes pytest-django create the test database for a module of
    them alone."""
    from django.core.management import call_command
    from django.test.utils import override_settings
    from pytest_django.live_server_helper import LiveServer

    from leaderboard.demo import seed_demo

    with django_db_blocker.unblock(), override_settings(STORAGES=PLAIN_STORAGES):
        seed_demo()
        server = LiveServer("localhost")
        server._live_server_modified_settings.enable()
        try:
            yield server.url
        finally:
            server._live_server_modified_settings.disable()
            server.stop()
            call_command("flush", interactive=False, verbosity=0)


def _new_page(browser, *, charts: bool, **options):
    context = browser.new_context(**{"viewport": {"width": 1280, "height": 900}, "accept_downloads": True, **options})
    if not charts:
        # plotly.js takes seconds to start on a busy 2-core box; tests that check no chart leave it
        # out, and the pages work without it (charts are the only part that needs JavaScript).
        context.route("**/vendor/plotly.min*.js", lambda route: route.abort())
    page = context.new_page()
    page.set_default_timeout(20_000)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs  # type: ignore[attr-defined]
    return context, page


@pytest.fixture
def page(browser):
    """A page that loads plotly.js and draws charts."""
    context, page = _new_page(browser, charts=True)
    yield page
    context.close()


@pytest.fixture
def light_page(browser):
    """A page without plotly.js (faster), for tests of tables, forms and toggles."""
    context, page = _new_page(browser, charts=False)
    yield page
    context.close()


@pytest.fixture
def phone_page(browser):
    context, page = _new_page(
        browser, charts=True, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    yield page
    context.close()


def save_screenshot(page, name: str) -> None:
    folder = os.environ.get("SCREENSHOTS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        # The whole page, cut at MAX_SCREENSHOT_HEIGHT so that long pages stay readable images.
        width, height = page.evaluate("[document.documentElement.clientWidth, document.documentElement.scrollHeight]")
        clip = {"x": 0, "y": 0, "width": width, "height": min(height, MAX_SCREENSHOT_HEIGHT)}
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True, clip=clip)
