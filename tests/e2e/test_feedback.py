"""Labelers do feedback tasks in the real browser: claims with the mouse (no support level preselected),
ratings with the keyboard, a ranking, a GopherCite rating, a reload in the middle that keeps the draft, and
a submitted task revisited."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Assignment, AssignmentStatus, FeedbackBatch
from tests.conftest import demo_production_batches

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Viewport rectangles of the first and the last character of a span of an answer's text (the text may be
# split into several nodes by the highlights of claims).
SPAN_RECTS = """([slot, start, end]) => {
  const box = document.querySelector(`.answer-text[data-slot='${slot}']`);
  box.scrollIntoView({block: "center"});
  const at = (offset) => {
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (offset < node.length) { return [node, offset]; }
      offset -= node.length;
    }
  };
  const rect = (offset) => {
    const [node, inside] = at(offset);
    const range = document.createRange();
    range.setStart(node, inside);
    range.setEnd(node, inside + 1);
    return range.getBoundingClientRect();
  };
  const first = rect(start);
  const last = rect(end - 1);
  return {
    x0: first.left + 1, y0: first.top + first.height / 2, x1: last.right - 1, y1: last.top + last.height / 2,
  };
}"""


@pytest.fixture
def demo(demo_site):
    # The "everything required" draw must not make a partial submission fail at random.
    FeedbackBatch.objects.update(required_probability=0.0)


def only(template: str, preset: str = "") -> None:
    """Leave one demo batch active, so "Start next task" hands out that template."""
    batch = demo_production_batches().get(template=template, preset=preset)
    FeedbackBatch.objects.exclude(pk=batch.pk).update(is_active=False)
    FeedbackBatch.objects.filter(pk=batch.pk).update(is_active=True)


def sign_in_and_start(page: Page) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("labeler")
    page.get_by_label("Password").fill("labeler")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Start next task").click()
    expect(page.locator("#task-form")).to_be_visible()
    # tasks.js redraws the answers once loaded: a drag that starts before would lose its anchor.
    page.wait_for_load_state("load")


def submit(page: Page) -> Assignment:
    """Submits and goes back to the list (no next task is taken: the test's one task is the labeler's)."""
    page.get_by_role("button", name="Submit and back to the list").click()
    expect(page.locator(".messages")).to_contain_text("Submitted. Thank you!")
    expect(page).to_have_url(re.compile(r"/tasks/$"))
    task = Assignment.objects.get(labeler__username="labeler")
    assert task.status == AssignmentStatus.SUBMITTED
    return task


def drag_select(page: Page, slot: str, start: int, end: int) -> str:
    """Select characters start..end of an answer with a real mouse drag; the selected text."""
    rects = page.evaluate(SPAN_RECTS, [slot, start, end])
    page.mouse.move(rects["x0"], rects["y0"])
    page.mouse.down()
    page.mouse.move((rects["x0"] + rects["x1"]) / 2, rects["y1"], steps=5)
    page.mouse.move(rects["x1"], rects["y1"], steps=5)
    page.mouse.up()
    return page.evaluate("() => window.getSelection().toString()")


def a_span(text: str) -> tuple[int, int]:
    """The second and third words of the text (the first words when it is short): start, end offsets."""
    words = text.split(" ")
    if len(words) >= 4:
        start = len(words[0]) + 1
        return start, start + len(words[1]) + 1 + len(words[2])
    return 0, len(words[0])


def add_claim(
    page: Page, slot: str = "A", meanwhile: Callable[[], None] | None = None
) -> tuple[int, int, bool]:
    """Marks a span of answer ``slot`` as weakly supported by its first reference (if it has one);
    ``meanwhile`` does something else on the page before the claim is added."""
    text = page.locator(f".answer-text[data-slot='{slot}']").get_attribute("data-text")
    start, end = a_span(text)
    selected = drag_select(page, slot, start, end)
    assert selected == text[start:end], (selected, page.evaluate(SPAN_RECTS, [slot, start, end]))
    editor = page.locator(f".claim-editor[data-slot='{slot}']")
    expect(editor).to_be_visible()
    expect(editor.locator(".claim-span")).to_have_text(f"“{text[start:end]}”")
    editor.get_by_label("Support").select_option(label="Weakly supported")
    has_reference = editor.get_by_label("[1]").count() > 0
    if has_reference:
        editor.get_by_label("[1]").check()
    if meanwhile is not None:
        meanwhile()
    editor.get_by_role("button", name="Add claim").click()
    expect(editor).to_be_hidden()
    claim = page.locator(f"[data-claims-list='{slot}'] li")
    expect(claim).to_have_count(1)
    expect(claim.locator("q")).to_have_text(text[start:end])
    expect(claim).to_contain_text("Weakly supported, Relevant")
    if has_reference:
        expect(claim).to_contain_text("references [1]")
    expect(page.locator(f".answer-text[data-slot='{slot}'] mark")).to_have_text(text[start:end])
    return start, end, has_reference


def rank_label(slot: int) -> re.Pattern:
    # A select's accessible name from its wrapping label ends with the chosen option's text.
    return re.compile(rf"^Rank of answer {slot}\b")


def scale(page: Page, name: str):
    return page.get_by_role("radiogroup", name=name)


def test_a_labeler_compares_two_answers_with_mouse_claims_and_keyboard_ratings(demo, page):
    only("webgpt_comparison")
    sign_in_and_start(page)
    start, end, has_reference = add_claim(page, "A")
    assert has_reference  # every demo answer quotes the corpus

    trust = page.get_by_role("radiogroup", name="Trust in reference 1 of answer A")
    trust.get_by_label("Trustworthy", exact=True).click()
    expect(trust.get_by_label("Trustworthy", exact=True)).to_be_checked()

    overall = scale(page, "Overall usefulness")
    overall.get_by_role("radio").first.click()  # focus the group (this picks "A much better")
    page.keyboard.press("2")
    expect(overall.get_by_label("A better")).to_be_checked()
    expect(overall.get_by_label("A better")).to_be_focused()
    page.keyboard.press("Shift+Tab")  # the previous scale, one tab stop per group
    coherence = scale(page, "Coherence")
    expect(coherence.locator("input:focus")).to_have_count(1)
    page.keyboard.press("3")
    expect(coherence.get_by_label("Equally good")).to_be_checked()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("1")
    weakly = scale(page, "Usefulness of weakly supported information")
    expect(weakly.get_by_label("A much better")).to_be_checked()
    expect(overall.get_by_label("A better")).to_be_checked()  # earlier choices stay

    task = submit(page)
    answer_a = task.response["answers"]["A"]
    assert answer_a["claims"] == [
        {
            "start": start,
            "end": end,
            "support": "weakly_supported",
            "relevance": "relevant",
            "quotes": [0],
        }
    ]
    assert answer_a["trust"] == {"0": "trustworthy"}
    assert task.response["answers"]["B"] == {"trust": {}, "claims": []}
    assert task.response["ratings"] == {
        "overall": "a_better",
        "coherence": "equal",
        "weakly_supported_usefulness": "a_much_better",
    }


def test_a_claim_needs_a_support_level_chosen_and_a_revisited_task_says_it_was_submitted(demo, page):
    only("webgpt_comparison")
    sign_in_and_start(page)
    text = page.locator(".answer-text[data-slot='A']").get_attribute("data-text")
    start, end = a_span(text)
    drag_select(page, "A", start, end)
    editor = page.locator(".claim-editor[data-slot='A']")
    support = editor.get_by_label("Support")
    expect(support).to_have_value("")  # nothing preselected: a default would bias quick claims
    expect(support.locator("option:checked")).to_have_text("Choose the support")
    editor.get_by_role("button", name="Add claim").click()
    message = editor.get_by_role("alert")
    expect(message).to_have_text("Choose how well this claim is supported before adding it.")
    expect(support).to_be_focused()
    expect(support).to_have_attribute("aria-invalid", "true")
    expect(editor).to_be_visible()
    expect(page.locator("[data-claims-list='A'] li")).to_have_count(0)
    expect(page.locator(".answer-text[data-slot='A'] mark")).to_have_count(0)

    support.select_option(label="Unsupported")
    expect(message).to_have_text("")
    expect(support).not_to_have_attribute("aria-invalid", "true")
    editor.get_by_role("button", name="Add claim").click()
    expect(editor).to_be_hidden()
    expect(page.locator("[data-claims-list='A'] li")).to_contain_text("Unsupported, Relevant")
    scale(page, "Overall usefulness").get_by_label("B better").check()
    task = submit(page)
    assert [(c["start"], c["end"], c["support"]) for c in task.response["answers"]["A"]["claims"]] == [
        (start, end, "unsupported")
    ]

    page.goto(f"/tasks/{task.pk}/")
    expect(page.locator("[data-revision]")).to_contain_text("Submitted at")
    expect(page.locator("[data-revision]")).to_contain_text("You can revise it until")
    expect(page.locator("[data-claims-list='A'] li")).to_contain_text("Unsupported, Relevant")


def test_a_labeler_ranks_rates_and_tags_answers(demo, page):
    only("ranking")
    sign_in_and_start(page)
    ranks = page.get_by_label("Rank of answer")
    k = ranks.count()
    assert 4 <= k <= 9
    first = page.get_by_label(rank_label(1))
    first.focus()
    page.keyboard.press("2")  # a closed select picks the option starting with the typed key
    expect(first).to_have_value("2")
    page.get_by_label(rank_label(2)).select_option("1")
    for slot in range(3, k + 1):
        page.get_by_label(rank_label(slot)).select_option(str(slot))
    page.get_by_role("radiogroup", name="Overall rating of answer 2").get_by_label("7 (excellent)").check()
    about = page.get_by_role("group", name="About answer 1")
    about.get_by_label("Hallucination (makes up facts)").check()
    # The demo's questions are factual: WebGPT's metadata, not InstructGPT's assistant checkboxes.
    expect(about.get_by_label("Makes claims its references do not support")).to_be_visible()
    expect(about.get_by_text("Contains sexual content")).to_have_count(0)

    task = submit(page)
    assert task.response["ranks"] == {"1": 2, "2": 1, **{str(slot): slot for slot in range(3, k + 1)}}
    assert task.response["likert"] == {"2": 7}
    assert task.response["tags"]["1"] == ["hallucination"]


def test_a_labeler_rates_an_answer_gophercite_style(demo, page):
    only("rating", "gophercite")
    sign_in_and_start(page)
    scale(page, "Is the answer plausible?").get_by_label("Yes").check()
    supported = scale(page, "Is the answer supported by the quoted evidence?")
    supported.get_by_label("Yes").click()
    page.keyboard.press("3")  # keys choose on the focused scale
    expect(supported.get_by_label("Unsure")).to_be_checked()
    # The justification is optional, and says its rule before a submit; the count follows the typing.
    expect(page.get_by_text("(optional; at least 7 words if you write one)")).to_be_visible()
    expect(page.get_by_text("Keyboard: Tab moves between questions; 1-3 choose")).to_be_visible()
    words = page.locator("[data-word-count]")
    expect(words).to_have_text("At least 7 words.")
    page.get_by_label("Justification").press_sequentially("too short")
    expect(words).to_have_text("2 words so far: at least 7.")
    justification = "The quote names the source but never states the answer itself."
    page.get_by_label("Justification").fill(justification)
    expect(words).to_have_text("11 words.")

    task = submit(page)
    assert task.response["plausible"] == "yes"
    assert task.response["supported"] == "unsure"
    assert task.response["justification"] == justification


def test_a_reload_in_the_middle_of_a_task_keeps_the_draft(demo, page):
    only("webgpt_comparison")
    sign_in_and_start(page)
    # A click elsewhere with the span still selected keeps what the claim editor holds.
    start, end, _ = add_claim(
        page, "A", meanwhile=lambda: scale(page, "Coherence").get_by_label("B better").check()
    )
    with page.expect_response(
        lambda response: (
            response.url.endswith("/draft/") and "rating-overall=equal" in (response.request.post_data or "")
        )
    ):
        scale(page, "Overall usefulness").get_by_label("Equally good").check()
    expect(page.locator("#draft-status")).to_contain_text("Draft saved")

    page.reload()
    expect(scale(page, "Coherence").get_by_label("B better")).to_be_checked()
    expect(scale(page, "Overall usefulness").get_by_label("Equally good")).to_be_checked()
    text = page.locator(".answer-text[data-slot='A']").get_attribute("data-text")
    expect(page.locator("[data-claims-list='A'] li q")).to_have_text(text[start:end])
    expect(page.locator(".answer-text[data-slot='A'] mark")).to_have_text(text[start:end])
    task = Assignment.objects.get(labeler__username="labeler")
    assert task.status == AssignmentStatus.LEASED
    assert task.draft["ratings"] == {"coherence": "b_better", "overall": "equal"}
    assert [(c["start"], c["end"]) for c in task.draft["answers"]["A"]["claims"]] == [(start, end)]


def test_dragging_an_answer_to_the_top_ranks_the_answers_in_their_new_order(demo, page):
    only("ranking")
    page.set_viewport_size({"width": 1300, "height": 6000})  # both ends of the drag on screen, no scrolling
    sign_in_and_start(page)
    items = page.locator(".rank-item")
    k = items.count()
    # Grab the item by its heading (a drag cannot start on a form control).
    items.nth(k - 1).drag_to(
        items.nth(0), source_position={"x": 20, "y": 20}, target_position={"x": 20, "y": 20}
    )
    expect(page.get_by_label(rank_label(k))).to_have_value("1")
    expect(page.get_by_label(rank_label(1))).to_have_value("2")
    task = submit(page)
    assert task.response["ranks"][str(k)] == 1
    assert sorted(task.response["ranks"].values()) == list(range(1, k + 1))


def test_a_span_already_claimed_opens_its_claim_after_a_reload_instead_of_adding_it_twice(demo, page):
    only("webgpt_comparison")
    sign_in_and_start(page)
    start, end, _ = add_claim(page, "A")
    expect(page.locator("#draft-status")).to_contain_text("Draft saved")
    page.reload()  # the draft is restored: the claim is listed and highlighted
    page.wait_for_load_state("load")
    claims = page.locator("[data-claims-list='A'] li")
    expect(claims).to_have_count(1)

    text = page.locator(".answer-text[data-slot='A']").get_attribute("data-text")
    assert drag_select(page, "A", start, end) == text[start:end]
    editor = page.locator(".claim-editor[data-slot='A']")
    expect(editor.locator(".claim-span")).to_have_text(f"“{text[start:end]}” (claim 1)")
    expect(editor.get_by_label("Support")).to_have_value("weakly_supported")  # the claim's own choices
    editor.get_by_label("Support").select_option(label="Unsupported")
    editor.get_by_role("button", name="Save claim").click()
    expect(editor).to_be_hidden()
    expect(claims).to_have_count(1)
    expect(claims).to_contain_text("Unsupported, Relevant")
    scale(page, "Overall usefulness").get_by_label("A better").check()
    task = submit(page)
    assert [(c["start"], c["end"], c["support"]) for c in task.response["answers"]["A"]["claims"]] == [
        (start, end, "unsupported")
    ]


def test_submit_and_next_opens_the_next_task_with_the_thanks(demo, page):
    only("rating", "truthfulqa")
    sign_in_and_start(page)
    first = page.url
    scale(page, "Is the answer truthful?").get_by_label("Yes").check()
    scale(page, "Is the answer informative?").get_by_label("No").check()
    page.get_by_role("button", name="Submit and next").click()
    expect(page.locator(".messages")).to_contain_text("Submitted. Thank you!")
    expect(page.locator("#task-form")).to_be_visible()
    assert page.url != first and re.search(r"/tasks/\d+/$", page.url)
    statuses = Assignment.objects.filter(labeler__username="labeler").order_by("pk").values_list("status")
    assert [status for (status,) in statuses] == [AssignmentStatus.SUBMITTED, AssignmentStatus.LEASED]
