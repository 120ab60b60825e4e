"""The workforce gate, screening scores, references, gold checks and their automatic pause, the decisions and
the upgrade's qualification of existing workers (issue 26)."""

from __future__ import annotations

import uuid

import pytest
from django.apps import apps
from django.urls import reverse

from annotation.feedback import assignment as work
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    DemonstrationBatch,
    FeedbackBatch,
    FeedbackItem,
    Qualification,
    QualificationEvent,
    QualificationState,
    SourceKind,
)
from annotation.questions.service import import_questions
from annotation.workforce import gate
from annotation.workforce.references import start_reference
from annotation.workforce.screening import FAIL, INCOMPLETE, PASS, feedback_candidates
from annotation.workforce.states import StateError, set_state, state_of
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
KIND = "minimal_comparison"
A_BETTER = {"ratings": {"overall": "a_better"}}
B_BETTER = {"ratings": {"overall": "b_better"}}
EQUAL = {"ratings": {"overall": "equal"}}


def comparison_batch(name: str, items: int, **fields) -> FeedbackBatch:
    rows = b"\n".join(b'{"question": "%s question %d?"}' % (name.encode(), i) for i in range(items))
    questions = import_questions(rows, filename=f"{name}.jsonl").questions.order_by("id")
    groups = [
        [
            Answer.objects.create(question=q, text=f"{name} answer {n}.", source_kind=SourceKind.MODEL)
            for n in (0, 1)
        ]
        for q in questions
    ]
    config = BatchSettings(name=name, template=KIND, required_probability=0.0, overlap=1)
    batch = create_feedback_batch(None, config, groups)
    FeedbackBatch.objects.filter(pk=batch.pk).update(**fields)
    batch.refresh_from_db()
    return batch


def prefer(task: Assignment, lower_id_better: bool | None) -> dict:
    """The response that prefers the item's lower-id answer (True), the other (False) or neither (None),
    whatever order the task shows them in."""
    if lower_id_better is None:
        return EQUAL
    first_is_lower = task.order[0] == min(task.order)
    return A_BETTER if first_is_lower == lower_id_better else B_BETTER


def judge(user, lower_id_better: bool | None) -> Assignment:
    task = work.next_assignment(user)
    assert task is not None
    result = work.submit(task.pk, user, prefer(task, lower_id_better), uuid.uuid4())
    assert result.validation.complete, result.validation.errors
    task.refresh_from_db()
    return task


def set_reference(batch: FeedbackBatch, researcher, lower_id_better: list[bool | None]) -> None:
    for item, better in zip(batch.items.order_by("id"), lower_id_better, strict=True):
        task = start_reference(item, researcher)
        result = work.submit(task.pk, researcher, prefer(task, better), uuid.uuid4())
        assert result.validation.complete


def test_an_applicant_gets_only_the_screening_test_and_a_qualified_labeler_only_the_work(
    django_user_model, alice
):
    production = comparison_batch("work", 2)
    screening = comparison_batch("screen", 2, is_screening=True)
    applicant = make_user(django_user_model, "newbie", "labeler", applicant=True)
    veteran = make_user(django_user_model, "veteran", "labeler")
    assert [row["pk"] for row in gate.open_batches(applicant)] == [screening.pk]
    assert [row["pk"] for row in gate.open_batches(veteran)] == [production.pk]
    assert work.next_assignment(applicant).item.batch == screening
    assert work.next_assignment(veteran).item.batch == production
    [notice] = gate.notices(applicant)
    assert notice.kind == KIND and "screening test" in notice.text
    assert gate.notices(veteran) == []


