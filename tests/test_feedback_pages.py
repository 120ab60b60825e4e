"""Feedback task pages: each template renders blind and takes a submission; permissions; drafts."""

from __future__ import annotations

import importlib
import json
import re

import pytest
from django.apps import apps as django_apps
from django.urls import reverse

from annotation.feedback import assignment as work
from annotation.models import Answer, Assignment, AssignmentStatus, FeedbackBatch
from tests.conftest import demo_production_batches, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_batches(freshwiki, demo_site):
    # Tests below submit only some fields: the "everything required" draw (10% by default) must not
    # happen, except where a test sets it.
    FeedbackBatch.objects.update(required_probability=0.0)
    return {
        batch.template + (f":{batch.preset}" if batch.preset else ""): batch
        # The demo's production batches (its screening test and gold checks aside).
        for batch in demo_production_batches()
    }


def only(batches: dict, key: str) -> None:
    """Leave only one batch active, so "next task" hands out that template."""
    FeedbackBatch.objects.exclude(pk=batches[key].pk).update(is_active=False)
    FeedbackBatch.objects.filter(pk=batches[key].pk).update(is_active=True)


def task_for(client, user) -> Assignment:
    response = client.post(reverse("annotation:task_start"))
    assert response.status_code == 302
    return Assignment.objects.filter(labeler=user).latest("id")


def form_fields(html: str) -> dict[str, str]:
    """The task form's hidden fields: the submission's key and the task version the page was drawn from."""
    return {
        name: re.search(rf'name="{name}" value="([^"]+)"', html).group(1)
        for name in ("submit_key", "version")
    }


