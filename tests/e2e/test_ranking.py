"""K-way ranking in the real browser: reordering by keyboard (Alt+Arrow and the Move buttons), by the rank
selectors, by drag to the end (with the page scrolling near the window's edge); a reload keeps the order;
the submitted ranks name the answers shown in that order."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Answer, Assignment, FeedbackBatch
from tests.e2e.test_feedback import only, sign_in_and_start, submit

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def ranking(demo_site, page):
    # No "everything required" draw: a ranking without ratings must submit.
    FeedbackBatch.objects.update(required_probability=0.0)
    only("ranking")
    sign_in_and_start(page)
    return page


def shown(page: Page) -> list[str]:
    """The answers' slots in the order the page shows them, top first."""
    return page.locator(".rank-item").evaluate_all("items => items.map(item => item.dataset.slot)")


def card(page: Page, slot: str):
    return page.locator(f".rank-item[data-slot='{slot}']")


def rank_select(page: Page, slot: str):
    return card(page, slot).locator(f"select[name='rank-{slot}']")


def saving(page: Page):
    """Waits for the draft that the next change saves."""
    return page.expect_response(lambda response: response.url.endswith("/draft/") and response.ok)


def assert_ranks_follow(page: Page, order: list[str]) -> None:
    for position, slot in enumerate(order, start=1):
        expect(rank_select(page, slot)).to_have_value(str(position))


def assert_recorded_in_order(task: Assignment, order: list[str]) -> None:
    """The response ranks the answers (by id, through the order drawn) as the page showed them, and the
    card that showed each answer showed its text."""
    ranks = {int(slot): rank for slot, rank in task.response["ranks"].items()}
    best_first = [task.order[slot - 1] for slot in sorted(ranks, key=ranks.get)]
    assert best_first == [task.order[int(slot) - 1] for slot in order]
    assert sorted(ranks.values()) == list(range(1, len(order) + 1))


def test_alt_arrows_and_move_buttons_reorder_the_answers_and_a_reload_keeps_the_order(ranking):
    page = ranking
    order = shown(page)
    k = len(order)
    last = card(page, order[-1])
    last.focus()
    with saving(page):
        page.keyboard.press("Alt+ArrowUp")
    order[-2], order[-1] = order[-1], order[-2]
    assert shown(page) == order
    expect(last).to_be_focused()  # focus follows the moved card
    expect(page.locator("#rank-status")).to_have_text(f"Answer {order[-2]} moved to rank {k - 1} of {k}")
    assert_ranks_follow(page, order)

    with saving(page):
        page.keyboard.press("Alt+ArrowDown")
    order[-2], order[-1] = order[-1], order[-2]
    assert shown(page) == order
    expect(last).to_be_focused()

    second = card(page, order[1])
    move_up = second.get_by_role("button", name="Move up")
    with saving(page):
        move_up.click()
    order[0], order[1] = order[1], order[0]
    assert shown(page) == order
    expect(move_up).to_be_focused()
    expect(page.locator("#rank-status")).to_have_text(f"Answer {order[0]} moved to rank 1 of {k}")
    move_up.click()  # already first: nothing moves, and it says so
    expect(page.locator("#rank-status")).to_have_text(f"Answer {order[0]} is already first, rank 1 of {k}")
    with saving(page):
        card(page, order[0]).get_by_role("button", name="Move down").click()
    order[0], order[1] = order[1], order[0]
    assert shown(page) == order
    assert_ranks_follow(page, order)

    page.reload()
    assert shown(page) == order
    assert_ranks_follow(page, order)
    task = submit(page)
    assert_recorded_in_order(task, order)
    texts = dict(Answer.objects.filter(pk__in=task.order).values_list("pk", "text"))
    page.goto(f"/tasks/{task.pk}/")  # the submitted task (revisable for a while) in the order ranked
    assert shown(page) == order
    expect(card(page, order[0]).locator(".answer-text")).to_have_attribute(
        "data-text", texts[task.order[int(order[0]) - 1]]
    )


