"""A contractor cannot end a question by a slip: End: Nonsense and End: Controversial ask once more first.
And the search box shows the query searched, after the search and after a reload."""

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Episode, EpisodeStatus
from tests.e2e.test_demonstration import search_and_open, sign_in_and_start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def status_of_the_episode() -> str:
    return Episode.objects.human().get().status


def test_one_press_of_end_nonsense_only_asks_and_cancel_keeps_the_question(demo_site, page: Page):
    sign_in_and_start(page)
    page.get_by_role("button", name="End: Nonsense").click()

    confirm = page.get_by_role("button", name="Confirm: End: Nonsense")
    expect(confirm).to_be_focused()
    expect(page.locator("#end-confirm-status")).to_contain_text("to end this question without an answer")
    assert status_of_the_episode() == EpisodeStatus.BROWSING
    assert Episode.objects.human().get().actions.count() == 0  # nothing was sent

    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("button", name="End: Nonsense")).to_be_focused()
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    expect(page.locator("#end-confirm-status")).to_contain_text("Cancelled")
    search_and_open(page)  # the question goes on
    assert status_of_the_episode() == EpisodeStatus.BROWSING


def test_escape_cancels_and_the_confirmed_press_ends_the_question(demo_site, page: Page):
    sign_in_and_start(page)
    page.get_by_role("button", name="End: Controversial").focus()
    page.keyboard.press("Enter")  # the keyboard goes through the same confirmation
    expect(page.get_by_role("button", name="Confirm: End: Controversial")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="End: Controversial")).to_be_focused()
    assert status_of_the_episode() == EpisodeStatus.BROWSING

    page.get_by_role("button", name="End: Controversial").click()
    page.get_by_role("button", name="Confirm: End: Controversial").click()
    expect(page.get_by_label("Note (optional)")).to_be_visible()  # the finished episode's page
    episode = Episode.objects.human().get()
    assert episode.status == EpisodeStatus.FINISHED
    assert list(episode.actions.values_list("command", flat=True)) == ["End: Controversial"]


def test_a_double_click_is_one_press_not_a_confirmation(demo_site, page: Page):
    sign_in_and_start(page)
    page.get_by_role("button", name="End: Nonsense").dblclick()
    expect(page.get_by_role("button", name="Confirm: End: Nonsense")).to_be_visible()
    page.wait_for_timeout(700)  # past the confirmation delay: a late second request would have landed
    assert status_of_the_episode() == EpisodeStatus.BROWSING
    page.get_by_role("button", name="Confirm: End: Nonsense").click()
    expect(page.get_by_label("Note (optional)")).to_be_visible()  # the finished episode's page
    assert status_of_the_episode() == EpisodeStatus.FINISHED


def test_the_search_box_holds_the_last_query_after_a_search_and_a_reload(demo_site, page: Page):
    sign_in_and_start(page)
    search_and_open(page)  # searches "AFL Grand Final 2022", then opens a result
    expect(page.get_by_label("Search query")).to_have_value("AFL Grand Final 2022")
    page.reload()
    expect(page.get_by_label("Search query")).to_have_value("AFL Grand Final 2022")
