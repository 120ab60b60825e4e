"""Handing out feedback work: leases, overlap, exclusions, expiry, under real concurrency on PostgreSQL."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone

from annotation.feedback import assignment as work
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import Answer, Assignment, AssignmentStatus, FeedbackItem, SourceKind
from annotation.questions.service import import_questions
from tests.conftest import make_user

RATING_OK = {"truthful": "yes", "informative": "yes"}


def make_batch(
    n_items: int,
    overlap: int,
    template: str = "rating",
    preset: str = "truthfulqa",
    answers_per_item: int = 1,
):
    rows = b"\n".join(b'{"question": "Is claim %d true?"}' % i for i in range(n_items))
    report = import_questions(rows, filename="claims.jsonl")
    groups = []
    for question in report.questions.order_by("id"):
        groups.append(
            [
                Answer.objects.create(
                    question=question, text=f"Answer {n}: yes.", source_kind=SourceKind.MODEL
                )
                for n in range(answers_per_item)
            ]
        )
    config = BatchSettings(name="claims", template=template, preset=preset, overlap=overlap)
    return create_feedback_batch(None, config, groups)


def labelers(django_user_model, count: int, prefix: str = "labeler"):
    return [make_user(django_user_model, f"{prefix}{i}", "labeler") for i in range(count)]


@pytest.mark.django_db(transaction=True)
def test_many_labelers_at_once_never_share_a_lease_and_never_exceed_overlap(django_user_model):
    batch = make_batch(n_items=25, overlap=2)
    people = labelers(django_user_model, 10)

    def work_until_empty(person) -> int:
        done = 0
        try:
            while (task := work.next_assignment(person)) is not None:
                result = work.submit(task.pk, person, RATING_OK, uuid.uuid4())
                assert result.validation.complete, result.validation.errors
                done += 1
        finally:
            connection.close()
        return done

    with ThreadPoolExecutor(max_workers=len(people)) as pool:
        counts = list(pool.map(work_until_empty, people))
    assert sum(counts) == 25 * 2
    per_item = (
        FeedbackItem.objects.filter(batch=batch).annotate(n=Count("assignments")).values_list("n", flat=True)
    )
    assert set(per_item) == {2}  # exactly k distinct labelers per item
    assert not FeedbackItem.objects.filter(batch=batch, is_open=True).exists()
    assert Assignment.objects.filter(status=AssignmentStatus.SUBMITTED).count() == 50


@pytest.mark.django_db
def test_a_labeler_keeps_one_lease_and_never_gets_an_item_twice(django_user_model):
    make_batch(n_items=2, overlap=1)
    (bob,) = labelers(django_user_model, 1)
    first = work.next_assignment(bob)
    assert work.next_assignment(bob) == first  # the live lease comes back
    work.skip(first.pk, bob, "I cannot judge medical claims")
    second = work.next_assignment(bob)
    assert second.item != first.item
    work.submit(second.pk, bob, RATING_OK, uuid.uuid4())
    assert work.next_assignment(bob) is None  # the skipped item is never his again


@pytest.mark.django_db
def test_expired_leases_return_to_the_pool(django_user_model):
    make_batch(n_items=1, overlap=1)
    bob, carol = labelers(django_user_model, 2)
    task = work.next_assignment(bob)
    assert work.next_assignment(carol) is None
    Assignment.objects.filter(pk=task.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    taken = work.next_assignment(carol)
    assert taken is not None and taken.item == task.item
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.EXPIRED
    with pytest.raises(work.TaskClosed, match="went to someone else"):
        work.keep_alive(task.pk, bob)


@pytest.mark.django_db
def test_an_expired_lease_whose_slot_is_free_is_taken_back_by_its_labeler(django_user_model):
    make_batch(n_items=1, overlap=1)
    (bob,) = labelers(django_user_model, 1)
    task = work.next_assignment(bob)
    Assignment.objects.filter(pk=task.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    work.reclaim_expired()
    renewed = work.keep_alive(task.pk, bob)
    assert renewed.status == AssignmentStatus.LEASED and renewed.leased_until > timezone.now()
    assert FeedbackItem.objects.get().slots_taken == 1


@pytest.mark.django_db
def test_nobody_judges_an_item_containing_their_own_demonstration(django_user_model, freshwiki):
    from annotation.demonstrations import service
    from annotation.feedback.answers_import import answer_from_episode
    from annotation.models import Question

    dana = make_user(django_user_model, "dana2", "demonstrator", "labeler")
    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    episode = service.next_episode(dana)
    for command in ("Search AFL Grand Final", "Clicked on link 0", "Quote: Geelong", "End: Answer"):
        episode.refresh_from_db()
        service.record_action(episode.pk, dana, command, uuid.uuid4(), episode.version)
    assert service.submit_answer(episode.pk, dana, "Geelong [1].") == []
    episode.refresh_from_db()
    config = BatchSettings(name="own", template="rating", preset="truthfulqa")
    create_feedback_batch(None, config, [[answer_from_episode(episode)]])
    assert work.next_assignment(dana) is None
    (bob,) = labelers(django_user_model, 1)
    assert work.next_assignment(bob) is not None


@pytest.mark.django_db
def test_answer_order_is_drawn_per_assignment_recorded_and_shown(django_user_model, client_for):
    """Blinding: which answer is A is drawn for each assignment. Over 30 two-answer comparisons both orders
    must occur (one order every time has probability 2 * 2**-30 with a fair draw), each assignment keeps
    its draw, and the task page shows the answers in the recorded order."""
    make_batch(n_items=30, overlap=1, template="minimal_comparison", preset="", answers_per_item=2)
    (bob,) = labelers(django_user_model, 1)
    in_id_order = []
    while (task := work.next_assignment(bob)) is not None:
        by_id = list(task.item.answers.order_by("id").values_list("id", flat=True))
        recorded = Assignment.objects.get(pk=task.pk).order
        assert sorted(recorded) == by_id and recorded == task.order
        in_id_order.append(recorded == by_id)
        page = client_for(bob).get(reverse("annotation:task", args=[task.pk])).content.decode()
        slot_a, slot_b = (Answer.objects.get(pk=pk).text for pk in recorded)
        assert page.index(slot_a) < page.index(slot_b)
        work.skip(task.pk, bob, "Only drawing orders here")
    assert len(in_id_order) == 30 and set(in_id_order) == {True, False}