def test_a_webgpt_comparison_is_blind_and_accepts_a_full_submission(client_for, bob, demo_batches):
    only(demo_batches, "webgpt_comparison")
    client = client_for(bob)
    task = task_for(client, bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    for label in ("A much better", "A better", "Equally good", "B better", "B much better"):
        assert label in html
    for dimension in (
        "Unsupported information",
        "Irrelevant information",
        "Usefulness of supported information",
        "Usefulness of weakly supported information",
        "Coherence",
        "Overall usefulness",
    ):
        assert f">{dimension}" in html
    for answer in Answer.objects.filter(pk__in=task.order):  # the sources never reach the labeler
        assert answer.source == {"dataset": "freshwiki_demo_answers", "quality": answer.source["quality"]}
    assert "freshwiki" not in html.lower() and "demo" not in html.lower()
    data = {
        **form_fields(html),
        "rating-overall": "a_better",
        "rating-coherence": "b_better",
        "trust-A-0": "trustworthy",
        "claims-A": json.dumps(
            [{"start": 0, "end": 5, "support": "supported", "relevance": "relevant", "quotes": [0]}]
        ),
        "comment": "fine",
    }
    response = client.post(reverse("annotation:task_submit", args=[task.pk]), data)
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.status == AssignmentStatus.SUBMITTED
    assert task.response["ratings"] == {"overall": "a_better", "coherence": "b_better"}
    assert task.response["answers"]["A"]["claims"][0]["end"] == 5
    assert "overall_contradicts_dimensions" in task.flags  # accepted, flagged for review


def test_missing_required_fields_are_refused_and_the_draft_is_kept(client_for, bob, demo_batches):
    only(demo_batches, "minimal_comparison")
    client = client_for(bob)
    task = task_for(client, bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    response = client.post(
        reverse("annotation:task_submit", args=[task.pk]),
        {**form_fields(html), "rating-accuracy": "equal"},
    )
    assert response.status_code == 302 and response.url == reverse("annotation:task", args=[task.pk])
    page = client.get(response.url).content.decode()
    assert 'role="alert"' in page and "Overall usefulness" in page
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED and task.draft["ratings"] == {"accuracy": "equal"}
    assert re.search(r'name="rating-accuracy" value="equal" checked', page)  # the draft is what was sent


def test_drafts_autosave_and_a_repeated_submit_is_applied_once(client_for, bob, demo_batches):
    only(demo_batches, "rating:truthfulqa")
    client = client_for(bob)
    task = task_for(client, bob)
    assert (
        client.post(reverse("annotation:task_draft", args=[task.pk]), {"field-truthful": "yes"}).status_code
        == 200
    )
    task.refresh_from_db()
    assert task.draft["truthful"] == "yes"
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    data = {**form_fields(html), "field-truthful": "yes", "field-informative": "no"}
    assert client.post(reverse("annotation:task_submit", args=[task.pk]), data).status_code == 302
    assert client.post(reverse("annotation:task_submit", args=[task.pk]), data).status_code == 302
    task.refresh_from_db()
    assert task.response["informative"] == "no" and task.revisions.count() == 0


def test_a_submitted_task_can_be_revised_and_the_history_is_kept(client_for, bob, demo_batches):
    only(demo_batches, "rating:truthfulqa")
    client = client_for(bob)
    task = task_for(client, bob)
    for informative in ("no", "yes"):
        html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
        data = {**form_fields(html), "field-truthful": "yes", "field-informative": informative}
        client.post(reverse("annotation:task_submit", args=[task.pk]), data)
    task.refresh_from_db()
    assert task.response["informative"] == "yes"
    assert [rev.response["informative"] for rev in task.revisions.all()] == ["no"]


def test_ranking_and_gophercite_pages_take_their_responses(client_for, bob, demo_batches):
    only(demo_batches, "ranking")
    client = client_for(bob)
    task = task_for(client, bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    slots = [str(n) for n in range(1, len(task.order) + 1)]
    data = {**form_fields(html), **{f"rank-{slot}": "1" if slot == "1" else "2" for slot in slots}}
    data["tag-1"] = ["hallucination"]
    data["then"] = "list"  # "Submit and back to the list": no next ranking task is leased
    response = client.post(reverse("annotation:task_submit", args=[task.pk]), data)
    assert response.url == reverse("annotation:next_task")
    task.refresh_from_db()
    assert task.response["ranks"]["1"] == 1 and task.response["tags"]["1"] == ["hallucination"]

    only(demo_batches, "rating:gophercite")
    task = task_for(client, bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    short = {
        **form_fields(html),
        "field-plausible": "yes",
        "field-supported": "unsure",
        "field-justification": "too short",
    }
    response = client.post(reverse("annotation:task_submit", args=[task.pk]), short, follow=True)
    assert response.redirect_chain == [(reverse("annotation:task", args=[task.pk]), 302)]
    page = response.content.decode()
    assert "7 words" in page, re.findall(r"<li>[^<]*</li>", page)[:5]


def test_tasks_are_private_to_their_labeler(client_for, django_user_model, bob, dana, charlie, demo_batches):
    task = task_for(client_for(bob), bob)
    erin = make_user(django_user_model, "erin", "labeler")
    for user in (erin, dana, charlie):
        client = client_for(user)
        assert client.get(reverse("annotation:task", args=[task.pk])).status_code == 404
    for name in ("task_draft", "task_submit", "task_skip", "task_heartbeat"):
        assert client_for(erin).post(reverse(f"annotation:{name}", args=[task.pk]), {}).status_code == 404, (
            name
        )
    assert client_for(dana).get(reverse("annotation:next_task")).status_code == 403
    response = client_for(None).get(reverse("annotation:task", args=[task.pk]))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_skipping_needs_a_reason(client_for, bob, demo_batches):
    client = client_for(bob)
    task = task_for(client, bob)
    client.post(reverse("annotation:task_skip", args=[task.pk]), {"reason": " "})
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.LEASED
    client.post(reverse("annotation:task_skip", args=[task.pk]), {"reason": "I do not know this topic"})
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.SKIPPED
    assert work.next_assignment(bob).item != task.item


def test_when_the_draw_requires_everything_the_page_says_so_and_enforces_it(client_for, bob, demo_batches):
    only(demo_batches, "minimal_comparison")
    FeedbackBatch.objects.update(required_probability=1.0)
    client = client_for(bob)
    task = task_for(client, bob)
    assert task.required_all
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert "Required for this task: Accuracy, Coherence, Overall usefulness." in html
    data = {**form_fields(html), "rating-overall": "equal"}
    refused = client.post(reverse("annotation:task_submit", args=[task.pk]), data, follow=True)
    assert 'role="alert"' in refused.content.decode()
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.LEASED
    data |= {"rating-accuracy": "equal", "rating-coherence": "a_better"}
    response = client.post(reverse("annotation:task_submit", args=[task.pk]), data)
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.SUBMITTED
    following = Assignment.objects.get(labeler=bob, status=AssignmentStatus.LEASED)  # "Submit and next"
    assert response.url == reverse("annotation:task", args=[following.pk])


def test_a_malformed_stored_draft_still_renders(client_for, bob, demo_batches):
    only(demo_batches, "webgpt_comparison")
    client = client_for(bob)
    task = task_for(client, bob)
    Assignment.objects.filter(pk=task.pk).update(
        draft={"ratings": ["x"], "flags": 3, "answers": {"A": {"trust": [1], "claims": "?"}}, "ranks": None},
        required_all=False,
    )
    page = client.get(reverse("annotation:task", args=[task.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    # The malformed parts are ignored, not shown as choices: nothing is preselected, and the page still works.
    assert not re.search(r'name="(rating|flag|trust)-[^"]*"[^>]* checked', html)
    data = {**form_fields(html), "rating-overall": "a_better"}
    assert client.post(reverse("annotation:task_submit", args=[task.pk]), data).status_code == 302
    submitted = Assignment.objects.get(pk=task.pk)
    assert submitted.status == AssignmentStatus.SUBMITTED
    assert submitted.response["ratings"] == {"overall": "a_better"}


def test_submit_and_next_opens_the_next_task_and_back_to_the_list_takes_none(client_for, bob, demo_batches):
    only(demo_batches, "rating:truthfulqa")
    client = client_for(bob)
    first = task_for(client, bob)
    html = client.get(reverse("annotation:task", args=[first.pk])).content.decode()
    assert "Submit and next</button>" in html and 'name="then" value="list"' in html
    answers = {"field-truthful": "yes", "field-informative": "no"}
    response = client.post(
        reverse("annotation:task_submit", args=[first.pk]), {**form_fields(html), **answers}, follow=True
    )
    second = Assignment.objects.get(labeler=bob, status=AssignmentStatus.LEASED)
    assert second.pk != first.pk
    assert response.redirect_chain == [(reverse("annotation:task", args=[second.pk]), 302)]
    assert "Submitted. Thank you!</li>" in response.content.decode()  # said on the next task's page

    html = response.content.decode()
    stop = {**form_fields(html), **answers, "then": "list"}
    response = client.post(reverse("annotation:task_submit", args=[second.pk]), stop, follow=True)
    assert response.redirect_chain == [(reverse("annotation:next_task"), 302)]
    assert "Submitted. Thank you!</li>" in response.content.decode()
    assert not Assignment.objects.filter(labeler=bob, status=AssignmentStatus.LEASED).exists()


def test_a_ranking_shows_the_metadata_of_its_batchs_preset(client_for, bob, demo_batches):
    only(demo_batches, "ranking")
    client = client_for(bob)
    task = task_for(client, bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    # A batch without a preset judges factual WebGPT questions: WebGPT's checkboxes, not an assistant's.
    assert "Makes claims its references do not support" in html and "Does not answer the question" in html
    assert "Inappropriate for a customer assistant" not in html and "Contains sexual content" not in html
    FeedbackBatch.objects.filter(pk=task.item.batch_id).update(preset="instructgpt")
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert "Inappropriate for a customer assistant" in html and "Contains sexual content" in html
    assert "Makes claims its references do not support" not in html


def test_a_rating_page_says_what_is_optional_with_its_rule_and_the_keys_before_a_submit(
    client_for, bob, demo_batches
):
    only(demo_batches, "rating:gophercite")
    client = client_for(bob)
    task = task_for(client, bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert (
        '<label for="field-justification">Justification <span class="hint">(optional; at least 7 words if '
        "you write one)</span></label>" in html
    )
    assert (
        "Everything else is optional (the justification, if you write one, needs at least 7 words)." in html
    )
    assert 'data-word-count="field-justification" data-min-words="7">At least 7 words.</p>' in html
    assert "Keyboard: Tab moves between questions; 1-3 choose on the focused one" in html
    Assignment.objects.filter(pk=task.pk).update(required_all=True)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert 'Justification <span class="req">(required: at least 7 words)</span></label>' in html


def test_every_comparison_page_shows_its_keys(client_for, bob, demo_batches):
    client = client_for(bob)
    for template in ("webgpt_comparison", "minimal_comparison"):
        only(demo_batches, template)
        task = task_for(client, bob)
        html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
        assert "Keyboard: Tab moves between scales; 1-5 choose on the focused one" in html
        work.skip(task.pk, bob, "next template")


def test_ranking_batches_made_before_the_sets_keep_instructgpts_metadata():
    """Migration 0017: the existing ranking batches showed InstructGPT's checkboxes and keep them, so no
    batch mixes two sets; other batches are left as they are."""
    migration = importlib.import_module("annotation.migrations.0017_ranking_presets")
    old = FeedbackBatch.objects.create(name="old ranking", template="ranking")
    rating = FeedbackBatch.objects.create(name="rating", template="rating", preset="gophercite")
    comparison = FeedbackBatch.objects.create(name="comparison", template="minimal_comparison")
    migration.keep_instructgpt_metadata(django_apps, None)
    presets = dict(FeedbackBatch.objects.values_list("pk", "preset"))
    assert presets == {old.pk: "instructgpt", rating.pk: "gophercite", comparison.pk: ""}
