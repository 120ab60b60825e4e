"""Labelers' task flow: "next task" holds back a question the labeler judged (or holds) under another template
or preset within the same-question window, says so (and when the next comes back) instead of "nothing left";
every task page shows the labeler's progress; the landing page and the API show the kinds of task waiting."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.feedback import assignment as work
from annotation.feedback import progress
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import Answer, Assignment, Episode, FeedbackBatch, Question
from annotation.questions.service import import_questions
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SKY, SEA, BEES = "Why is the sky blue?", "Why is the sea salty?", "How do bees see colours?"
HELD = "1 task is waiting, but on questions you judged under another kind of task in the last 24 hours"


@pytest.fixture(autouse=True)
def bank(settings):
    settings.FEEDBACK_SAME_QUESTION_WINDOW = timedelta(hours=24)
    rows = "\n".join(json.dumps({"question": q}) for q in (SKY, SEA, BEES))
    import_questions(rows.encode(), filename="q.jsonl")


def make_batch(
    name: str, template: str, preset: str, questions: list[str], overlap: int = 1
) -> FeedbackBatch:
    """One item per question: a single answer (ratings) or a pair (comparisons). Nothing is required, so an
    empty response completes a task."""
    size = 1 if template == "rating" else 2
    rows = [{"question": q, "answer": f"{name} answer {i} to {q}"} for q in questions for i in range(size)]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    groups = [answers[i : i + size] for i in range(0, len(answers), size)]
    config = BatchSettings(
        name, template, preset, overlap=overlap, required_probability=0.0, always_required=[]
    )
    return create_feedback_batch(None, config, groups)


def judge(labeler, now: datetime | None = None) -> Assignment:
    """The labeler's next task, submitted at ``now``."""
    task = work.next_assignment(labeler, now=now)
    assert task is not None, f"{labeler} got no task"
    result = work.submit(task.pk, labeler, {}, uuid.uuid4(), now=now)
    assert result.validation.complete and result.assignment.status == "submitted"
    return result.assignment


def question_of(task: Assignment | None) -> str | None:
    return None if task is None else task.item.question.text


@pytest.fixture
def carol(django_user_model):
    return make_user(django_user_model, "carol", "labeler")


def test_a_question_judged_under_another_template_waits_out_the_window_and_goes_to_others(bob, carol):
    make_batch("gopher", "rating", "gophercite", [SKY])
    truthful = make_batch("truthful", "rating", "truthfulqa", [SKY, SEA], overlap=2)
    start = timezone.now()
    first = judge(bob, start)  # the older batch comes first
    assert (first.item.batch.preset, question_of(first)) == ("gophercite", SKY)
    # The TruthfulQA rating of the same question is held back: he gets the other question...
    second = judge(bob, start + timedelta(minutes=5))
    assert (second.item.batch_id, question_of(second)) == (truthful.pk, SEA)
    # ...and then nothing, though the item is open: it stays in the pool for others.
    assert work.next_assignment(bob, now=start + timedelta(minutes=10)) is None
    held = progress.held_back(bob, start + timedelta(minutes=10))
    assert (held.count, held.next_at) == (1, first.submitted_at + timedelta(hours=24))
    assert question_of(work.next_assignment(carol, now=start + timedelta(minutes=10))) == SKY
    # Just before the window ends it is still held back; once it has passed, it is his.
    assert work.next_assignment(bob, now=start + timedelta(hours=23, minutes=59)) is None
    later = work.next_assignment(bob, now=start + timedelta(hours=24, seconds=1))
    assert (later.item.batch_id, question_of(later)) == (truthful.pk, SKY)


def test_a_question_in_a_task_held_is_held_back_until_a_window_after_it_is_submitted(bob):
    make_batch("gopher", "rating", "gophercite", [SKY])
    make_batch("truthful", "rating", "truthfulqa", [SKY])
    holding = work.next_assignment(bob)
    assert question_of(holding) == SKY
    held = progress.held_back(bob)
    assert (held.count, held.next_at) == (1, None)
    assert held.message == (
        f"{HELD}: a question is not given to you again from another angle that soon, as the first "
        "judgement would bias the second. They come back 24 hours after you submit the task you hold."
    )
    # Skipping gives the question no judgement to bias: the other template's item is his at once.
    work.skip(holding.pk, bob, "not now")
    assert work.next_assignment(bob).item.batch.preset == "truthfulqa"