def test_the_pick_reads_the_same_open_batches_as_the_gates_query(django_user_model):
    """``open_batch_priorities`` (the next task's read of the gate) agrees with ``open_batches`` (the SQL
    form) for every state, on screening and production batches of two kinds, a rating preset among them."""
    production = comparison_batch("work", 1, priority=3)
    screening = comparison_batch("screen", 1, is_screening=True)
    ratings = comparison_batch("ratings", 1, template="rating", preset="truthfulqa")
    rating_test = comparison_batch("test", 1, template="rating", preset="truthfulqa", is_screening=True)
    comparison_batch("closed", 1, is_active=False)
    person = make_user(django_user_model, "bob", "labeler", applicant=True)
    seen = []
    for comparisons, truthfulqa in [(None, None), *[(state, "qualified") for state in QualificationState]]:
        for kind, state in ((KIND, comparisons), ("rating:truthfulqa", truthfulqa)):
            Qualification.objects.filter(user=person, kind=kind).delete()
            if state is not None:
                Qualification.objects.create(user=person, kind=kind, state=state)
        priorities = gate.open_batch_priorities(person)
        assert set(priorities) == {row["pk"] for row in gate.open_batches(person)}
        assert all(priorities[pk] == FeedbackBatch.objects.get(pk=pk).priority for pk in priorities)
        seen.append(set(priorities))
    # No row is an applicant; then applicant, qualified, paused, revoked for comparisons.
    expected_ratings = {ratings.pk}
    assert seen == [
        {screening.pk, rating_test.pk},
        {screening.pk} | expected_ratings,
        {production.pk} | expected_ratings,
        expected_ratings,
        expected_ratings,
    ]


def test_a_screening_item_takes_every_applicant_whatever_the_overlap(django_user_model):
    screening = comparison_batch("screen", 1, is_screening=True)
    people = [make_user(django_user_model, f"applicant{i}", "labeler", applicant=True) for i in range(3)]
    for person in people:
        judge(person, True)
    item = screening.items.get()
    assert item.slots_taken == 3 and item.is_open  # overlap 1, yet open to the next applicant
    assert work.next_assignment(people[0]) is None  # never the same item twice


def test_the_task_api_answers_as_the_gate_says(django_user_model, client):
    comparison_batch("screen", 1, is_screening=True)
    applicant = make_user(django_user_model, "newbie", "labeler", applicant=True)
    client.force_login(applicant)
    task = client.post(reverse("api-task-next")).json()
    assert task["screening"] is True
    waiting = client.get(reverse("api-task-waiting")).json()
    assert [g["kind"] for g in waiting["gate"]] == [KIND]


def test_paused_and_revoked_labelers_get_nothing_of_that_kind_and_keep_their_work(django_user_model, alice):
    batch = comparison_batch("work", 3)
    bob = make_user(django_user_model, "bobby", "labeler")
    done = judge(bob, True)
    set_state(bob, KIND, QualificationState.PAUSED, by=alice, reason="checking")
    assert work.next_assignment(bob) is None
    assert "Paused" in gate.notices(bob)[0].text
    set_state(bob, KIND, QualificationState.REVOKED, by=alice, reason="gone", exclude_work=True)
    assert work.next_assignment(bob) is None
    done.refresh_from_db()
    assert done.status == AssignmentStatus.SUBMITTED  # nothing submitted is lost
    assert Qualification.objects.get(user=bob, kind=KIND).work_excluded_before is not None
    assert batch.items.filter(is_open=True).count() == 2


def test_a_change_the_state_does_not_allow_or_without_a_reason_changes_nothing(django_user_model, alice):
    carl = make_user(django_user_model, "carl", "labeler", applicant=True)
    with pytest.raises(StateError):
        set_state(carl, KIND, QualificationState.PAUSED, by=alice, reason="no")  # applicant -> paused
    with pytest.raises(StateError):
        set_state(carl, KIND, QualificationState.QUALIFIED, by=alice, reason="  ")
    assert not Qualification.objects.filter(user=carl).exists()
    assert not QualificationEvent.objects.filter(user=carl).exists()


def test_a_reference_is_stored_on_its_item_and_takes_no_slot(alice):
    batch = comparison_batch("screen", 1, is_screening=True)
    item = batch.items.get()
    task = start_reference(item, alice)
    result = work.submit(task.pk, alice, prefer(task, False), uuid.uuid4())
    assert result.validation.complete
    task.refresh_from_db()
    item.refresh_from_db()
    assert task.status == AssignmentStatus.REFERENCE
    assert item.is_gold and item.gold_expected == {"flags": [], "preference": -0.5}
    assert item.slots_taken == 0
    assert start_reference(item, alice) == task  # the same task again, to revise


