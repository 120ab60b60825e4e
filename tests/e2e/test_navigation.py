"""The header fits a 1280 px screen on one line for the person with the most links (a staff researcher)."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_admins_header_is_one_line_at_1280_px(demo_site, page):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("admin")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Researcher console")
    header = page.get_by_role("banner").bounding_box()
    brand = page.get_by_role("link", name="WebGPT feedback").bounding_box()
    links = page.get_by_role("banner").get_by_role("link").all()
    assert len(links) >= 13  # brand, ten console pages, admin, API token
    tops = {round(link.bounding_box()["y"]) for link in links}
    assert len(tops) == 1, tops  # every link on the first line
    assert header["height"] < 3 * brand["height"]