def test_the_same_template_in_another_batch_is_not_held_back(bob):
    make_batch("gopher", "rating", "gophercite", [SKY])
    again = make_batch("gopher again", "rating", "gophercite", [SKY])
    judge(bob)
    assert work.next_assignment(bob).item.batch_id == again.pk


def test_a_window_of_zero_turns_the_rule_off(bob, settings):
    settings.FEEDBACK_SAME_QUESTION_WINDOW = timedelta(0)
    make_batch("gopher", "rating", "gophercite", [SKY])
    truthful = make_batch("truthful", "rating", "truthfulqa", [SKY])
    judge(bob)
    assert progress.held_back(bob) == progress.HeldBack(0, None)
    assert work.next_assignment(bob).item.batch_id == truthful.pk


def test_next_task_says_work_is_held_back_and_when_it_comes_back_not_that_nothing_is_left(
    client_for, bob, midday
):
    make_batch("gopher", "rating", "gophercite", [SKY])
    make_batch("truthful", "rating", "truthfulqa", [SKY])
    first = judge(bob)
    client = client_for(bob)
    page = client.post(reverse("annotation:task_start"), follow=True).content.decode()
    back = timezone.localtime(first.submitted_at + timedelta(hours=24))
    assert f"{HELD}: a question is not given to you again from another angle that soon" in page
    assert page.count(HELD) == 1  # said once, not again as a message above the list
    assert f"The next one comes back at {back:%d %b %H:%M}." in page
    assert "No tasks are waiting for you right now" not in page
    api = client.post("/api/tasks/next")
    assert api.status_code == 204 and Assignment.objects.count() == 1
    waiting = client.get("/api/tasks/waiting").json()
    assert waiting["kinds"] == [] and waiting["submitted_today"] == 1
    assert waiting["held_back"]["count"] == 1
    next_at = datetime.fromisoformat(waiting["held_back"]["next_at"])
    assert next_at == first.submitted_at + timedelta(hours=24)
    assert waiting["held_back"]["detail"].startswith(HELD)


def test_next_task_says_nothing_is_left_when_nothing_is(client_for, bob):
    make_batch("gopher", "rating", "gophercite", [SKY])
    judge(bob)
    page = client_for(bob).post(reverse("annotation:task_start"), follow=True).content.decode()
    assert page.count("No tasks are waiting for you right now.") == 1
    assert "Start next task" not in page  # no button that leads nowhere
    assert "you judged under another kind of task" not in page


def test_a_submit_with_nothing_left_lands_on_the_list_which_says_why_once(client_for, bob):
    make_batch("gopher", "rating", "gophercite", [SKY])
    make_batch("truthful", "rating", "truthfulqa", [SKY])
    client = client_for(bob)
    task = work.next_assignment(bob)
    page = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    form = {
        name: re.search(rf'name="{name}" value="([^"]+)"', page).group(1)
        for name in ("submit_key", "version")
    }
    response = client.post(reverse("annotation:task_submit", args=[task.pk]), form, follow=True)
    assert response.redirect_chain == [(reverse("annotation:next_task"), 302)]
    page = response.content.decode()
    assert "Submitted. Thank you! That was your last task for now." in page
    assert page.count(HELD) == 1  # the other template's SKY waits out the window: said once, with when


def test_the_tasks_page_says_how_many_wait_and_offers_the_next_one(client_for, bob):
    make_batch("gopher", "rating", "gophercite", [SKY, SEA, BEES])
    make_batch("truthful", "rating", "truthfulqa", [SKY])
    client = client_for(bob)
    page = client.get(reverse("annotation:next_task")).content.decode()
    assert "<p data-waiting-total><strong>4</strong> tasks waiting for you, by kind:</p>" in page
    assert "Start next task</button>" in page
    # What the empty list of submitted tasks says is only that: nothing about tasks waiting.
    assert "You have not submitted any tasks yet." in page
    assert "No feedback tasks are waiting" not in page and "No tasks are waiting" not in page


