"""The browsing page loads cleanly in the real browser: no request answered 4xx/5xx and no
Content-Security-Policy violation (the page fixture fails the test on any), also when htmx swaps the panel
while an element carries a style the browser gave it (a resized box)."""

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_demonstration import sign_in_and_start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def failed_requests(page: Page) -> list[str]:
    failures: list[str] = []
    page.on(
        "response",
        lambda response: (
            failures.append(f"{response.status} {response.url}") if response.status >= 400 else None
        ),
    )
    return failures


def test_the_browsing_page_loads_everything_and_swaps_without_inline_styles(demo_site, page):
    failures = failed_requests(page)
    sign_in_and_start(page)
    # What a user's drag on a resize handle does: a style set through the CSSOM (allowed by the CSP).
    # htmx used to copy such a style onto the swapped-in element with setAttribute (refused by the CSP).
    page.evaluate("document.getElementById('search-query').style.width = '31em'")
    page.get_by_label("Search query").fill("AFL Grand Final 2022")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#page-title")).to_have_text("Search results for: AFL Grand Final 2022")
    page.get_by_role("button", name="Scroll down").click()
    page.wait_for_load_state("networkidle")
    assert failures == []
