"""The browsing page in Chromium: it names the corpus searched, highlights what Find matched, reads out what
each action changed in a polite live region, and shows the active time, ticking while the page is in use."""

import re
from datetime import datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from annotation.demonstrations.batches import create_demonstration_batch
from annotation.models import Episode, Question
from annotation.questions.service import import_questions
from tests.conftest import make_user
from tests.e2e.test_demonstration import SELECT_SENTENCE, search_and_open, sign_in_and_start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAGE_TITLE = "2022 AFL Grand Final (en.wikipedia.org)"


@pytest.fixture
def afl_batch(freshwiki, django_user_model):
    """The demo's essentials, without the rest of load_demo: the FreshWiki corpus, a demonstrator, and a
    batch with one question answered with that corpus."""
    user = make_user(django_user_model, "demonstrator", "demonstrator")
    user.set_password("demonstrator")
    user.save()
    import_questions(
        b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="afl.jsonl", dataset="afl"
    )
    return create_demonstration_batch(None, "AFL", Question.objects.all(), corpus="freshwiki")


def live(page: Page):
    return page.locator("#live-status")


def test_the_page_names_its_corpus_and_reads_out_every_action(afl_batch, page):
    sign_in_and_start(page)
    expect(page.locator("#corpus-line")).to_have_text("Searching freshwiki: 100 pages")
    expect(live(page)).to_have_attribute("aria-live", "polite")

    page.get_by_label("Search query").fill("AFL Grand Final 2022")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#page-title")).to_have_text("Search results for: AFL Grand Final 2022")
    expect(live(page)).to_have_text(re.compile(r"^\d+ results for 'AFL Grand Final 2022'\.$"))
    said = int(live(page).inner_text().split()[0])
    assert said >= page.locator("#page-text a").count() > 1  # every result, not only those in view
    # A result's snippet does not start by repeating its title.
    first_snippet = page.locator("#page-text .line").nth(1)
    expect(first_snippet).not_to_have_text(re.compile(r"^2022 AFL Grand Final"))

    page.get_by_role("link", name="2022 AFL Grand Final", exact=True).click()
    expect(live(page)).to_have_text(re.compile(rf"^{re.escape(PAGE_TITLE)}, page 1 of \d+\.$"))

    page.get_by_label("Find text").fill("margin of 81 points")
    page.get_by_role("button", name="Find in page").click()
    expect(page.locator("#page-text mark")).to_have_text(["margin of 81 points"])
    expect(live(page)).to_have_text(
        re.compile(rf"^Found 'margin of 81 points': {re.escape(PAGE_TITLE)}, page")
    )

    page.get_by_label("Find text").fill("zebra crossing")
    page.get_by_role("button", name="Find in page").click()
    expect(live(page)).to_have_text("No match for 'zebra crossing'.")
    expect(page.locator("#page-text mark")).to_have_count(0)

    assert page.evaluate(SELECT_SENTENCE, "was won by Geelong")
    page.get_by_role("button", name="Quote").click()
    expect(page.locator(".quotes blockquote")).to_have_text("was won by Geelong")
    expect(live(page)).to_have_text("Quote 1 added.")


def test_the_find_highlight_is_for_people_only_and_quoting_across_it_works(afl_batch, page):
    sign_in_and_start(page)
    search_and_open(page)
    page.get_by_label("Find text").fill("MARGIN of 81")
    page.get_by_role("button", name="Find in page").click()
    expect(page.locator("#page-text mark")).to_have_text(["margin of 81"])  # the page's own spelling
    assert page.evaluate(SELECT_SENTENCE, "won by Geelong by a margin of 81 points")
    page.get_by_role("button", name="Quote").click()
    expect(page.locator(".quotes blockquote")).to_have_text("won by Geelong by a margin of 81 points")
    # What the model saw after the Find (recorded with the Quote): the same window, nothing marked.
    after_find = Episode.objects.get().actions.get(command__startswith="Quote: ").observation_before
    assert "by a margin of 81 points" in after_find and "<mark" not in after_find


# Selects from the start of the Find highlight to the end of ``last`` (words on a later line) and presses
# Quote in the same task, before the browser reports the new selection (its selectionchange is queued).
SELECT_FROM_THE_HIGHLIGHT_AND_QUOTE = """(last) => {
  const walker = document.createTreeWalker(document.getElementById("page-text"), NodeFilter.SHOW_TEXT);
  let end = null;
  while (walker.nextNode()) { if (walker.currentNode.data.includes(last)) { end = walker.currentNode; } }
  const range = document.createRange();
  range.setStart(document.querySelector("#page-text mark").firstChild, 0);
  range.setEnd(end, end.data.indexOf(last) + last.length);
  window.getSelection().removeAllRanges();
  window.getSelection().addRange(range);
  document.getElementById("quote-button").click();
}"""


