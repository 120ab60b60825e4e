"""A step review and a step preference in the real browser (issue 38): the review page shows one step at a
time, n moves on, a digit rates the focused step, a bad rating asks why and marks the first bad step, the
response is stored; a preference is chosen with a digit; axe-core finds nothing serious on either page."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from annotation.feedback.batches import BatchSettings, create_batch_from_source
from annotation.feedback.step_batches import create_step_items
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Question,
)
from annotation.questions.service import import_questions
from tests.conftest import make_user
from tests.e2e.axe import describe, run_axe
from tests.test_step_review import COMMANDS, demonstrate, model_episode

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def review_page(page: Page, freshwiki, django_user_model) -> Page:
    dana = make_user(django_user_model, "dana", "demonstrator")
    make_user(django_user_model, "bob", "labeler")
    demonstrate(dana, "Who won the 2022 AFL Grand Final?", COMMANDS, "Geelong won.")
    config = BatchSettings("AFL steps", "step_review", required_probability=0.0)
    create_batch_from_source(None, config, "demonstrations")
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("bob-pw")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Start next task").click()
    expect(page.locator("#task-form")).to_be_visible()
    page.wait_for_load_state("load")  # step_review.js (deferred) has shown the first step
    return page


def test_a_labeler_rates_steps_with_the_keyboard_and_the_first_bad_step_follows(review_page: Page):
    page = review_page
    first, second = page.locator("#step-0"), page.locator("#step-1")
    expect(first).to_be_visible()
    expect(second).to_be_hidden()
    expect(page.locator("[data-step-position]")).to_have_text(f"Step 1 of {len(COMMANDS)}")
    assert not run_axe(page), describe(run_axe(page))

    first.get_by_role("radio", name="Good").check()
    page.keyboard.press("n")  # the next step, its choices focused
    expect(second).to_be_visible()
    expect(first).to_be_hidden()
    page.keyboard.press("3")  # bad
    expect(second.get_by_role("radio", name="Bad")).to_be_checked()
    reason = second.get_by_label("Why is it bad?")
    expect(reason).to_be_visible()
    expect(page.get_by_label("First bad step")).to_have_value("1")  # filled in from the ratings
    reason.select_option("wrong_link")
    expect(page.locator("#draft-status")).to_contain_text("Draft saved")
    assert not run_axe(page), describe(run_axe(page))

    page.get_by_role("button", name="Submit and back to the list").click()
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    task = Assignment.objects.get()
    assert task.status == AssignmentStatus.SUBMITTED
    assert task.response["first_bad"] == 1
    assert task.response["steps"]["1"] == {"rating": "bad", "reason": "wrong_link", "note": ""}


def test_a_step_preference_is_judged_with_the_keyboard_and_passes_axe(
    page: Page, freshwiki, django_user_model
):
    make_user(django_user_model, "bob", "labeler")
    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    episode = model_episode(Question.objects.get(), ("Search AFL Grand Final 2022", "Clicked on link 0"))
    state = {"index": 1, "candidates": ["Clicked on link 0", "Back"], "taken": 0}
    config = BatchSettings("clicks", "step_preference", required_probability=0.0)
    create_step_items(None, config, [episode], {"source": "test"}, steps=[state])
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("bob-pw")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Start next task").click()
    expect(page.get_by_text("Two possible next actions")).to_be_visible()
    assert not run_axe(page), describe(run_axe(page))
    page.get_by_role("radio", name="A much better").focus()
    page.keyboard.press("4")  # B better
    expect(page.get_by_role("radio", name="B better")).to_be_checked()
    page.get_by_role("button", name="Submit and back to the list").click()
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()
    assert Assignment.objects.get().response["preference"] == "b_better"
