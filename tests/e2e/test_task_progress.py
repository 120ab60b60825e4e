"""A labeler's progress on a task page in the real browser: the counts are shown, the quiet timer ticks
(mm:ss, hidden from screen readers), and "Hide timer" is remembered on the next page."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.questions.service import import_questions
from tests.conftest import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def task_page(page: Page, django_user_model, midday) -> Page:
    """bob, signed in, on the first of two GopherCite ratings (at midday: the page counts what he
    submitted today)."""
    # The page's clock is Playwright's: the timer's ticks are made by the test, not by waiting for them.
    page.clock.install()
    make_user(django_user_model, "bob", "labeler")
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    rows = [{"question": "Why is the sky blue?", "answer": f"Rayleigh scattering, take {i}."} for i in (1, 2)]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    config = BatchSettings("sky", "rating", "gophercite", required_probability=0.0, always_required=[])
    create_feedback_batch(None, config, [[answer] for answer in answers])
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("bob-pw")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Single-answer rating (GopherCite): 2")).to_be_visible()
    # From here no time passes in the page but what a test lets pass (clock.run_for): the task page opens
    # at the server's 00:00, however long the machine takes to show it.
    page.clock.pause_at(datetime.now() + timedelta(days=1))
    page.get_by_role("button", name="Start next task").click()
    expect(page.locator("#task-form")).to_be_visible()
    # The form shows before the deferred task_timer.js has started its ticking: a tick let pass before then
    # is lost (a clean-clone run met it). By "load" every deferred script has run.
    page.wait_for_load_state("load")
    return page


def test_progress_is_shown_the_timer_ticks_and_hiding_it_is_remembered(task_page: Page):
    page = task_page
    progress = page.locator("[data-progress]")
    expect(progress).to_contain_text("Submitted today: 0")
    expect(progress).to_contain_text("This batch: 0 of 2")
    timer = page.locator("[data-timer]")
    clock = page.locator("[data-task-timer]")
    expect(timer).to_have_attribute("aria-hidden", "true")
    expect(clock).to_have_text("00:00")  # the server's count of a new task
    page.clock.run_for(1000)
    expect(clock).to_have_text("00:01")  # it ticks: a second has passed
    page.clock.run_for(2000)
    expect(clock).to_have_text("00:03")
    page.clock.resume()  # time flows again for the rest of the page's scripts

    page.get_by_role("button", name="Hide timer").click()
    expect(timer).to_be_hidden()
    page.get_by_role("button", name="Submit and next").click()  # straight on to the second rating
    expect(page.locator(".messages")).to_contain_text("Submitted. Thank you!")
    expect(progress).to_contain_text("Submitted today: 1")
    expect(progress).to_contain_text("This batch: 1 of 2")
    expect(timer).to_be_hidden()  # remembered from the last task
    page.get_by_role("button", name="Show timer").click()
    expect(timer).to_be_visible()
    page.reload()
    expect(page.locator("[data-timer]")).to_be_visible()
    expect(page.get_by_role("button", name="Hide timer")).to_be_visible()