def test_a_selection_that_starts_on_the_highlight_is_quoted_whole(afl_batch, page):
    sign_in_and_start(page)
    search_and_open(page)
    page.get_by_label("Find text").fill("margin of")
    page.get_by_role("button", name="Find in page").click()
    highlight = page.locator("#page-text mark")
    expect(highlight).to_have_text(["margin of"])
    box = highlight.bounding_box()
    page.mouse.dblclick(box["x"] + 3, box["y"] + box["height"] / 2)  # the highlighted word, selected first
    page.evaluate(SELECT_FROM_THE_HIGHLIGHT_AND_QUOTE, "tenth VFL/AFL premiership.")
    expect(page.locator(".quotes blockquote")).to_have_text(
        "margin of 81 points, marking the club's tenth VFL/AFL premiership."
    )


def test_a_change_in_another_tab_is_read_out(afl_batch, page):
    sign_in_and_start(page)
    search_and_open(page)
    other = page.context.new_page()
    other.goto(page.url)
    other.get_by_role("button", name="Scroll down").click()
    expect(other.locator(".scrollbar")).to_contain_text("Scrollbar: 20 - 39")
    page.get_by_role("button", name="Scroll down").click()  # this tab's version is behind: refused
    expect(live(page)).to_have_text(
        "This episode changed in another tab or window: here is its current state."
    )
    expect(page.locator(".scrollbar")).to_contain_text("Scrollbar: 20 - 39")


def test_active_time_starts_from_the_servers_count_and_ticks_while_in_use(afl_batch, page):
    # The page's clock is Playwright's, and stands still from the reload on: the page shows the server's
    # count however long it takes to load, and ticks only as far as the test lets time pass.
    page.clock.install()
    sign_in_and_start(page)
    Episode.objects.update(active_seconds=252)
    page.clock.pause_at(datetime.now() + timedelta(days=1))
    page.reload()
    clock = page.locator("#active-time")
    expect(clock).to_have_text("4:12")  # the server's count
    page.mouse.move(10, 10)
    page.clock.run_for(3000)
    expect(clock).to_have_text("4:15")  # it moves on from the server's 4:12, a second a second


def test_a_quote_is_removed_by_its_button_or_the_keyboard_and_read_out(afl_batch, page):
    sign_in_and_start(page)
    search_and_open(page)
    for sentence in ("was won by Geelong", "margin of 81 points"):
        assert page.evaluate(SELECT_SENTENCE, sentence)
        page.get_by_role("button", name="Quote", exact=True).click()
        expect(live(page)).to_have_text(re.compile(r"^Quote \d added\.$"))
    expect(page.locator(".quotes blockquote")).to_have_count(2)
    budget = int(page.locator("#quote-budget").inner_text().split()[0])

    page.get_by_role("button", name="Remove quote 1").click()
    expect(live(page)).to_have_text("Quote 1 removed.")
    expect(page.locator(".quotes blockquote")).to_have_text(["margin of 81 points"])
    expect(page.locator("#quote-budget")).to_have_text(f"{budget + len('was won by Geelong')} characters")
    # Focus stays where it was: on the button now named "Remove quote 1", so Enter removes the next.
    expect(page.locator("#remove-quote-1")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".quotes blockquote")).to_have_count(0)
    expect(live(page)).to_have_text("Quote 1 removed.")
    assert Episode.objects.get().state["quotes"] == []


def test_the_find_box_keeps_its_text_and_enter_again_finds_the_next_match(afl_batch, page):
    sign_in_and_start(page)
    search_and_open(page)
    box = page.get_by_label("Find text")
    box.fill("Geelong")
    box.press("Enter")
    expect(live(page)).to_have_text(re.compile(r"^Found 'Geelong'"))
    expect(box).to_have_value("Geelong")
    expect(box).to_be_focused()
    first = Episode.objects.get().state["cursor"]["find_offset"]
    expect(page.locator("#actions-left")).to_have_text("97")
    box.press("Enter")  # the same text again: the next match
    expect(page.locator("#actions-left")).to_have_text("96")
    expect(page.locator("#page-text mark")).to_have_count(1)
    expect(box).to_have_value("Geelong")
    episode = Episode.objects.get()
    assert episode.actions.count() == 4 and episode.state["cursor"]["find_offset"] > first
