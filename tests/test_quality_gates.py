"""The quality gates cannot be walked around (issue 36): gold checks and screening tests score the first
submission, a reference is shown only once it can no longer be revised towards, a paused or revoked person
can neither finish what they held nor revise what they did, the revision window runs from the first
submission, and excluded work stays excluded. Each test is the walkthrough's attack, from every door."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from annotation.demonstrations import service as demonstrations
from annotation.feedback import assignment as work
from annotation.models import (
    DEMONSTRATION,
    Assignment,
    AssignmentStatus,
    Episode,
    EpisodeStatus,
    FeedbackItem,
    QualificationState,
)
from annotation.questions.service import import_questions
from annotation.workforce import quality
from annotation.workforce.excluded import kept_judgements
from annotation.workforce.gold import accuracy_of, gold_checks
from annotation.workforce.screening import FAIL, feedback_candidates
from annotation.workforce.states import StateError, set_state, state_of
from tests.conftest import make_user
from tests.test_workforce_gate import KIND, comparison_batch, judge, prefer, set_reference

pytestmark = pytest.mark.django_db


def gold_batch(items: int, **fields):
    """A production batch whose items are all gold, the lower-id answer the better one."""
    batch = comparison_batch("gold", items, **fields)
    batch.items.update(is_gold=True, gold_expected={"preference": 1.0, "flags": []})
    return batch


def revise(task: Assignment, user, lower_id_better: bool | None):
    return work.submit(task.pk, user, prefer(task, lower_id_better), uuid.uuid4())


def test_a_gold_item_revised_after_its_reference_is_still_scored_on_the_first_answer(
    django_user_model, alice, client_for
):
    gold_batch(1, revision_seconds=3600)
    bob = make_user(django_user_model, "bob", "labeler")
    task = judge(bob, False)  # against the reference
    assert accuracy_of(gold_checks(bob)).accuracy == 0.0
    # While bob may still revise it, My quality keeps the reference back (and says when it comes).
    report = quality.report(bob)
    assert report.disagreements == [] and report.withheld == 1
    page = client_for(bob).get(reverse("annotation:my_quality")).content.decode()
    assert 'id="gold-withheld"' in page and f'id="gold-{task.pk}"' not in page
    # Revising towards the reference is allowed (the item is not known to be gold) but changes no score.
    assert revise(task, bob, True).validation.complete
    task.refresh_from_db()
    assert task.revised and task.revisions.count() == 1
    [check] = gold_checks(bob)
    assert check.score == 0.0 and check.revised
    # Researchers see the revision as such on the person's page.
    person = client_for(alice).get(reverse("console:team_person", args=[bob.pk])).content.decode()
    assert "0% of 1 gold item" in person and "1 revised later, scored as first submitted" in person
    # Once the window is over the reference is shown next to what bob first answered, marked revised.
    with time_machine.travel(timezone.now() + timedelta(hours=2)):
        [shown] = quality.report(bob).disagreements
        assert shown.assignment_id == task.pk and shown.revised and shown.score == 0.0
        page = client_for(bob).get(reverse("annotation:my_quality")).content.decode()
        assert f'id="gold-{task.pk}"' in page and "revised later" in page


def test_the_figures_of_a_pause_agree_with_its_reason_after_the_paused_person_tries_to_revise(
    django_user_model, alice, client_for
):
    gold_batch(3, gold_min_items=3, gold_threshold=0.6)
    drifter = make_user(django_user_model, "drifter", "labeler")
    tasks = [judge(drifter, False) for _ in range(3)]
    assert state_of(drifter, KIND) == QualificationState.PAUSED
    # The three revisions that once turned 0% into 100% are refused, from the service and the API.
    with pytest.raises(work.TaskClosed, match="paused"):
        revise(tasks[0], drifter, True)
    client = client_for(drifter)
    body = {"response": prefer(tasks[1], True), "key": str(uuid.uuid4())}
    answer = client.post(
        reverse("api-task-submit", args=[tasks[1].pk]), body, content_type="application/json"
    )
    assert answer.status_code == 409 and "paused" in answer.json()["detail"]
    assert all(task.revisions.count() == 0 for task in tasks)
    # The figure every page reads is the one the pause recorded.
    assert accuracy_of(gold_checks(drifter, KIND)).accuracy == 0.0
    team = client_for(alice).get("/api/team").json()
    [row] = [person for person in team["people"] if person["username"] == "drifter"]
    assert row["gold"]["accuracy"] == 0.0
    # While paused the references are shown: the tasks cannot be revised any more.
    assert len(quality.report(drifter).disagreements) == 3


def test_the_screening_score_is_no_oracle(django_user_model, alice):
    screening = comparison_batch("screen", 3, is_screening=True, agreement_cutoff=0.75)
    set_reference(screening, alice, [True, True, True])
    applicant = make_user(django_user_model, "applicant", "labeler", applicant=True)
    tasks = [judge(applicant, False) for _ in range(3)]
    [candidate] = feedback_candidates(KIND)
    assert candidate.suggestion == FAIL
    for task in tasks:  # each item "fixed" after reading the running score
        assert revise(task, applicant, True).validation.complete
    [candidate] = feedback_candidates(KIND)
    assert candidate.suggestion == FAIL and candidate.scores[0].value == 0.0 and candidate.revised == 3
    [test] = quality.screening_scores(applicant)
    assert test.scores[0].figure.accuracy == 0.0


def test_past_the_screening_test_its_answers_cannot_be_changed(django_user_model, alice):
    screening = comparison_batch("screen", 1, is_screening=True)
    set_reference(screening, alice, [True])
    applicant = make_user(django_user_model, "applicant", "labeler", applicant=True)
    task = judge(applicant, False)
    set_state(applicant, KIND, QualificationState.QUALIFIED, by=alice, reason="knows the work")
    with pytest.raises(work.TaskClosed, match="screening"):
        revise(task, applicant, True)


def test_a_pause_ends_the_lease_held_and_refuses_its_draft_and_submit_from_every_door(
    django_user_model, alice, client_for
):
    batch = comparison_batch("work", 1)
    bob = make_user(django_user_model, "bob", "labeler")
    erin = make_user(django_user_model, "erin", "labeler")
    client = client_for(bob)
    held = client.post(reverse("api-task-next")).json()
    pause = client_for(alice).post(
        f"/api/team/{bob.pk}/state",
        {"kind": KIND, "action": "pause", "reason": "checking his work"},
        content_type="application/json",
    )
    assert pause.status_code == 200
    task = Assignment.objects.get(pk=held["id"])
    assert task.status == AssignmentStatus.EXPIRED
    assert FeedbackItem.objects.get(batch=batch).slots_taken == 0  # back in the pool ...
    assert work.next_assignment(erin).item.batch == batch  # ... and taken by someone else
    client = client_for(bob)
    assert client.post(reverse("api-task-next")).status_code == 204
    body = {"response": prefer(task, True), "key": str(uuid.uuid4())}
    submit = client.post(reverse("api-task-submit", args=[task.pk]), body, content_type="application/json")
    assert submit.status_code == 409 and "paused" in submit.json()["detail"]
    draft = client.post(
        reverse("api-task-draft", args=[task.pk]), {"draft": {"x": 1}}, content_type="application/json"
    )
    assert draft.status_code == 409 and "paused" in draft.json()["detail"]
    form = {"submit_key": str(uuid.uuid4()), "version": task.version, "rating-overall": "a_better"}
    page = client.post(reverse("annotation:task_submit", args=[task.pk]), form, follow=True)
    assert "paused" in page.content.decode()
    # What the page and the API show agrees: closed, and why; no "you can still submit" notice.
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert "data-standing" in html and "paused" in html and "You can still submit" not in html
    assert 'disabled class="task-fields"' in html
    detail = client.get(reverse("api-task", args=[task.pk])).json()
    assert "paused" in detail["closed_reason"] and detail["revisable"] is False
    task.refresh_from_db()
    assert task.status == AssignmentStatus.EXPIRED and task.response is None


def test_a_revoked_persons_held_task_never_reaches_an_export(django_user_model, alice):
    comparison_batch("work", 2)
    bob = make_user(django_user_model, "bob", "labeler")
    held = work.next_assignment(bob)
    set_state(bob, KIND, QualificationState.REVOKED, by=alice, reason="careless", exclude_work=True)
    with pytest.raises(work.TaskClosed, match="withdrawn"):
        work.submit(held.pk, bob, prefer(held, True), uuid.uuid4())
    assert not kept_judgements(Assignment.objects.all()).exists()


def test_excluded_work_stays_excluded_when_revised_after_a_reinstatement(django_user_model, alice):
    comparison_batch("work", 1, revision_seconds=3600)
    bob = make_user(django_user_model, "bob", "labeler")
    task = judge(bob, True)
    set_state(bob, KIND, QualificationState.REVOKED, by=alice, reason="careless", exclude_work=True)
    with pytest.raises(work.TaskClosed):
        revise(task, bob, False)  # revoked: no revision at all
    set_state(bob, KIND, QualificationState.QUALIFIED, by=alice, reason="a second chance", action="reinstate")
    assert revise(task, bob, False).validation.complete  # within its window, as reinstated
    assert not kept_judgements(Assignment.objects.filter(pk=task.pk)).exists()


def test_the_revision_window_runs_from_the_first_submission_and_closes_for_good(django_user_model):
    comparison_batch("work", 1, revision_seconds=3600)
    bob = make_user(django_user_model, "bob", "labeler")
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        task = judge(bob, True)
    with time_machine.travel(start + timedelta(minutes=50), tick=False):
        assert revise(task, bob, False).validation.complete
    late = start + timedelta(minutes=70)
    with time_machine.travel(late, tick=False), pytest.raises(work.TaskClosed, match="time to revise"):
        revise(task, bob, True)
    task.refresh_from_db()
    assert task.first_submitted_at == start and task.revisable_until == start + timedelta(hours=1)


def test_reinstate_is_for_paused_or_revoked_people_only(django_user_model, alice, client_for):
    applicant = make_user(django_user_model, "applicant", "labeler", applicant=True)
    with pytest.raises(StateError, match="qualified"):
        set_state(applicant, KIND, QualificationState.QUALIFIED, by=alice, reason="ok", action="reinstate")
    answer = client_for(alice).post(
        f"/api/team/{applicant.pk}/state",
        {"kind": KIND, "action": "reinstate", "reason": "ok"},
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert state_of(applicant, KIND) == QualificationState.APPLICANT


def test_a_paused_demonstrator_cannot_go_on_with_the_episode_they_held(django_user_model, alice, freshwiki):
    import_questions(b'{"question": "Who won the AFL Grand Final?"}', filename="bank.jsonl", dataset="bank")
    dana = make_user(django_user_model, "dana", "demonstrator")
    episode = demonstrations.next_episode(dana)
    assert episode is not None
    set_state(dana, DEMONSTRATION, QualificationState.PAUSED, by=alice, reason="review first")
    episode.refresh_from_db()
    assert episode.status == EpisodeStatus.SKIPPED and "review first" in episode.note
    outcome = demonstrations.record_action(episode.pk, dana, "Search sky", uuid.uuid4(), episode.version)
    assert "paused" in outcome.notice and not episode.actions.exists()
    assert demonstrations.next_episode(dana) is None
    assert Episode.objects.filter(user=dana).count() == 1


def test_the_upgrade_takes_each_judgements_first_submission_from_its_history(django_user_model):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("annotation.migrations.0022_assignment_first_submission")
    comparison_batch("work", 2, revision_seconds=3600)
    bob = make_user(django_user_model, "bob", "labeler")
    revised, untouched = judge(bob, False), judge(bob, True)
    first_at = revised.first_submitted_at
    revise(revised, bob, True)
    # As before the upgrade: no first submission recorded.
    Assignment.objects.update(first_submitted_at=None, first_response=None)
    migration.backfill_first_submission(apps, None)
    revised.refresh_from_db()
    untouched.refresh_from_db()
    assert revised.first_submitted_at == first_at
    assert revised.first_response["ratings"] == prefer(revised, False)["ratings"]
    assert revised.response["ratings"] == prefer(revised, True)["ratings"]
    assert untouched.first_response == untouched.response
    assert untouched.first_submitted_at == untouched.submitted_at


def test_the_batch_pages_gold_accuracy_reads_the_first_submission_too(django_user_model):
    from annotation.feedback.stats import labeler_stats

    batch = gold_batch(1, revision_seconds=3600)
    bob = make_user(django_user_model, "bob", "labeler")
    task = judge(bob, False)
    revise(task, bob, True)
    [row] = labeler_stats(batch)
    assert row["gold_accuracy"] == 0.0
