"""Flag review: bob's overall rating contradicts his own per-dimension ratings, so his judgement is flagged;
carol's is not. Alice (researcher) keeps it or excludes it from exports; charlie has no role."""

from __future__ import annotations

import io
import json
import uuid
from html import escape

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.exports import service as exports
from annotation.feedback import assignment as work
from annotation.feedback import flag_review as review
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.feedback.results import batch_results
from annotation.models import Answer, Assignment, FlagReview
from annotation.questions.service import import_questions
from core.models import AuditEntry
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

# A better overall, yet B much better on coherence and nothing in A's favour: flagged, not refused.
CONTRADICTING = {"ratings": {"overall": "a_better", "coherence": "b_much_better"}}
CONSISTENT = {"ratings": {"overall": "a_better", "coherence": "a_better"}}
JUDGEMENT_FORMATS = ("webgpt-comparisons", "webgpt-comparisons-pairs", "rm-pairs", "comparisons-full")


@pytest.fixture
def judged(django_user_model, alice):
    """One pair judged by bob (flagged) and carol (not); returns bob's and carol's assignments."""
    import_questions(b'{"id": "q1", "question": "Why is the sky blue?"}', filename="q.jsonl")
    rows = [
        {
            "question": "Why is the sky blue?",
            "answer": "Rayleigh scattering [1].",
            "quotes": [
                {"title": "Sky", "url": "https://en.wikipedia.org/wiki/Sky", "extract": "blue light scatters"}
            ],
        },
        {"question": "Why is the sky blue?", "answer": "It reflects the sea.", "quotes": []},
    ]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    config = BatchSettings("flags", "webgpt_comparison", overlap=2, required_probability=0.0)
    create_feedback_batch(alice, config, [answers])
    tasks = []
    for name, response in (("bob", CONTRADICTING), ("carol", CONSISTENT)):
        person = make_user(django_user_model, name, "labeler")
        task = work.next_assignment(person)
        assert work.submit(task.pk, person, response, uuid.uuid4()).validation.complete
        tasks.append(Assignment.objects.get(pk=task.pk))
    bob_task, carol_task = tasks
    assert bob_task.flags == ["overall_contradicts_dimensions"] and carol_task.flags == []
    return bob_task, carol_task