def test_screening_scores_against_hand_computed_values(django_user_model, alice):
    screening = comparison_batch("screen", 5, is_screening=True, agreement_cutoff=0.75)
    set_reference(screening, alice, [True, True, False, False, None])
    good = make_user(django_user_model, "good", "labeler", applicant=True)
    poor = make_user(django_user_model, "poor", "labeler", applicant=True)
    # good: agree, agree, agree, says equal where the reference prefers (0.5), agrees on the tie: 4.5 / 5.
    answers = {}
    for _ in range(5):
        task = work.next_assignment(good)
        index = list(screening.items.order_by("id")).index(task.item)
        better = [True, True, False, None, None][index]
        work.submit(task.pk, good, prefer(task, better), uuid.uuid4())
        answers[index] = better
    # poor: opposite on the first three, stops there (incomplete).
    for _ in range(3):
        task = work.next_assignment(poor)
        index = list(screening.items.order_by("id")).index(task.item)
        work.submit(task.pk, poor, prefer(task, [False, False, True, True, True][index]), uuid.uuid4())
    rows = {c.username: c for c in feedback_candidates(KIND)}
    [score] = rows["good"].scores
    assert score.measure == "preference" and score.count == 5
    assert score.value == pytest.approx(0.9)
    # Wilson, n = 5, 4.5 successes, z = 1.96: by hand (p + z²/2n ± z√(p(1-p)/n + z²/4n²)) / (1 + z²/n).
    assert (score.low, score.high) == (pytest.approx(0.4629, abs=1e-4), pytest.approx(0.9895, abs=1e-4))
    assert rows["good"].suggestion == PASS
    assert rows["poor"].done == 3 and rows["poor"].suggestion in (FAIL, INCOMPLETE)


def test_gold_accuracy_under_the_threshold_pauses_the_labeler_automatically(django_user_model, alice):
    batch = comparison_batch("work", 4, gold_threshold=0.6, gold_min_items=3)
    FeedbackItem.objects.filter(batch=batch).update(is_gold=True, gold_expected={"preference": 1.0})
    bob = make_user(django_user_model, "bobby", "labeler")
    judge(bob, True)  # agrees: 1
    judge(bob, None)  # says equal: 0.5
    assert state_of(bob, KIND) == QualificationState.QUALIFIED  # 2 gold items: not yet N
    judge(bob, False)  # opposite: 0 -> 1.5 / 3 = 50% < 60%
    assert state_of(bob, KIND) == QualificationState.PAUSED
    event = QualificationEvent.objects.filter(user=bob).first()
    assert event.by is None and event.to_state == "paused"
    assert event.figures["count"] == 3 and event.figures["accuracy"] == pytest.approx(0.5)
    assert "50%" in event.reason
    assert work.next_assignment(bob) is None
    assert Assignment.objects.filter(labeler=bob, status=AssignmentStatus.SUBMITTED).count() == 3


def test_the_candidates_page_and_a_decision_with_its_reason(django_user_model, alice, client):
    screening = comparison_batch("screen", 1, is_screening=True)
    set_reference(screening, alice, [True])
    newbie = make_user(django_user_model, "newbie", "labeler", applicant=True)
    judge(newbie, True)
    client.force_login(alice)
    page = client.get(reverse("console:candidates", args=[KIND]))
    assert page.status_code == 200
    assert b"newbie" in page.content and b"100% [" in page.content
    assert client.get(reverse("console:candidates", args=["nonsense"])).status_code == 404
    decide, back = reverse("console:team_state", args=[newbie.pk]), reverse("console:candidates", args=[KIND])
    response = client.post(decide, {"kind": KIND, "action": "qualify", "reason": "", "next": back})
    assert response.status_code == 400 and state_of(newbie, KIND) == QualificationState.APPLICANT
    response = client.post(
        decide, {"kind": KIND, "action": "qualify", "reason": "passed screening", "next": back}
    )
    assert response.status_code == 302 and response.url == back
    assert state_of(newbie, KIND) == QualificationState.QUALIFIED
    event = QualificationEvent.objects.get(user=newbie)
    assert (event.by, event.reason) == (alice, "passed screening")
    assert work.next_assignment(newbie) is None  # nothing but the screening test is active


