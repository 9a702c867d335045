"""The pages under production's Content-Security-Policy, in Chromium: every page type draws its
chart (plotly.js included) and the browser reports no violation of the policy."""

import pytest

from config.middleware import PRODUCTION_POLICY
from tests.browser.test_pages_in_browser import PAGE_TYPES, chart_points, demo_urls

pytestmark = pytest.mark.browser

# Collected in the page before any of its scripts run (Playwright's init scripts are not subject to the page's CSP).
RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener('securitypolicyviolation',
  e => window.cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${e.sourceFile}:${e.lineNumber})`));
"""


def test_every_page_draws_its_chart_under_the_production_policy(shared_site, page, settings):
    settings.CONTENT_SECURITY_POLICY = PRODUCTION_POLICY
    page.add_init_script(RECORD_VIOLATIONS)
    console = []
    page.on(
        "console", lambda message: console.append(message.text) if "Content Security Policy" in message.text else None
    )
    urls = demo_urls()
    for name, _table, chart in PAGE_TYPES:
        response = page.goto(shared_site + urls[name])
        assert response.headers["content-security-policy"] == PRODUCTION_POLICY, name
        assert chart_points(page, chart) >= 1, name
        assert page.evaluate("window.cspViolations") == [], name
    assert console == []


def test_the_policy_blocks_an_inline_script(shared_site, page, settings):
    # The check above can fail: an inline script is what the policy forbids, and the browser reports it.
    settings.CONTENT_SECURITY_POLICY = PRODUCTION_POLICY
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto(shared_site + "/")
    page.evaluate(
        "document.body.appendChild(Object.assign(document.createElement('script'), {textContent: 'window.ran = 1'}))"
    )
    page.wait_for_function("window.cspViolations.length > 0")
    assert page.evaluate("window.ran") is None
