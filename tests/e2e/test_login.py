"""Each demo user signs in through the real login page and lands on their work."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(
    ("username", "path", "heading"),
    [
        ("demonstrator", "/demonstrations/", "Next question"),
        ("labeler", "/tasks/", "Next task"),
        ("researcher", "/console/", "Researcher console"),
        ("admin", "/console/", "Researcher console"),
    ],
)
def test_demo_user_signs_in_and_lands_on_their_work(demo_site, page, live_server, username, path, heading):
    page.goto("/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(username)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}{path}")
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{live_server.url}/accounts/login/")


def test_a_wrong_password_is_refused_with_a_message(demo_site, page):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("labeler")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("enter a correct username and password")


def test_a_researcher_checks_the_workers_with_htmx(demo_data, page):  # the demo's question sets
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill("researcher")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("rowheader", name="truthfulqa")).to_be_visible()
    page.get_by_role("button", name="Check workers").click()
    # No worker consumes the test broker here: the partial swaps in and shows the three queues waiting.
    for queue in ("default", "exports", "training"):
        expect(page.locator("#worker-status").get_by_role("rowheader", name=queue)).to_be_visible()
    expect(page.locator("#worker-status")).to_contain_text("waiting")


def test_the_queues_page_polls_without_keeping_an_idle_session_alive(demo_site, page, live_server):
    """htmx sends the polling element's X-Poll header (merged with the page's CSRF header), and the
    session's expiry stays where signing in put it while the page polls (issue 23)."""
    from django.contrib.sessions.models import Session

    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("admin")
    page.get_by_role("button", name="Sign in").click()
    page.goto("/console/queues/")
    expiry = Session.objects.get().expire_date
    with page.expect_request(lambda request: request.url.endswith("/console/queues/")) as polled:
        pass  # the page re-fetches itself every 5 s
    assert polled.value.headers.get("x-poll") == "1" and polled.value.headers.get("hx-request") == "true"
    assert polled.value.headers.get("x-csrftoken")  # the body's header is still sent beside it
    page.wait_for_timeout(300)  # the poll's answer has been handled
    assert Session.objects.get().expire_date == expiry