def test_the_kinds_waiting_count_exactly_what_next_task_could_hand_out(client_for, bob, carol):
    make_batch("gopher", "rating", "gophercite", [SKY, SEA, BEES])
    make_batch("truthful", "rating", "truthfulqa", [SKY, SEA, BEES])
    make_batch("minimal", "minimal_comparison", "", [SEA, BEES])
    paused = make_batch("paused", "rating", "webglm", [SEA])
    paused.is_active = False
    paused.save()
    judge(carol)  # carol takes the only slot of gopher's first item (SKY)
    assert judge(bob).item.question.text == SEA  # bob judges gopher SEA: SEA is held back elsewhere
    expected = [
        ("minimal_comparison", "", "Minimal comparison", 1),  # BEES (SEA held back)
        ("rating", "gophercite", "Single-answer rating (GopherCite)", 1),  # BEES (SKY is full, SEA his)
        ("rating", "truthfulqa", "Single-answer rating (TruthfulQA)", 2),  # SKY, BEES (SEA held back)
    ]
    kinds = progress.waiting(bob).kinds
    assert [(k.template, k.preset, k.label, k.count) for k in kinds] == expected
    client = client_for(bob)
    page = client.get(reverse("annotation:next_task")).content.decode()
    for _, _, label, count in expected:
        assert f"<li>{label}: <strong>{count}</strong></li>" in page
    assert "Single-answer rating (WebGLM)" not in page  # the paused batch
    assert "2 tasks are waiting, but on questions you judged" in page
    api = client.get("/api/tasks/waiting").json()["kinds"]
    assert [(k["template"], k["preset"], k["label"], k["count"]) for k in api] == expected
    # What is counted is what is handed out: exactly the 4 tasks, then only the held-back ones remain.
    handed = set()
    for _ in range(4):
        task = work.next_assignment(bob)
        handed.add(task.item_id)
        work.skip(task.pk, bob, "counting")
    assert len(handed) == 4
    assert work.next_assignment(bob) is None and progress.held_back(bob).count == 2


def test_a_kind_s_count_stops_at_the_cap_and_says_more_wait(client_for, bob, monkeypatch):
    monkeypatch.setattr(progress, "WAITING_CAP", 2)
    make_batch("gopher", "rating", "gophercite", [SKY, SEA, BEES])
    make_batch("truthful", "rating", "truthfulqa", [SKY, SEA])
    kinds = progress.waiting(bob).kinds
    assert [(k.preset, k.count, k.more) for k in kinds] == [("gophercite", 2, True), ("truthfulqa", 2, False)]
    client = client_for(bob)
    page = client.get(reverse("annotation:next_task")).content.decode()
    assert "<p data-waiting-total><strong>4+</strong> tasks waiting for you, by kind:</p>" in page
    assert "<li>Single-answer rating (GopherCite): <strong>2+</strong></li>" in page
    assert "<li>Single-answer rating (TruthfulQA): <strong>2</strong></li>" in page
    api = client.get("/api/tasks/waiting").json()["kinds"]
    assert [(k["preset"], k["count"], k["more"]) for k in api] == [
        ("gophercite", 2, True),
        ("truthfulqa", 2, False),
    ]


def test_nothing_is_held_back_while_every_recent_judgement_is_of_the_one_kind_on_offer(bob):
    make_batch("gopher", "rating", "gophercite", [SKY, SEA])
    again = make_batch("gopher again", "rating", "gophercite", [SKY])
    judge(bob)
    assert progress.held_back(bob) == progress.HeldBack(0, None)
    # Another kind on offer: its item of the judged question is held back.
    make_batch("truthful", "rating", "truthfulqa", [SKY])
    assert progress.held_back(bob).count == 1
    assert again.pk  # the same kind in another batch is never held back (test above)


