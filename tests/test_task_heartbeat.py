"""The task page's heartbeat (POST /tasks/<id>/heartbeat/): while bob's page is open it renews his lease
(204); when his time ran out and erin took the slot, it says so (409) and renews nothing; a lease that ran
out while nobody took the slot is taken back. Anyone else's heartbeat on bob's task is a 404."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from annotation.feedback import assignment as work
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import Assignment, AssignmentStatus
from annotation.questions.service import import_questions
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_slot(alice):
    """One rating task with room for one labeler (overlap 1), made by alice."""
    import_questions(b'{"question": "Is the sky green?"}', filename="q.jsonl")
    answers = import_answers(b'{"question": "Is the sky green?", "answer": "No, it is blue.", "quotes": []}')
    settings = BatchSettings("sky", "rating", "truthfulqa", required_probability=0.0, lease_seconds=600)
    return create_feedback_batch(alice, settings, group_answers(answers, "rating"))


def take_task(client, labeler) -> Assignment:
    assert client.post(reverse("annotation:task_start")).status_code == 302
    return Assignment.objects.get(labeler=labeler)


def heartbeat(client, task: Assignment):
    return client.post(reverse("annotation:task_heartbeat", args=[task.pk]))


def test_bobs_heartbeat_renews_his_lease_and_counts_his_time(client_for, bob, one_slot):
    client = client_for(bob)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        task = take_task(client, bob)
    assert task.leased_until == start + timedelta(seconds=600)
    with time_machine.travel(start + timedelta(seconds=30), tick=False):
        response = heartbeat(client, task)
    assert response.status_code == 204 and response.content == b""
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED
    assert task.leased_until == start + timedelta(seconds=630)  # ten minutes from the heartbeat
    assert task.last_seen_at == start + timedelta(seconds=30)
    assert task.active_seconds == 30


def test_when_bobs_time_ran_out_and_erin_took_the_slot_his_heartbeat_is_a_409(
    client_for, django_user_model, bob, one_slot
):
    erin = make_user(django_user_model, "erin", "labeler")
    task = take_task(client_for(bob), bob)
    Assignment.objects.filter(pk=task.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    erins = work.next_assignment(erin)  # reclaims bob's slot and takes it
    assert erins is not None and erins.item_id == task.item_id
    response = heartbeat(client_for(bob), task)
    assert response.status_code == 409
    assert response.content.decode() == work.SLOT_GONE
    task.refresh_from_db()
    assert task.status == AssignmentStatus.EXPIRED  # his lease is not renewed: the slot is erin's
    assert task.leased_until < timezone.now()
    task.item.refresh_from_db()
    assert task.item.slots_taken == 1 and not task.item.is_open


def test_when_bobs_time_ran_out_but_the_slot_is_still_free_his_heartbeat_takes_it_back(
    client_for, bob, one_slot
):
    task = take_task(client_for(bob), bob)
    Assignment.objects.filter(pk=task.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    assert work.reclaim_expired() == 1
    assert heartbeat(client_for(bob), task).status_code == 204
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED and task.leased_until > timezone.now()
    task.item.refresh_from_db()
    assert task.item.slots_taken == 1 and not task.item.is_open


def test_nobody_else_can_beat_for_bobs_task(client_for, django_user_model, alice, bob, charlie, one_slot):
    erin = make_user(django_user_model, "erin", "labeler")
    task = take_task(client_for(bob), bob)
    assert heartbeat(client_for(erin), task).status_code == 404  # another labeler's task does not exist
    # Researchers hold only their own reference tasks: anyone else's task does not exist for them either.
    assert heartbeat(client_for(alice), task).status_code == 404
    assert heartbeat(client_for(charlie), task).status_code == 403
    anonymous = heartbeat(client_for(None), task)
    assert anonymous.status_code == 302 and anonymous.url.startswith(reverse("login"))
    assert Assignment.objects.get(pk=task.pk).last_seen_at == task.last_seen_at  # nobody renewed it
