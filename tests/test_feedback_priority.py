"""Batch priority: "Next task" interleaves the active batches, each labeler's share of a batch following its
priority (not the oldest batch drained first), exhausted and paused batches left out; the priority is set
when a batch is made (page, API and command share the check) and changed on the batch page."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.feedback import assignment as work
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import FeedbackBatch
from annotation.questions.service import import_questions
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def rating_batch(name: str, items: int, priority: int = 1) -> FeedbackBatch:
    rows = [{"question": "why is the sky blue", "answer": f"{name} answer {i}."} for i in range(items)]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    config = BatchSettings(name, "rating", "gophercite", required_probability=0.0, priority=priority)
    return create_feedback_batch(None, config, [[answer] for answer in answers])


@pytest.fixture
def question():
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")


def handed_out(labeler, count: int) -> list[str]:
    """The batches of the labeler's next ``count`` tasks (each skipped once taken, so the next is new)."""
    names = []
    for _ in range(count):
        task = work.next_assignment(labeler)
        if task is None:
            break
        names.append(task.item.batch.name)
        work.skip(task.pk, labeler, "next")
    return names


def test_active_batches_are_interleaved_by_priority(django_user_model, question):
    rating_batch("old", 6)
    rating_batch("new", 6)
    rating_batch("urgent", 6, priority=2)
    lee = make_user(django_user_model, "lee", "labeler")
    turns = handed_out(lee, 8)
    # Fewest tasks per unit of priority first (ties: the older batch): urgent gets twice each other's share.
    assert turns == ["urgent", "old", "new", "urgent", "urgent", "old", "new", "urgent"]
    assert turns.count("urgent") == 2 * turns.count("old") == 2 * turns.count("new")


def test_exhausted_and_paused_batches_are_passed_over(django_user_model, question):
    rating_batch("small", 1)
    paused = rating_batch("paused", 3)
    paused.is_active = False
    paused.save()
    rating_batch("big", 3)
    lee = make_user(django_user_model, "lee", "labeler")
    assert handed_out(lee, 10) == ["small", "big", "big", "big"]


def test_the_priority_is_checked_alike_on_the_page_the_api_and_the_command(client_for, alice, question):
    client = client_for(alice)
    form = {"name": "b", "template": "rating", "preset": "gophercite", "source": "bank", "overlap": 1,
            "required_probability": 0.1, "lease_minutes": 30, "revision_minutes": 60}  # fmt: skip
    import_answers(b'{"question": "why is the sky blue", "answer": "Scattering."}')
    page = client.post(reverse("console:feedback_create"), {**form, "priority": 11})
    assert page.status_code == 400 and "The priority is 1 to 10" in page.content.decode()
    body = {**form, "lease_seconds": 1800, "revision_seconds": 3600, "priority": 0}
    del body["lease_minutes"], body["revision_minutes"]  # the page's names: the API takes seconds
    api = client.post("/api/batches", body, content_type="application/json")
    assert api.status_code == 400 and "priority" in api.json()
    with pytest.raises(CommandError, match="--priority: The priority is 1 to 10"):
        call_command("create_feedback_batch", "b", "--template", "rating", "--preset", "gophercite",
                     "--source", "bank", "--priority", "12")  # fmt: skip
    assert not FeedbackBatch.objects.exists()
    assert client.post(reverse("console:feedback_create"), {**form, "priority": 3}).status_code == 302
    assert FeedbackBatch.objects.get().priority == 3


def test_the_batch_page_changes_the_priority_and_refuses_what_is_out_of_range(client_for, alice, question):
    batch = rating_batch("b", 1)
    client = client_for(alice)
    url = reverse("console:feedback_priority", args=[batch.pk])
    for bad in ("0", "11", "two", "", "1" * 50):
        refused = client.post(url, {"priority": bad})
        assert refused.status_code == 400 and "Nothing was changed" in refused.content.decode(), bad
    batch.refresh_from_db()
    assert batch.priority == 1
    assert client.post(url, {"priority": "4"}).status_code == 302
    batch.refresh_from_db()
    assert batch.priority == 4
    assert (
        'name="priority" value="4"'
        in client.get(reverse("console:feedback_batch", args=[batch.pk])).content.decode()
    )
