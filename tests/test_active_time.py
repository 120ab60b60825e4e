"""What counts as active time: heartbeats from a page the site served to the person (it carries a signed
page view), one span per person however many pages they have open. Erin labels and demonstrates; with a
task page and a browsing page open for 75 seconds she is paid 75 seconds, not 150. A heartbeat with no page
behind it counts nothing."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from annotation.demonstrations import service
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import ActiveSpan, Assignment, Episode, FeedbackItem, Question
from annotation.questions.service import import_questions
from annotation.workforce.references import start_reference
from annotation.workforce.timesheets import days
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
BEAT = timedelta(seconds=15)  # how often the pages beat while visible and in use


@pytest.fixture
def erin(django_user_model):
    return make_user(django_user_model, "erin", "labeler", "demonstrator")


@pytest.fixture
def at_work(alice, freshwiki):
    """A rating task waiting and a question to demonstrate; the clock stopped at noon."""
    import_questions(b'{"question": "Is the sky green?"}', filename="q.jsonl", explain_statements=False)
    answers = import_answers(b'{"question": "Is the sky green?", "answer": "No, it is blue.", "quotes": []}')
    settings = BatchSettings("sky", "rating", "truthfulqa", required_probability=0.0, lease_seconds=600)
    create_feedback_batch(alice, settings, group_answers(answers, "rating"))
    import_questions(
        b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="d.jsonl", explain_statements=False
    )
    Question.objects.filter(text__startswith="Who").update(split="bc")
    noon = timezone.localtime().replace(hour=12, minute=0, second=0, microsecond=0)
    with time_machine.travel(noon, tick=False) as clock:
        yield clock


def page_view(client, url: str) -> str:
    """The page view a page carries, as served to the client's user."""
    return re.search(r'data-page-view="([^"]+)"', client.get(url).content.decode()).group(1)


def beat(client, url: str, view: str | None):
    return client.post(url, {"page_view": view or ""})


def open_task(client, labeler) -> tuple[Assignment, str, str]:
    """The labeler's task, its heartbeat URL and the page view of its page."""
    assert client.post(reverse("annotation:task_start")).status_code == 302
    task = Assignment.objects.get(labeler=labeler)
    url = reverse("annotation:task_heartbeat", args=[task.pk])
    return task, url, page_view(client, reverse("annotation:task", args=[task.pk]))


def open_episode(client, demonstrator) -> tuple[Episode, str, str]:
    episode = service.next_episode(demonstrator)
    url = reverse("annotation:heartbeat", args=[episode.pk])
    return episode, url, page_view(client, reverse("annotation:episode", args=[episode.pk]))


def todays_seconds(person) -> tuple[float, float, float]:
    today = timezone.localdate()
    found = days(today, today, [person.pk])
    if not found:
        return 0.0, 0.0, 0.0
    return found[0].task_seconds, found[0].demonstration_seconds, found[0].total_seconds


def test_a_task_and_an_episode_open_at_once_are_paid_once(client_for, erin, at_work):
    """Both pages beat for 75 seconds: the sheet said 151 s. The time on both counts as demonstration time;
    the task and the episode each keep their own 75 s (the speed signals read those)."""
    client = client_for(erin)
    task, task_url, task_view = open_task(client, erin)
    episode, episode_url, episode_view = open_episode(client, erin)
    for _ in range(5):
        at_work.shift(BEAT)
        assert beat(client, task_url, task_view).status_code == 204
        assert beat(client, episode_url, episode_view).status_code == 204
    assert todays_seconds(erin) == (0.0, 75.0, 75.0)
    assert Assignment.objects.get(pk=task.pk).active_seconds == 75
    assert Episode.objects.get(pk=episode.pk).active_seconds == 75


def test_two_tabs_of_one_task_are_one_stretch_of_work(client_for, bob, at_work):
    client = client_for(bob)
    task, url, first_tab = open_task(client, bob)
    second_tab = page_view(client, reverse("annotation:task", args=[task.pk]))
    for tab in [first_tab, second_tab] * 4:
        at_work.shift(BEAT / 2)
        assert beat(client, url, tab).status_code == 204
    assert todays_seconds(bob) == (60.0, 0.0, 60.0)
    assert ActiveSpan.objects.filter(user=bob).count() == 1


def test_a_break_longer_than_a_minute_is_not_counted(client_for, bob, at_work):
    client = client_for(bob)
    _, url, view = open_task(client, bob)
    at_work.shift(BEAT)
    beat(client, url, view)
    at_work.shift(timedelta(minutes=5))  # the page was hidden: no beats, then a beat on coming back
    beat(client, url, view)
    at_work.shift(BEAT)
    beat(client, url, view)
    assert todays_seconds(bob) == (30.0, 0.0, 30.0)


def test_a_scripted_heartbeat_with_no_page_counts_nothing(client_for, erin, at_work):
    client = client_for(erin)
    task, task_url, _ = open_task(client, erin)
    episode, episode_url, _ = open_episode(client, erin)
    for _ in range(20):
        at_work.shift(BEAT)
        assert beat(client, task_url, None).status_code == 400
        assert beat(client, episode_url, None).status_code == 400
    assert todays_seconds(erin) == (0, 0, 0)
    assert not ActiveSpan.objects.exists()
    assert Assignment.objects.get(pk=task.pk).active_seconds == 0
    assert Episode.objects.get(pk=episode.pk).active_seconds == 0


def test_the_page_view_of_one_page_does_not_count_on_another(client_for, erin, at_work):
    client = client_for(erin)
    _, task_url, task_view = open_task(client, erin)
    _, episode_url, episode_view = open_episode(client, erin)
    at_work.shift(BEAT)
    assert beat(client, episode_url, task_view).status_code == 400
    assert beat(client, task_url, episode_view).status_code == 400
    assert not ActiveSpan.objects.exists()


def test_a_researchers_reference_is_on_no_time_sheet(client_for, alice, at_work):
    task = start_reference(FeedbackItem.objects.get(), alice)
    client = client_for(alice)
    view = page_view(client, reverse("annotation:task", args=[task.pk]))
    at_work.shift(BEAT)
    assert beat(client, reverse("annotation:task_heartbeat", args=[task.pk]), view).status_code == 204
    assert not ActiveSpan.objects.exists()