def export_rows(export_format: str) -> list:
    out = io.BytesIO()
    exports.write_rows(export_format, {}, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def flags_url(task: Assignment) -> str:
    return reverse("console:feedback_flags", args=[task.item.batch_id])


def decision_url(task: Assignment) -> str:
    return reverse("console:feedback_flag_decision", args=[task.pk])


def test_a_decision_is_recorded_and_a_later_one_replaces_it_keeping_the_history(judged, alice, client_for):
    bob_task, _ = judged
    client = client_for(alice)
    response = client.post(decision_url(bob_task), {"decision": "keep", "note": "  overall is right  "})
    assert response.status_code == 302
    bob_task.refresh_from_db()
    assert bob_task.flag_decision == "keep"
    client.post(decision_url(bob_task), {"decision": "exclude", "note": ""})
    bob_task.refresh_from_db()
    assert bob_task.flag_decision == "exclude"
    reviews = list(FlagReview.objects.filter(assignment=bob_task).values_list("decision", "note", "reviewer"))
    assert reviews == [("keep", "overall is right", alice.pk), ("exclude", "", alice.pk)]
    logged = AuditEntry.objects.filter(action=review.DECIDED, object_id=str(bob_task.pk)).order_by("id")
    assert [entry.data["previous"] for entry in logged] == ["", "keep"]
    page = client.get(flags_url(bob_task), {"show": "all"}).content.decode()
    assert "Keep (alice): overall is right" in page and "Exclude from exports (alice)" in page
    assert "Excluded from exports" in page  # the current state


@pytest.mark.parametrize("export_format", JUDGEMENT_FORMATS)
def test_exclude_leaves_the_judgement_out_of_each_export_format_and_keep_keeps_it(
    judged, alice, export_format
):
    bob_task, carol_task = judged
    assert len(export_rows(export_format)) == 2
    review.decide(bob_task.pk, alice, "keep")
    assert len(export_rows(export_format)) == 2
    review.decide(bob_task.pk, alice, "exclude")
    rows = export_rows(export_format)
    assert len(rows) == 1
    if export_format in ("rm-pairs", "comparisons-full"):
        assert (rows[0].get("assignment") or rows[0]["ids"]["assignment"]) == carol_task.pk


def test_ranking_exports_use_the_same_query(django_user_model, alice):
    """Rankings carry no flags today, but rm-groups reads the one query that leaves excluded ones out."""
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    rows = [{"question": "Why is the sky blue?", "answer": f"Answer {n}.", "quotes": []} for n in range(4)]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    create_feedback_batch(alice, BatchSettings("ranks", "ranking", required_probability=0.0), [answers])
    erin = make_user(django_user_model, "erin", "labeler")
    task = work.next_assignment(erin)
    ranks = {"ranks": {str(n): n for n in range(1, 5)}, "likert": {str(n): 4 for n in range(1, 5)}}
    assert work.submit(task.pk, erin, ranks, uuid.uuid4()).validation.complete
    assert len(export_rows("rm-groups")) == 1
    Assignment.objects.filter(pk=task.pk).update(flag_decision="exclude")
    assert export_rows("rm-groups") == []


def test_results_and_agreement_leave_an_excluded_judgement_out(judged, alice):
    bob_task, _ = judged
    before = batch_results(bob_task.item.batch, resamples=50)
    assert before["counts"]["submitted"] == 2 and before["agreement"]["pairs"] == 1
    review.decide(bob_task.pk, alice, "exclude")
    after = batch_results(bob_task.item.batch, resamples=50)
    assert after["counts"]["submitted"] == 1 and after["agreement"]["pairs"] == 0
    bob_row = next(row for row in after["labelers"] if row["labeler"] == "bob")
    assert (bob_row["submitted"], bob_row["flagged"], bob_row["agreement"]) == (1, 1, None)


def test_a_revision_that_changes_the_response_clears_the_decision(judged, alice, client_for):
    bob_task, _ = judged
    bob = bob_task.labeler
    review.decide(bob_task.pk, alice, "exclude")
    # The same response again (a new key): still the judgement alice decided on.
    work.submit(bob_task.pk, bob, CONTRADICTING, uuid.uuid4())
    bob_task.refresh_from_db()
    assert bob_task.flag_decision == "exclude"
    changed = {"ratings": {"overall": "a_much_better", "coherence": "b_better"}}  # still contradicting
    work.submit(bob_task.pk, bob, changed, uuid.uuid4())
    bob_task.refresh_from_db()
    assert bob_task.flags and bob_task.flag_decision == ""
    assert len(export_rows("comparisons-full")) == 2  # back in until someone decides again
    cleared = AuditEntry.objects.get(action=review.CLEARED, object_id=str(bob_task.pk))
    assert cleared.actor == bob and cleared.data["previous"] == "exclude"
    page = client_for(alice).get(flags_url(bob_task)).content.decode()  # the default list: not reviewed
    assert f'id="flag-{bob_task.pk}"' in page and "Back to not reviewed (the labeler)" in page


def test_a_revision_that_removes_the_flags_clears_the_decision_and_the_listing(judged, alice):
    bob_task, _ = judged
    review.decide(bob_task.pk, alice, "exclude")
    work.submit(bob_task.pk, bob_task.labeler, CONSISTENT, uuid.uuid4())
    bob_task.refresh_from_db()
    assert (bob_task.flags, bob_task.flag_decision) == ([], "")
    assert review.flag_counts(bob_task.item.batch)["all"] == 0
    with pytest.raises(review.FlagReviewError, match="not flagged"):
        review.decide(bob_task.pk, alice, "keep")


@pytest.mark.parametrize(
    "body, field, message",
    [
        (
            {"decision": "maybe"},
            "decision",
            "The decision is 'keep' (Keep) or 'exclude' (Exclude from exports), not 'maybe'.",
        ),
        ({"decision": ""}, "decision", "not ''"),
        ({"decision": "keep", "note": "x" * (review.MAX_NOTE + 1)}, "note", "The note is too long"),
    ],
)
def test_a_bad_decision_is_refused_alike_by_page_and_api_and_changes_nothing(
    judged, alice, client_for, body, field, message
):
    bob_task, _ = judged
    audit = AuditEntry.objects.count()
    with pytest.raises(review.FlagReviewError) as refused:
        review.check_decision(body.get("decision"), body.get("note"))
    assert refused.value.field == field and message in refused.value.message
    page = client_for(alice).post(decision_url(bob_task), body)
    assert (
        page.status_code == 400
        and escape(f"{refused.value.message} Nothing was changed.") in page.content.decode()
    )
    api = APIClient()
    api.force_authenticate(alice)
    answer = api.post(reverse("api-assignment-flag-decision", args=[bob_task.pk]), body, format="json")
    assert answer.status_code == 400
    assert answer.json() == {field: [f"{refused.value.message} Nothing was changed."]}
    bob_task.refresh_from_db()
    assert bob_task.flag_decision == "" and not FlagReview.objects.exists()
    assert AuditEntry.objects.count() == audit


def test_an_unflagged_judgement_cannot_be_decided_on(judged, alice, client_for):
    _, carol_task = judged
    response = client_for(alice).post(decision_url(carol_task), {"decision": "exclude"})
    assert response.status_code == 400 and "is not flagged for review" in response.content.decode()
    carol_task.refresh_from_db()
    assert carol_task.flag_decision == "" and not FlagReview.objects.exists()


def test_htmx_swaps_the_judgement_and_the_counts(judged, alice, client_for):
    bob_task, _ = judged
    client = client_for(alice)
    response = client.post(decision_url(bob_task), {"decision": "keep"}, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200 and response["Vary"] and "HX-Request" in response["Vary"]
    assert body.lstrip().startswith(f'<section class="flag-review" id="flag-{bob_task.pk}"')
    assert "<strong" in body and ">Kept</strong>" in body
    assert 'id="flag-counts" hx-swap-oob="true">1 flagged: 0 not reviewed, 1 kept, 0 excluded' in body
    refused = client.post(decision_url(bob_task), {"decision": "?"}, headers={"HX-Request": "true"})
    assert refused.status_code == 400 and 'role="alert"' in refused.content.decode()


def test_the_list_filters_by_decision_and_refuses_an_unknown_filter(judged, alice, client_for):
    bob_task, _ = judged
    client = client_for(alice)
    anchor = f'id="flag-{bob_task.pk}"'
    assert anchor in client.get(flags_url(bob_task)).content.decode()
    review.decide(bob_task.pk, alice, "keep")
    assert anchor not in client.get(flags_url(bob_task)).content.decode()  # not reviewed: none left
    assert anchor in client.get(flags_url(bob_task), {"show": "keep"}).content.decode()
    assert anchor not in client.get(flags_url(bob_task), {"show": "exclude"}).content.decode()
    bad = client.get(flags_url(bob_task), {"show": "everything"})
    assert bad.status_code == 400 and "show: Select a valid choice" in bad.content.decode()


def test_the_page_shows_the_reason_and_the_answers_in_the_labelers_order(judged, alice, client_for):
    bob_task, _ = judged
    page = client_for(alice).get(flags_url(bob_task)).content.decode()
    assert review.REASONS["overall_contradicts_dimensions"] in page
    answers = Answer.objects.in_bulk(bob_task.order)
    shown_a, shown_b = (answers[pk].text for pk in bob_task.order)
    assert page.index("Answer A") < page.index(shown_a) < page.index("Answer B") < page.index(shown_b)
    assert '<th scope="row">Coherence</th><td>B much better</td>' in page  # as bob rated them
    assert '<th scope="row">Overall usefulness</th><td>A better</td>' in page
    assert "by bob" in page


def test_the_batch_page_links_its_flag_count(judged, alice, client_for):
    bob_task, _ = judged
    page = client_for(alice).get(reverse("console:feedback_batch", args=[bob_task.item.batch_id]))
    assert f'<a href="{flags_url(bob_task)}">1 flagged, 1 not reviewed</a>' in page.content.decode()


def test_the_api_lists_and_decides_through_the_same_rule(judged, alice, django_user_model):
    bob_task, _ = judged
    api = APIClient()
    api.force_authenticate(alice)
    listed = api.get(reverse("api-batch-flags", args=[bob_task.item.batch_id])).json()
    assert listed["counts"] == {"all": 1, "open": 1, "keep": 0, "exclude": 0}
    [row] = listed["results"]
    assert row["id"] == bob_task.pk and row["flags"] == ["overall_contradicts_dimensions"]
    assert [slot["answer"] for slot in row["answers_in_order_shown"]] == bob_task.order
    url = reverse("api-assignment-flag-decision", args=[bob_task.pk])
    decided = api.post(url, {"decision": "exclude", "note": "contradicts"}, format="json")
    assert decided.status_code == 200 and decided.json()["flag_decision"] == "exclude"
    assert decided.json()["decisions"][0]["note"] == "contradicts"
    unknown = api.post(url, {"decision": "keep", "reason": "typo"}, format="json")
    assert unknown.status_code == 400 and "reason" in unknown.json()
    assert (
        api.get(reverse("api-batch-flags", args=[bob_task.item.batch_id]), {"show": "nope"}).status_code
        == 400
    )
    bob = APIClient()
    bob.force_authenticate(bob_task.labeler)
    assert bob.post(url, {"decision": "keep"}, format="json").status_code == 403
    assert bob.get(reverse("api-batch-flags", args=[bob_task.item.batch_id])).status_code == 404
    bob_task.refresh_from_db()
    assert bob_task.flag_decision == "exclude"
