"""A demonstrator answers a question in the real browser, and a reload in the middle loses nothing."""

import re

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Episode, EpisodeStatus
from tests.e2e.axe import describe, run_axe

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Selects ``sentence`` within one line of the page text, also across the Find highlight's <mark>.
SELECT_SENTENCE = """(sentence) => {
  for (const line of document.querySelectorAll("#page-text .line")) {
    const start = line.textContent.indexOf(sentence);
    if (start < 0) { continue; }
    const nodes = [], walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) { nodes.push(walker.currentNode); }
    const at = (offset) => {
      for (const node of nodes) {
        if (offset <= node.length) { return [node, offset]; }
        offset -= node.length;
      }
    };
    const range = document.createRange();
    range.setStart(...at(start));
    range.setEnd(...at(start + sentence.length));
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    return true;
  }
  return false;
}"""


def sign_in_and_start(page: Page) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("demonstrator")
    page.get_by_label("Password").fill("demonstrator")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Start next question").click()
    expect(page.get_by_label("Search query")).to_be_visible()
    # The form is drawn before the page's deferred script runs: a key pressed in between would skip what the
    # script adds (the ending confirmation, a slow run of the suite showed). "load" comes after it.
    page.wait_for_load_state("load")


def search_and_open(page: Page) -> None:
    page.get_by_label("Search query").fill("AFL Grand Final 2022")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#page-title")).to_have_text("Search results for: AFL Grand Final 2022")
    page.get_by_role("link", name="2022 AFL Grand Final", exact=True).click()
    expect(page.locator("#page-title")).to_have_text("2022 AFL Grand Final (en.wikipedia.org)")


def test_a_demonstrator_browses_quotes_answers_and_everything_is_stored(demo_site, page):
    sign_in_and_start(page)
    search_and_open(page)
    page.get_by_role("button", name="Scroll down").click()
    expect(page.locator(".scrollbar")).to_contain_text("Scrollbar: 20 - 39")
    page.get_by_label("Find text").fill("margin of 81 points")
    page.get_by_role("button", name="Find in page").click()
    expect(page.locator(".scrollbar")).to_contain_text("Scrollbar: 4 - 23")
    assert page.evaluate(SELECT_SENTENCE, "was won by Geelong by a margin of 81 points")
    page.get_by_role("button", name="Quote").click()
    expect(page.locator(".quotes blockquote")).to_have_text("was won by Geelong by a margin of 81 points")
    expect(page.locator("#quote-budget")).to_have_text("1457 characters")
    page.get_by_role("button", name="End: Answer").click()

    expect(page.get_by_text("[1] 2022 AFL Grand Final (en.wikipedia.org)")).to_be_visible()
    page.get_by_label("Answer").fill("Geelong won the 2022 AFL Grand Final by 81 points [1].")
    expect(page.locator("#draft-status")).to_contain_text("Draft saved")
    page.get_by_role("button", name="Submit answer").click()
    expect(page.get_by_role("status")).to_contain_text("Answer submitted")

    episode = Episode.objects.human().get()
    assert episode.status == EpisodeStatus.FINISHED
    assert episode.answer == "Geelong won the 2022 AFL Grand Final by 81 points [1]."
    assert list(episode.actions.values_list("command", flat=True)) == [
        "Search AFL Grand Final 2022",
        "Clicked on link 0",
        "Scrolled down 1",
        "Find in page: margin of 81 points",
        "Quote: was won by Geelong by a margin of 81 points",
        "End: Answer",
    ]
    assert episode.state["quotes"][0]["url"] == "https://en.wikipedia.org/wiki/2022_AFL_Grand_Final"

    # The demonstration replays step by step: what was seen before each action, and its pages.
    page.goto(f"/demonstrations/episodes/{episode.pk}/")
    steps = page.locator(".trajectory > li")
    expect(steps).to_have_count(6)
    find = steps.nth(3)
    expect(find.locator("summary")).to_have_text("Step 4 Find in page: margin of 81 points")
    expect(find.locator("pre").first).not_to_be_visible()  # collapsed until opened
    find.locator("summary").click()
    expect(find.locator("pre").first).to_contain_text("♦Scrollbar: 20 - 39")
    assert run_axe(page) == [], describe(run_axe(page))
    find.get_by_role("link", name="Page before").click()
    expect(page).to_have_url(re.compile(r"/page/\?digest=[0-9a-f]{64}&step=4#line-20$"))
    expect(page.locator("h1")).to_have_text("2022 AFL Grand Final (en.wikipedia.org)")
    expect(page.locator("#line-20")).to_be_in_viewport()
    assert run_axe(page) == [], describe(run_axe(page))
    page.get_by_role("link", name="Back to the trajectory, step 4").click()
    expect(page.locator("h2#trajectory")).to_be_visible()


def test_a_reload_in_the_middle_brings_the_page_back_and_work_continues(demo_site, page):
    sign_in_and_start(page)
    search_and_open(page)
    page.keyboard.press("j")  # the scroll-down shortcut
    expect(page.locator(".scrollbar")).to_contain_text("Scrollbar: 20 - 39")
    page.reload()
    expect(page.locator("#page-title")).to_have_text("2022 AFL Grand Final (en.wikipedia.org)")
    expect(page.locator(".scrollbar")).to_contain_text("Scrollbar: 20 - 39")
    expect(page.locator("#actions-left")).to_have_text("97")
    page.keyboard.press("b")  # back to the results
    expect(page.locator("#page-title")).to_have_text("Search results for: AFL Grand Final 2022")
    assert Episode.objects.human().get().actions.count() == 4
