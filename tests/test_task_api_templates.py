"""Every feedback template, end to end through the API and the task page: bob takes a task, sends a complete
response (every part required: the batch draws "required all" with probability 1) and the stored response is
exactly what he meant, normalised. The WebGLM rating preset is also rated through its page."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.urls import reverse
from django.utils.html import escape
from rest_framework.test import APIClient

from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.feedback.scales import RATING_PRESETS
from annotation.feedback.step_batches import create_step_items
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    SourceKind,
)
from annotation.questions.service import import_questions
from core.api_tokens import issue
from core.models import AuditEntry
from tests.test_step_review import model_episode

pytestmark = pytest.mark.django_db

ANSWERS = (
    "Rayleigh scattering makes the sky blue.",
    "The sky reflects the sea.",
    "Blue light scatters more than red light.",
    "Nobody knows.",
)


def batch_for(template: str, preset: str = "", answers: int = 2) -> None:
    """One item of ``answers`` answers to one question, each answer citing one reference."""
    report = import_questions(b'{"question": "Why is the sky blue?"}', filename="sky.jsonl")
    question = report.questions.get()
    config = BatchSettings(name=template, template=template, preset=preset, required_probability=1.0)
    if template in ("step_review", "step_preference"):  # an episode of two actions, as a run stores one
        episode = model_episode(question, ("Search why is the sky blue", "Back"))
        # A step preference: the state before step 1, the command taken (A) against another (B).
        state = {"index": 1, "candidates": ["Back", "Clicked on link 0"], "taken": 0}
        steps = [state] if template == "step_preference" else None
        create_step_items(None, config, [episode], {"source": "test"}, steps=steps)
        return
    group = [
        Answer.objects.create(
            question=question,
            text=text,
            source_kind=SourceKind.MODEL,
            quotes=[{"title": "Sky", "url": f"https://e.org/{n}", "domain": "e.org", "extract": "blue"}],
        )
        for n, text in enumerate(ANSWERS[:answers])
    ]
    create_feedback_batch(None, config, [group])


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue(user)}")
    return client


def claim(support: str, relevance: str) -> dict:
    return {"start": 0, "end": 3, "support": support, "relevance": relevance, "quotes": [0]}


WEBGPT_DIMENSIONS = (
    "unsupported",
    "irrelevant",
    "supported_usefulness",
    "weakly_supported_usefulness",
    "coherence",
    "overall",
)
WEBGLM = {
    "reference_relevancy": 3,  # the 0-3 scales may arrive as numbers; they are stored as their codes
    "reference_density": "2",
    "reference_truthfulness": "yes",
    "reference_toxicity": "no",
    "reference_social_bias": "no",
    "fluency": "3",
    "correctness": 2,
    "citation_accuracy": "1",
    "truthfulness": "yes",
    "objectivity": "no",
    "redundancy": "no",
}
CASES = {
    "webgpt_comparison": (
        {
            "ratings": dict.fromkeys(WEBGPT_DIMENSIONS, "a_better"),
            "answers": {
                "A": {"trust": {"0": "trustworthy"}, "claims": [claim("supported", "relevant")]},
                "B": {"trust": {"0": "untrustworthy"}, "claims": [claim("unsupported", "irrelevant")]},
            },
            "comment": " A cites a physics page. ",
        },
        {
            "flags": {"nonsense": False, "should_not_answer": False},
            "answers": {
                "A": {"trust": {"0": "trustworthy"}, "claims": [claim("supported", "relevant")]},
                "B": {"trust": {"0": "untrustworthy"}, "claims": [claim("unsupported", "irrelevant")]},
            },
            "ratings": dict.fromkeys(WEBGPT_DIMENSIONS, "a_better"),
            "comment": "A cites a physics page.",
        },
    ),
    "minimal_comparison": (
        {"ratings": {"accuracy": "b_much_better", "coherence": "equal", "overall": "b_better"}},
        {
            "ratings": {"accuracy": "b_much_better", "coherence": "equal", "overall": "b_better"},
            "comment": "",
        },
    ),
    "ranking": (
        {
            "ranks": {"1": 1, "2": 3, "3": "3", "4": 4},  # ties allowed, stored as dense ranks
            "likert": {"1": 7, "2": 3, "3": 3, "4": 1},
            "tags": {"2": ["hallucination"], "4": ["fails_instruction"]},
            "comment": "1 is the physics answer.",
        },
        {
            "ranks": {"1": 1, "2": 2, "3": 2, "4": 3},
            "likert": {"1": 7, "2": 3, "3": 3, "4": 1},
            "tags": {"2": ["hallucination"], "4": ["fails_instruction"]},
            "comment": "1 is the physics answer.",
        },
    ),
    "rating:gophercite": (
        {
            "plausible": "yes",
            "supported": "unsure",
            "justification": "The quote says blue light scatters most.",
        },
        {
            "plausible": "yes",
            "supported": "unsure",
            "justification": "The quote says blue light scatters most.",
            "comment": "",
        },
    ),
    "rating:truthfulqa": (
        {"truthful": "yes", "informative": "no"},
        {"truthful": "yes", "informative": "no", "comment": ""},
    ),
    "rating:webglm": (WEBGLM, {**{code: str(value) for code, value in WEBGLM.items()}, "comment": ""}),
    "step_review": (
        {
            "steps": {"0": {"rating": "good"}, "1": {"rating": "bad", "reason": "other", "note": " loops "}},
            "first_bad": "1",
        },
        {
            "steps": {"0": {"rating": "good"}, "1": {"rating": "bad", "reason": "other", "note": "loops"}},
            "first_bad": 1,
            "comment": "",
        },
    ),
    "step_preference": (
        {"preference": "b_better", "reason": "wrong_link", "comment": " B reads the result. "},
        {"preference": "b_better", "reason": "wrong_link", "comment": "B reads the result."},
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_complete_response_submitted_through_the_api_is_stored_normalised(case, bob):
    template, _, preset = case.partition(":")
    batch_for(template, preset, answers=4 if template == "ranking" else 1 if template == "rating" else 2)
    sent, stored = CASES[case]
    client = token_client(bob)
    task = client.post("/api/tasks/next").json()
    assert (task["template"], task["preset"]) == (template, preset)

    submitted = client.post(
        f"/api/tasks/{task['id']}/submit",
        {"response": sent, "key": str(uuid.uuid4()), "version": task["version"]},
        format="json",
    )
    assert submitted.status_code == 200, submitted.json()
    assert submitted.json()["complete"] is True and submitted.json()["repeated"] is False
    assignment = Assignment.objects.get(pk=task["id"])
    assert assignment.status == AssignmentStatus.SUBMITTED and assignment.submitted_at is not None
    assert assignment.response == stored
    assert AuditEntry.objects.filter(action="assignment.submit", object_id=str(assignment.pk)).count() == 1
    assert client.get(f"/api/tasks/{task['id']}").json()["response"] == stored


def test_the_api_refuses_a_second_claim_on_the_same_span(bob):
    batch_for("webgpt_comparison")
    client = token_client(bob)
    task = client.post("/api/tasks/next").json()
    sent = CASES["webgpt_comparison"][0]
    twice = [claim("supported", "relevant"), claim("unsupported", "relevant")]
    response = {**sent, "answers": {**sent["answers"], "A": {**sent["answers"]["A"], "claims": twice}}}
    body = {"response": response, "key": str(uuid.uuid4()), "version": task["version"]}
    refused = client.post(f"/api/tasks/{task['id']}/submit", body, format="json")
    assert refused.status_code == 400, refused.json()
    assert "answers.A.claims.1" in json.dumps(refused.json())
    assert Assignment.objects.get(pk=task["id"]).status == AssignmentStatus.LEASED


def test_every_template_and_rating_preset_has_a_case():
    from annotation.feedback.scales import TEMPLATES

    templates = {code for code, _ in TEMPLATES} - {"rating"}
    assert set(CASES) == templates | {f"rating:{preset}" for preset in RATING_PRESETS}


def test_the_api_describes_the_webglm_criteria_the_page_shows(bob):
    batch_for("rating", "webglm", answers=1)
    task = token_client(bob).post("/api/tasks/next").json()
    fields = {field["code"]: field for field in task["rating_fields"]}
    assert list(fields) == [field.code for field in RATING_PRESETS["webglm"]]
    assert fields["fluency"]["choices"] == ["0", "1", "2", "3"]
    assert fields["truthfulness"]["choices"] == ["yes", "no"]
    assert task["required"] == list(fields)  # every criterion, as the batch requires everything


def hidden_inputs(html: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', html))


def webglm_task_page(client) -> tuple[Assignment, str]:
    """The labeler starts work on a one-answer WebGLM rating batch: their task and its page."""
    batch_for("rating", "webglm", answers=1)
    client.post(reverse("annotation:task_start"))
    assignment = Assignment.objects.get()
    return assignment, client.get(reverse("annotation:task", args=[assignment.pk])).content.decode()


def test_the_webglm_rating_page_shows_its_criteria_and_stores_a_submit(client_for, bob):
    client = client_for(bob)
    assignment, page = webglm_task_page(client)
    assert assignment.labeler == bob
    assert "Single-answer rating · WebGLM" in page and "Rayleigh scattering makes the sky blue." in page
    for field in RATING_PRESETS["webglm"]:
        label = escape(field.label)
        assert f'<legend id="field-{field.code}">{label} <span class="req">(required)</span></legend>' in page
        assert f'<p class="helptext">{escape(field.help)}</p>' in page
        for code, choice in field.choices:
            assert f'name="field-{field.code}" value="{code}"> {escape(choice)}</label>' in page
    assert "3: highly relevant" in page and "0: citations wrong or missing" in page

    form = {**hidden_inputs(page), **{f"field-{code}": str(value) for code, value in WEBGLM.items()}}
    response = client.post(reverse("annotation:task_submit", args=[assignment.pk]), form)
    assert response.status_code == 302 and response.url == reverse("annotation:next_task")
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert assignment.response == CASES["rating:webglm"][1]


def test_an_incomplete_webglm_submit_names_the_missing_criteria_and_stores_nothing(client_for, bob):
    client = client_for(bob)
    assignment, page = webglm_task_page(client)
    form = {**hidden_inputs(page), "field-fluency": "3", "field-correctness": "7"}
    refused = client.post(reverse("annotation:task_submit", args=[assignment.pk]), form, follow=True)
    shown = refused.content.decode()
    assert "“References: relevancy” is required." in shown
    assert "Answer: correctness: choose one of 0: wrong" in shown
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED and assignment.response is None
    assert assignment.draft["fluency"] == "3"  # kept as the draft