def test_today_counts_from_midnight_in_the_site_time_zone(bob, settings):
    settings.TIME_ZONE = "America/New_York"
    make_batch("gopher", "rating", "gophercite", [SKY, SEA, BEES])
    zone = ZoneInfo("America/New_York")
    judge(bob, datetime(2026, 3, 9, 23, 30, tzinfo=zone))  # 04:30 UTC on the 10th: still the 9th there
    judge(bob, datetime(2026, 3, 10, 0, 30, tzinfo=zone))
    task = work.next_assignment(bob, now=datetime(2026, 3, 10, 9, 0, tzinfo=zone))
    now = datetime(2026, 3, 10, 9, 5, tzinfo=zone)
    assert progress.task_progress(task, now) == progress.TaskProgress(1, 2, 3, 0)
    assert progress.submitted_today(bob, now) == 1


def test_every_task_page_shows_the_labelers_progress_and_a_quiet_timer(client_for, bob, alice, midday):
    make_batch("gopher", "rating", "gophercite", [SKY, SEA, BEES])
    # An item with bob's own answer is not his to do: the batch has 2 for him, not 3.
    episode = Episode.objects.create(
        user=bob, question=Question.objects.get(text=BEES), corpus="freshwiki", settings={}, state={}
    )
    Answer.objects.filter(question__text=BEES).update(episode=episode)
    judge(bob)
    task = work.next_assignment(bob)
    # No last heartbeat, so the page's lease renewal adds no time: the page shows exactly what was counted.
    Assignment.objects.filter(pk=task.pk).update(active_seconds=754.6, last_seen_at=None)
    client = client_for(bob)
    page = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert "Submitted today: <strong data-progress-today>1</strong>" in page
    assert "This batch: <strong data-progress-batch>1</strong> of 2" in page
    assert '<span data-timer aria-hidden="true">· Time on this task' in page
    assert 'data-seconds="754" data-ticking>12:34</span>' in page
    assert "js/task_timer.js" in page
    # A submitted task shows the time it took, standing still; a researcher's view has no progress line.
    done = Assignment.objects.filter(labeler=bob, status="submitted").get()
    revisit = client.get(reverse("annotation:task", args=[done.pk])).content.decode()
    assert 'data-seconds="0">00:00</span>' in revisit
    researcher = client_for(alice).get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert "data-progress" not in researcher and "task_timer.js" not in researcher


def test_a_batch_knows_its_item_count_from_creation_and_the_upgrade_counts_older_ones():
    import importlib

    from django.apps import apps

    migration = importlib.import_module("annotation.migrations.0024_batch_item_count")
    gopher = make_batch("gopher", "rating", "gophercite", [SKY, SEA, BEES])
    minimal = make_batch("minimal", "minimal_comparison", "", [SKY, SEA])
    assert (gopher.item_count, minimal.item_count) == (3, 2)
    FeedbackBatch.objects.update(item_count=0)  # as before the upgrade
    migration.count_items(apps, None)
    assert dict(FeedbackBatch.objects.values_list("name", "item_count")) == {"gopher": 3, "minimal": 2}


def test_progress_and_waiting_pages_send_a_bounded_number_of_queries(
    client_for, bob, django_assert_max_num_queries
):
    for preset in ("gophercite", "truthfulqa", "webglm"):
        make_batch(preset, "rating", preset, [SKY, SEA, BEES])
    make_batch("minimal", "minimal_comparison", "", [SKY, SEA, BEES])
    judge(bob)
    client = client_for(bob)
    task = work.next_assignment(bob)
    # One capped count per kind of task on offer (4 here: each walks at most WAITING_CAP items, whatever the
    # pool's size); the gate's notices are 3 more (the person's states, the active batches, the screening
    # tests they took).
    with django_assert_max_num_queries(23):
        assert client.get(reverse("annotation:next_task")).status_code == 200
    with django_assert_max_num_queries(21):
        assert client.get("/api/tasks/waiting").status_code == 200
    # The progress line is 2 of them; the person's state 2 (a pause closes the task they hold: the lease's
    # renewal reads it under the row lock, the page to say so).
    with django_assert_max_num_queries(18):
        assert client.get(reverse("annotation:task", args=[task.pk])).status_code == 200
