"""Two labeler guards on the task page: a revisited submitted task says when it was submitted and until when
it can be revised (the page and the API), and a claim without a support level is refused (the claim
editor starts with none chosen, and the server refuses a claim that arrives without one)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.feedback.presenter import revision_window
from annotation.models import Answer, Assignment, AssignmentStatus, SourceKind
from annotation.questions.service import import_questions
from core.api_tokens import issue

pytestmark = pytest.mark.django_db

SUBMITTED = datetime(2025, 3, 4, 9, 30, tzinfo=UTC)


def comparison_batch(revision_seconds: int = 3600) -> None:
    """One WebGPT comparison (two answers, one reference each) where only the overall rating is required."""
    report = import_questions(b'{"question": "Why is the sky blue?"}', filename="sky.jsonl")
    question = report.questions.get()
    pair = [
        Answer.objects.create(
            question=question,
            text=text,
            source_kind=SourceKind.MODEL,
            quotes=[{"title": "Sky", "url": "https://e.org/sky", "domain": "e.org", "extract": "blue"}],
        )
        for text in ("Rayleigh scattering makes the sky blue.", "The sky reflects the sea.")
    ]
    config = BatchSettings(
        name="sky",
        template="webgpt_comparison",
        required_probability=0.0,
        revision_seconds=revision_seconds,
    )
    create_feedback_batch(None, config, [pair])


def hidden(html: str) -> dict[str, str]:
    return {
        name: re.search(rf'name="{name}" value="([^"]+)"', html).group(1)
        for name in ("submit_key", "version")
    }


def take_and_submit(client, user) -> Assignment:
    assert client.post(reverse("annotation:task_start")).status_code == 302
    task = Assignment.objects.filter(labeler=user).latest("id")
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    response = client.post(
        reverse("annotation:task_submit", args=[task.pk]), {**hidden(html), "rating-overall": "a_better"}
    )
    assert response.url == reverse("annotation:next_task")
    task.refresh_from_db()
    assert task.status == AssignmentStatus.SUBMITTED
    return task


def submitted_at(task: Assignment, when: datetime) -> Assignment:
    Assignment.objects.filter(pk=task.pk).update(submitted_at=when, first_submitted_at=when)
    task.refresh_from_db()
    return task


def test_the_revision_window_ends_exactly_revision_seconds_after_the_submit(client_for, bob):
    comparison_batch(revision_seconds=5400)
    task = submitted_at(take_and_submit(client_for(bob), bob), SUBMITTED)
    until = datetime(2025, 3, 4, 11, 0, tzinfo=UTC)  # 9:30 + 5400 s
    assert revision_window(task, now=until).revisable_until == until
    assert revision_window(task, now=until).revisable  # inclusive, as assignment.submit
    assert not revision_window(task, now=until + timedelta(seconds=1)).revisable
    assert revision_window(task, now=until).submitted_at == SUBMITTED


def test_a_task_never_submitted_has_no_revision_window(client_for, bob):
    comparison_batch()
    client = client_for(bob)
    client.post(reverse("annotation:task_start"))
    task = Assignment.objects.get(labeler=bob)
    assert revision_window(task) is None
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert "data-revision" not in html and "Read only." not in html


def test_a_revisited_submitted_task_says_until_when_it_can_be_revised(client_for, bob, settings):
    settings.TIME_ZONE = "UTC"
    comparison_batch(revision_seconds=3600)
    client = client_for(bob)
    task = take_and_submit(client, bob)
    soon = (task.submitted_at + timedelta(hours=1)).strftime("%-d %b %Y, %H:%M")
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    notice = re.search(r"<p class=\"notice\" data-revision>(.*?)</p>", html, re.S).group(1)
    text = re.sub(r"<[^>]+>", "", notice)
    assert text == (
        f"Submitted at {task.submitted_at:%-d %b %Y, %H:%M}. You can revise it until {soon}: submitting "
        "again replaces your response (the earlier one is kept)."
    )
    assert f'datetime="{task.submitted_at.isoformat()}"' in notice
    # Still revisable: the form is open and a new submit replaces the response.
    assert 'disabled class="task-fields"' not in html
    again = {**hidden(html), "rating-overall": "b_better"}
    assert client.post(reverse("annotation:task_submit", args=[task.pk]), again).status_code == 302
    task.refresh_from_db()
    assert task.response["ratings"] == {"overall": "b_better"} and task.revisions.count() == 1


def test_past_its_window_a_submitted_task_says_it_can_no_longer_be_revised(client_for, bob, settings):
    settings.TIME_ZONE = "UTC"
    comparison_batch(revision_seconds=600)
    client = client_for(bob)
    task = submitted_at(take_and_submit(client, bob), SUBMITTED)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    notice = re.sub(r"<[^>]+>", "", re.search(r"data-revision>(.*?)</p>", html, re.S).group(1))
    assert notice == (
        "Submitted at 4 Mar 2025, 09:30; it can no longer be revised (that was possible until "
        "4 Mar 2025, 09:40)."
    )
    assert 'disabled class="task-fields"' in html  # the form says what a submit would get: no
    late = {**hidden(html), "rating-overall": "b_better"}
    client.post(reverse("annotation:task_submit", args=[task.pk]), late)
    task.refresh_from_db()
    assert task.response["ratings"] == {"overall": "a_better"} and task.revisions.count() == 0


def test_the_task_api_gives_submitted_at_and_revisable_until(bob):
    comparison_batch(revision_seconds=600)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue(bob)}")
    fresh = client.post("/api/tasks/next").json()
    assert (fresh["submitted_at"], fresh["revisable_until"], fresh["revisable"]) == (None, None, False)
    body = {"response": {"ratings": {"overall": "equal"}}, "key": "6f1c1b9e-3c4b-4f57-9a51-1d1f0c2b7e10"}
    assert client.post(f"/api/tasks/{fresh['id']}/submit", body, format="json").status_code == 200
    task = Assignment.objects.get(pk=fresh["id"])
    data = client.get(f"/api/tasks/{task.pk}").json()
    until = task.submitted_at + timedelta(seconds=600)
    assert datetime.fromisoformat(data["revisable_until"]) == until and data["revisable"] is True
    submitted_at(task, SUBMITTED)
    data = client.get(f"/api/tasks/{task.pk}").json()
    assert datetime.fromisoformat(data["submitted_at"]) == SUBMITTED
    assert datetime.fromisoformat(data["revisable_until"]) == SUBMITTED + timedelta(minutes=10)
    assert data["revisable"] is False


def test_the_claim_editor_preselects_no_support_level(client_for, bob):
    comparison_batch()
    client = client_for(bob)
    client.post(reverse("annotation:task_start"))
    task = Assignment.objects.get(labeler=bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    select = re.search(r'<select data-field="support"[^>]*>(.*?)</select>', html, re.S).group(1)
    assert select.startswith('<option value="">Choose the support</option>')
    assert "selected" not in select
    assert 'role="alert" data-claim-error' in html  # where tasks.js says why a claim was not added


@pytest.mark.parametrize("support", ["", None, "absent"])
def test_a_claim_sent_without_a_support_level_is_refused(client_for, bob, support):
    comparison_batch()
    client = client_for(bob)
    client.post(reverse("annotation:task_start"))
    task = Assignment.objects.get(labeler=bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    claim = {"start": 0, "end": 8, "relevance": "relevant", "quotes": [0]}
    if support != "absent":
        claim["support"] = support
    data = {**hidden(html), "rating-overall": "a_better", "claims-A": json.dumps([claim])}
    page = client.post(reverse("annotation:task_submit", args=[task.pk]), data, follow=True)
    assert "Choose how well this claim is supported." in page.content.decode()
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED and task.response is None
