"""No lost work in the real browser: a refused submit comes back as a page of its own (POST-redirect-GET),
so a reload after it shows the newer autosaved draft instead of posting the old answer again."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Assignment, AssignmentStatus, FeedbackBatch
from tests.conftest import demo_production_batches
from tests.e2e.test_feedback import sign_in_and_start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def everything_required(demo_site):
    """Only the minimal comparison is handed out, and every one of its scales is required."""
    batch = demo_production_batches().get(template="minimal_comparison")
    FeedbackBatch.objects.exclude(pk=batch.pk).update(is_active=False)
    FeedbackBatch.objects.filter(pk=batch.pk).update(is_active=True, required_probability=1.0)


def scale(page: Page, name: str):
    return page.get_by_role("radiogroup", name=re.compile(rf"^{name}"))


def test_a_reload_after_a_refused_submit_keeps_the_newer_draft(everything_required, page):
    sign_in_and_start(page)
    task_url = page.url

    scale(page, "Overall usefulness").get_by_label("Equally good").check()
    page.get_by_role("button", name="Submit and back to the list").click()
    expect(page.get_by_role("alert")).to_contain_text("Accuracy")  # refused: the other scales are required
    assert page.url == task_url  # the refusal is shown on the task page, not on the submit URL

    with page.expect_response(lambda response: response.url.endswith("/draft/")):
        scale(page, "Coherence").get_by_label("A better").check()
    expect(page.locator("#draft-status")).to_contain_text("Draft saved")

    page.reload()  # a GET: nothing is posted again
    expect(scale(page, "Coherence").get_by_label("A better")).to_be_checked()
    expect(scale(page, "Overall usefulness").get_by_label("Equally good")).to_be_checked()
    expect(page.get_by_role("alert")).to_have_count(0)
    task = Assignment.objects.get(labeler__username="labeler")
    assert task.status == AssignmentStatus.LEASED
    assert task.draft["ratings"] == {"overall": "equal", "coherence": "a_better"}