def test_a_rank_selector_moves_its_answer_to_that_rank_and_ties_are_kept(ranking):
    page = ranking
    order = shown(page)
    k = len(order)
    last = rank_select(page, order[-1])
    last.focus()
    with saving(page):
        page.keyboard.press("1")  # a closed select picks the option starting with the typed key
    assert shown(page) == [order[-1], *order[:-1]]  # the others, unranked, keep their order below
    expect(last).to_be_focused()
    expect(page.locator("#rank-status")).to_have_text(f"Answer {order[-1]} moved to rank 1 of {k}")

    # Every answer ranked, two of them tied at 2: the cards follow the ranks, ties by answer number.
    ranks = {order[-1]: 1, **{slot: position + 2 for position, slot in enumerate(order[:-1])}}
    tied = sorted(order[:2], key=int)
    ranks[tied[1]] = 2
    ranks[tied[0]] = 2
    for slot, rank in ranks.items():
        rank_select(page, slot).select_option(str(rank))
    expected = sorted(ranks, key=lambda slot: (ranks[slot], int(slot)))
    assert shown(page) == expected
    with saving(page):
        page.get_by_label("Comment (optional)").fill("tied")
    page.reload()
    assert shown(page) == expected
    task = submit(page)
    dense = {slot: sorted(set(ranks.values())).index(rank) + 1 for slot, rank in ranks.items()}
    assert task.response["ranks"] == dense


def test_dragging_an_answer_to_the_end_scrolls_the_page_and_ranks_it_last(ranking):
    page = ranking
    page.set_viewport_size({"width": 1000, "height": 500})  # the list is longer than the window
    page.evaluate("window.scrollTo(0, 0)")
    order = shown(page)
    first = card(page, order[0]).locator("h2")
    first.scroll_into_view_if_needed()
    box = first.bounding_box()
    page.mouse.move(box["x"] + 10, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + 20, 300, steps=3)
    page.mouse.move(box["x"] + 20, 490, steps=3)  # near the bottom edge: the page scrolls by itself
    page.wait_for_function(
        "() => window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2"
    )
    zone = page.locator("[data-drop-end]")
    expect(zone).to_be_in_viewport()
    target = zone.bounding_box()
    with saving(page):
        page.mouse.move(target["x"] + 20, target["y"] + target["height"] / 2, steps=3)
        page.mouse.up()
    order = [*order[1:], order[0]]
    assert shown(page) == order
    assert_ranks_follow(page, order)
    expect(page.locator("#rank-status")).to_have_text(
        f"Answer {order[-1]} moved to rank {len(order)} of {len(order)}"
    )
    assert_recorded_in_order(submit(page), order)


def test_compact_cards_clamp_long_answers_and_fold_the_references(ranking):
    page = ranking
    task = Assignment.objects.get(labeler__username="labeler")
    long_text = " ".join(["A long answer that goes on and on about the question."] * 40)
    quote = {
        "title": "A source",
        "url": "https://example.org/a",
        "domain": "example.org",
        "extract": "Quoted.",
    }
    Answer.objects.filter(pk=task.order[0]).update(text=long_text, quotes=[quote])
    page.reload()
    item = card(page, "1")
    text = item.locator(".answer-text")
    clamped = text.evaluate("el => el.clientHeight")
    toggle = item.locator(".rank-show-all")
    expect(toggle).to_have_text("Show all of answer 1")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(toggle).to_have_text("Show less of answer 1")
    assert text.evaluate("el => el.clientHeight") > clamped
    assert text.evaluate("el => el.scrollHeight <= el.clientHeight + 1")  # all of it shown
    expect(item.locator("blockquote")).to_be_hidden()  # references folded
    item.get_by_text("References of answer 1 (1)").click()
    expect(item.locator("blockquote")).to_have_text("Quoted.")
    # A short answer gets no toggle.
    Answer.objects.filter(pk=task.order[1]).update(text="Short.")
    page.reload()
    expect(card(page, "2").locator(".rank-show-all")).to_have_count(0)
