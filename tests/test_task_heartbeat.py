"""The task page's heartbeat (POST /tasks/<id>/heartbeat/ with the page view the page was served with):
while bob's page is open it renews his lease (204); when his time ran out and erin took the slot, it says so
(409) and renews nothing; a lease that ran out while nobody took the slot is taken back. Anyone else's
heartbeat on bob's task is a 404; one without a page view of bob's task is a 400 that renews and counts
nothing."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from annotation.feedback import assignment as work
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import ActiveSpan, Assignment, AssignmentStatus
from annotation.questions.service import import_questions
from annotation.workforce.activity import NO_PAGE_VIEW
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


def page_view(client, task: Assignment) -> str:
    """The page view of the task page as served to the client's user (its heartbeats send it back)."""
    page = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    return re.search(r'data-page-view="([^"]+)"', page).group(1)


def heartbeat(client, task: Assignment, view: str | None = None):
    return client.post(reverse("annotation:task_heartbeat", args=[task.pk]), {"page_view": view or ""})


def test_bobs_heartbeat_renews_his_lease_and_counts_his_time(client_for, bob, one_slot):
    client = client_for(bob)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        task = take_task(client, bob)
        view = page_view(client, task)
    assert task.leased_until == start + timedelta(seconds=600)
    with time_machine.travel(start + timedelta(seconds=30), tick=False):
        response = heartbeat(client, task, view)
    assert response.status_code == 204 and response.content == b""
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED
    assert task.leased_until == start + timedelta(seconds=630)  # ten minutes from the heartbeat
    assert task.last_seen_at == start + timedelta(seconds=30)
    assert task.active_seconds == 30
    span = ActiveSpan.objects.get(user=bob)  # his time sheet's: from the page's serving to the beat
    assert (span.started_at, span.ended_at) == (start, start + timedelta(seconds=30))


def test_a_heartbeat_without_a_page_view_renews_and_counts_nothing(client_for, bob, one_slot):
    """A script posting to the heartbeat URL with no page open kept bob's lease and counted as his time."""
    client = client_for(bob)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        task = take_task(client, bob)
    for seconds in range(15, 15 * 40, 15):
        with time_machine.travel(start + timedelta(seconds=seconds), tick=False):
            response = heartbeat(client, task)
            assert response.status_code == 400
            assert response.content.decode() == NO_PAGE_VIEW
    task.refresh_from_db()
    assert (task.active_seconds, task.last_seen_at) == (0, start)
    assert task.leased_until == start + timedelta(seconds=600)  # not renewed
    assert not ActiveSpan.objects.exists()


def test_only_a_page_view_of_this_task_served_to_bob_counts(client_for, django_user_model, bob, one_slot):
    erin = make_user(django_user_model, "erin", "labeler")
    client = client_for(bob)
    task = take_task(client, bob)
    view = page_view(client, task)
    forged = [view[:-1] + ("A" if view[-1] != "A" else "B"), "x" * 5000, view + "x"]
    for refused in forged:
        assert heartbeat(client, task, refused).status_code == 400
    erins_task = Assignment.objects.create(
        item=task.item, labeler=erin, order=task.order, leased_until=timezone.now() + timedelta(minutes=10)
    )
    assert heartbeat(client_for(erin), erins_task, view).status_code == 400  # bob's page view, not hers
    with time_machine.travel(timezone.now() + timedelta(days=1, seconds=1)):
        assert heartbeat(client_for(bob), task, view).status_code == 400  # served more than a day ago
    assert heartbeat(client_for(bob), task, view).status_code == 204


def test_when_bobs_time_ran_out_and_erin_took_the_slot_his_heartbeat_is_a_409(
    client_for, django_user_model, bob, one_slot
):
    erin = make_user(django_user_model, "erin", "labeler")
    task = take_task(client_for(bob), bob)
    view = page_view(client_for(bob), task)
    Assignment.objects.filter(pk=task.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    erins = work.next_assignment(erin)  # reclaims bob's slot and takes it
    assert erins is not None and erins.item_id == task.item_id
    response = heartbeat(client_for(bob), task, view)
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
    view = page_view(client_for(bob), task)
    Assignment.objects.filter(pk=task.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    assert work.reclaim_expired() == 1
    assert heartbeat(client_for(bob), task, view).status_code == 204
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED and task.leased_until > timezone.now()
    task.item.refresh_from_db()
    assert task.item.slots_taken == 1 and not task.item.is_open


def test_nobody_else_can_beat_for_bobs_task(client_for, django_user_model, alice, bob, charlie, one_slot):
    erin = make_user(django_user_model, "erin", "labeler")
    task = take_task(client_for(bob), bob)
    view = page_view(client_for(bob), task)  # bob's page view, copied: it names him
    task.refresh_from_db()
    assert heartbeat(client_for(erin), task, view).status_code == 404  # another's task does not exist
    # Researchers hold only their own reference tasks: anyone else's task does not exist for them either.
    assert heartbeat(client_for(alice), task, view).status_code == 404
    assert heartbeat(client_for(charlie), task, view).status_code == 403
    anonymous = heartbeat(client_for(None), task, view)
    assert anonymous.status_code == 302 and anonymous.url.startswith(reverse("login"))
    assert Assignment.objects.get(pk=task.pk).last_seen_at == task.last_seen_at  # nobody renewed it
    assert not ActiveSpan.objects.exists()