def test_an_applicant_demonstrator_gets_only_screening_questions(django_user_model, alice):
    from annotation.demonstrations import service as demos

    rows = b'{"question": "Screen me?"}\n{"question": "Real work?"}'
    screen_q, work_q = import_questions(rows, filename="d.jsonl").questions.order_by("id")
    screening = DemonstrationBatch.objects.create(name="screen", is_screening=True, overlap=1)
    screening.questions.set([screen_q])
    real = DemonstrationBatch.objects.create(name="real", overlap=1)
    real.questions.set([work_q])
    applicant = make_user(django_user_model, "appl", "demonstrator", applicant=True)
    veteran = make_user(django_user_model, "vet", "demonstrator")
    assert demos._pick_question(applicant) == (screen_q, screening)
    assert demos._pick_question(veteran) == (work_q, real)
    assert "screening" in gate.demonstration_notice(applicant)


def test_the_upgrade_qualifies_everyone_who_already_worked(django_user_model):
    import importlib

    migration = importlib.import_module("annotation.migrations.0020_qualify_existing_workers")
    comparison_batch("work", 1)
    old_hand = make_user(django_user_model, "oldhand", "labeler", applicant=True)
    judge_without_gate = Assignment.objects.create(
        item=FeedbackItem.objects.get(),
        labeler=old_hand,
        order=[1, 2],
        status=AssignmentStatus.SUBMITTED,
        leased_until="2026-01-01T00:00Z",
    )
    assert judge_without_gate.pk
    migration.qualify_existing(apps, None)
    assert state_of(old_hand, KIND) == QualificationState.QUALIFIED
    assert "upgrade" in QualificationEvent.objects.get(user=old_hand).reason


def test_the_candidates_api_and_command(django_user_model, alice, bob, client):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    screening = comparison_batch("screen", 2, is_screening=True)
    set_reference(screening, alice, [True, False])
    newbie = make_user(django_user_model, "newbie", "labeler", applicant=True)
    judge(newbie, True)
    client.force_login(alice)
    body = client.get(reverse("api-workforce-candidates", args=[KIND])).json()
    [row] = body["candidates"]
    assert (row["username"], row["done"], row["total"], row["suggestion"]) == ("newbie", 1, 2, INCOMPLETE)
    assert row["scores"][0]["count"] == 1
    assert client.get(reverse("api-workforce-candidates", args=["nope"])).status_code == 404
    client.force_login(bob)
    assert client.get(reverse("api-workforce-candidates", args=[KIND])).status_code == 403
    out = StringIO()
    call_command("screening", KIND, stdout=out)
    assert "newbie (applicant): 1/2 items, suggestion incomplete" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("screening", "nope")


def test_the_kind_page_shows_gold_accuracy_and_signals_with_their_intervals(django_user_model, alice, client):
    batch = comparison_batch("work", 4, gold_threshold=0.0, gold_min_items=1, overlap=2)
    FeedbackItem.objects.filter(batch=batch).update(is_gold=True, gold_expected={"preference": 1.0})
    first, second = (make_user(django_user_model, name, "labeler") for name in ("first", "second"))
    for _ in range(4):
        judge(first, True)  # 4 of 4 gold right
        judge(second, None)  # says equal every time: 2 of 4, and 100% "equally good"
    client.force_login(alice)
    page = client.get(reverse("console:workforce_kind", args=[KIND])).content.decode()
    assert "100% [51%-100%], n = 4" in page  # first's gold accuracy: Wilson for 4 of 4
    assert "50% [15%-85%], n = 4" in page  # second's: 2 of 4
    assert "Near-constant rating" in page and "notable" in page
    assert "Krippendorff" in page
    assert client.get(reverse("console:workforce_kind", args=["demonstration"])).status_code == 404
