"""The keyboard alone, in Chromium: the skip link is the first tab stop and lands in the main content, the
focus ring shows, and on a comparison task (narrow screen: answers as tabs) Tab reaches the answer tabs, the
claim editor and the scales, and arrows, Space and Enter operate them."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from annotation.models import Assignment, FeedbackBatch
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.e2e.test_accessibility import sign_in
from tests.e2e.test_feedback import a_span, only

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
FOCUSED = "(element) => element === document.activeElement"
# A caret (collapsed selection) at a character of an answer: where caret browsing (F7) puts it, the focus
# taken off the control that had it (arrows would operate that control instead).
CARET_AT = """([slot, offset]) => {
  document.activeElement.blur();
  const node = document.querySelector(`.answer-text[data-slot='${slot}']`).firstChild;
  window.getSelection().collapse(node, offset);
}"""


@pytest.fixture(scope="module")
def browser(browser: Browser) -> Browser:
    """A second Chromium, from the session's Playwright (one may run per thread), with caret browsing on
    (what F7 turns on): how a keyboard user selects text to mark as a claim. The `page` fixture (CSP check
    included) opens its pages in this one."""
    args = [*CHROMIUM_ARGS, "--enable-caret-browsing"]
    caret_browser = browser.browser_type.launch(executable_path=CHROMIUM, headless=True, args=args)
    yield caret_browser
    caret_browser.close()


def tab_to(page: Page, target: Locator, limit: int = 120) -> None:
    """Press Tab until ``target`` has the focus; fails if it is not reached in ``limit`` presses."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if target.evaluate(FOCUSED):
            return
    raise AssertionError(f"Tab never reached {target}")


def test_the_skip_link_is_the_first_tab_stop_and_moves_into_the_main_content(demo_site, page):
    sign_in(page, "labeler", "labeler")
    skip = page.get_by_role("link", name="Skip to main content")
    assert skip.bounding_box()["y"] < 0  # out of sight until focused
    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    assert skip.bounding_box()["y"] >= 0
    assert skip.evaluate("(e) => getComputedStyle(e).outlineStyle") == "solid"  # the focus ring
    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()
    page.keyboard.press("Tab")  # past the header's links: the first control of the page itself
    expect(page.get_by_role("button", name="Start next task")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#task-form")).to_be_visible()


def test_a_comparison_task_works_from_the_keyboard(demo_site, page):
    FeedbackBatch.objects.update(required_probability=0.0)
    only("webgpt_comparison")
    page.set_viewport_size({"width": 800, "height": 900})  # narrow: one answer at a time, as tabs
    sign_in(page, "labeler", "labeler")
    page.get_by_role("button", name="Start next task").click()
    expect(page.locator("#task-form")).to_be_visible()
    page.wait_for_load_state("load")

    # The answer tabs: one tab stop, arrows switch the answer shown.
    tab_a = page.locator("#tab-A")
    tab_to(page, tab_a)
    assert tab_a.evaluate("(e) => getComputedStyle(e.nextElementSibling).outlineStyle") == "solid"
    page.keyboard.press("ArrowRight")
    expect(page.locator("#tab-B")).to_be_checked()
    expect(page.locator(".answer-B")).to_be_visible()
    expect(page.locator(".answer-A")).to_be_hidden()
    page.keyboard.press("ArrowLeft")
    expect(page.locator(".answer-A")).to_be_visible()

    # A claim: a span selected with Shift+arrows from a caret, then the editor's controls by Tab.
    text = page.locator(".answer-text[data-slot='A']").get_attribute("data-text")
    start, end = a_span(text)
    page.evaluate(CARET_AT, ["A", start])
    for _ in range(end - start):
        page.keyboard.press("Shift+ArrowRight")
    editor = page.locator(".claim-editor[data-slot='A']")
    expect(editor).to_be_visible()
    expect(editor.locator(".claim-span")).to_have_text(f"“{text[start:end]}”")
    support = editor.get_by_label("Support")
    tab_to(page, support)
    page.keyboard.press("ArrowDown")  # a closed select takes the next option
    expect(support).not_to_have_value("")
    reference = editor.get_by_label("[1]")
    tab_to(page, reference)
    page.keyboard.press("Space")
    expect(reference).to_be_checked()
    add = editor.get_by_role("button", name="Add claim")
    tab_to(page, add)
    page.keyboard.press("Enter")
    expect(editor).to_be_hidden()
    expect(page.locator("[data-claims-list='A'] li q")).to_have_text(text[start:end])
    edit = page.get_by_role("button", name="Edit claim 1 of answer A")
    tab_to(page, edit)
    page.keyboard.press("Enter")
    expect(editor.get_by_role("button", name="Save claim")).to_be_visible()
    tab_to(page, editor.get_by_role("button", name="Save claim"))
    page.keyboard.press("Space")
    expect(editor).to_be_hidden()

    # A scale: Tab reaches its first option, Space chooses it, arrows move the choice.
    overall = page.get_by_role("radiogroup", name="Overall usefulness")
    first = overall.get_by_role("radio").first
    tab_to(page, first)
    page.keyboard.press("Space")
    expect(first).to_be_checked()
    page.keyboard.press("ArrowRight")
    expect(overall.get_by_label("A better")).to_be_checked()

    submit = page.get_by_role("button", name="Submit and next")
    tab_to(page, submit)
    page.keyboard.press("Enter")
    expect(page.locator(".messages")).to_contain_text("Submitted. Thank you!")
    task = Assignment.objects.filter(labeler__username="labeler").earliest("pk")
    assert task.response["ratings"]["overall"] == "a_better"
    [claim] = task.response["answers"]["A"]["claims"]
    assert (claim["start"], claim["end"], claim["quotes"]) == (start, end, [0])
