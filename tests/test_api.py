"""The REST API: token auth, the same object permissions as the pages, blind tasks, batches, exports,
question imports, the OpenAPI schema and its docs page, and no 5xx on any body."""

from __future__ import annotations

import hashlib
import json
import re
import uuid

import pytest
import yaml
from django.core.management import call_command
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from annotation.demonstrations import service as demos
from annotation.exports.service import run_export_job
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    Episode,
    Export,
    FeedbackBatch,
    Question,
    QuestionImport,
)
from annotation.questions.service import import_questions
from core.api_tokens import issue
from core.models import AuditEntry
from tests.conftest import demo_production_batches, make_user

pytestmark = pytest.mark.django_db


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def batches(freshwiki, demo_site):
    FeedbackBatch.objects.update(required_probability=0.0)  # only the always-required fields
    # The demo's production batches, one per template and preset (its screening test and gold checks aside).
    production = demo_production_batches()
    return {b.template + (f":{b.preset}" if b.preset else ""): b for b in production}


def only(batches: dict, key: str) -> FeedbackBatch:
    FeedbackBatch.objects.exclude(pk=batches[key].pk).update(is_active=False)
    FeedbackBatch.objects.filter(pk=batches[key].pk).update(is_active=True)
    return batches[key]


@pytest.fixture
def episode(freshwiki, dana) -> Episode:
    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    episode = demos.next_episode(dana)
    demos.record_action(episode.pk, dana, "Search AFL Grand Final", uuid.uuid4(), episode.version)
    return episode


def test_token_auth_works_and_anonymous_is_refused(alice):
    token = issue(alice)
    client = APIClient()
    assert client.get("/api/questions").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.get("/api/questions")
    assert response.status_code == 200 and response.json()["count"] == 0
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get("/api/questions").status_code == 401


def test_lists_are_for_their_roles_and_details_of_hidden_objects_are_404(
    batches, episode, alice, bob, dana, charlie, django_user_model, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    export = Export.objects.create(export_format="bc-pairs")
    run_export_job(export.pk)
    answer = Answer.objects.first()
    details = [
        f"/api/questions/{episode.question_id}",
        f"/api/answers/{answer.pk}",
        f"/api/batches/{FeedbackBatch.objects.first().pk}",
        f"/api/exports/{export.pk}",
        f"/api/exports/{export.pk}/download",
        f"/api/episodes/{episode.pk}",
    ]
    for url in details:
        assert api(alice).get(url).status_code == 200, url
        assert api(charlie).get(url).status_code == 404, url
        assert api(bob).get(url).status_code == 404, url
        assert api().get(url).status_code == 401, url
    for url in ("/api/questions", "/api/answers", "/api/batches", "/api/exports", "/api/episodes"):
        assert api(charlie).get(url).status_code == 403, url
        assert api(bob).get(url).status_code == 403, url
        assert api(alice).get(url).status_code == 200, url
    # Demonstrators: their own episodes only.
    other = make_user(django_user_model, "erin", "demonstrator")
    assert api(other).get(f"/api/episodes/{episode.pk}").status_code == 404
    assert api(other).get("/api/episodes").json()["count"] == 0
    mine = api(dana).get("/api/episodes").json()
    assert [e["id"] for e in mine["results"]] == [episode.pk]
    detail = api(dana).get(f"/api/episodes/{episode.pk}").json()
    assert detail["actions"][0]["command"] == "Search AFL Grand Final"
    assert {"valid", "message", "observation_before"} <= set(detail["actions"][0]) and "quotes" in detail
    # A task is its labeler's only; the task API is for labelers (others: 403, like the task pages' posts).
    task = api(bob).post("/api/tasks/next").json()
    other_labeler = make_user(django_user_model, "lena", "labeler")
    for user, refused in ((other_labeler, 404), (charlie, 403), (dana, 403)):
        assert api(user).get(f"/api/tasks/{task['id']}").status_code == refused
        draft = api(user).post(f"/api/tasks/{task['id']}/draft", {"draft": {}}, format="json")
        assert draft.status_code == refused
    assert api(charlie).post("/api/tasks/next").status_code == 403


def _keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_a_labeler_gets_a_blind_task_and_submits_it_once(batches, bob):
    only(batches, "rating:truthfulqa")
    client = api(bob)
    response = client.post("/api/tasks/next")
    assert response.status_code == 201
    task = response.json()
    assignment = Assignment.objects.get(labeler=bob)
    assert task["id"] == assignment.pk and task["question"] == assignment.item.question.text
    assert [a["slot"] for a in task["answers"]] == ["1"]
    assert set(task["answers"][0]) == {"slot", "text", "quotes"}
    assert not {"source", "source_kind", "episode", "order"} & _keys(task)
    for answer in Answer.objects.filter(pk__in=assignment.order):
        assert answer.source["dataset"] not in response.content.decode()
    assert isinstance(task["required"], list) and task["required_labels"]

    assert (
        client.post(
            f"/api/tasks/{task['id']}/draft", {"draft": {"truthful": "yes"}}, format="json"
        ).status_code
        == 200
    )
    assignment.refresh_from_db()
    assert assignment.draft == {"truthful": "yes"}

    bad = client.post(
        f"/api/tasks/{task['id']}/submit",
        {"response": {"truthful": "perhaps"}, "key": str(uuid.uuid4())},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["complete"] is False
    assert "truthful" in bad.json()["errors"]
    body = {"response": {"truthful": "yes", "informative": "no"}, "key": str(uuid.uuid4())}
    first = client.post(f"/api/tasks/{task['id']}/submit", body, format="json")
    assert first.status_code == 200
    assert first.json() == {"complete": True, "late": False, "flags": [], "repeated": False}
    again = client.post(f"/api/tasks/{task['id']}/submit", body, format="json")
    assert again.status_code == 200 and again.json()["repeated"] is True
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED and assignment.revisions.count() == 0
    assert assignment.response["informative"] == "no"


def test_a_comparison_task_reports_errors_by_field_path(batches, bob):
    only(batches, "webgpt_comparison")
    client = api(bob)
    task = client.post("/api/tasks/next").json()
    assert [a["slot"] for a in task["answers"]] == ["A", "B"] and "ratings.overall" in task["required"]
    response = {"ratings": {"overall": "a_better"}, "answers": {"A": {"claims": [{"start": 5, "end": 1}]}}}
    bad = client.post(
        f"/api/tasks/{task['id']}/submit", {"response": response, "key": str(uuid.uuid4())}, format="json"
    )
    assert bad.status_code == 400
    assert any(path.startswith("answers.A.claims.0") for path in bad.json()["errors"])
    wrong = client.post(f"/api/tasks/{task['id']}/draft", {"draft": {"ratings": ["a_better"]}}, format="json")
    assert wrong.status_code == 400 and "ratings" in wrong.json()["draft"]
    assert client.get(f"/api/tasks/{task['id']}").status_code == 200  # the stored draft still renders
    assert client.post(f"/api/tasks/{task['id']}/submit", {"key": "x"}, format="json").json().keys() == {
        "response",
        "key",
    }


def test_a_labeler_skips_their_own_task_in_progress_with_a_reason(batches, bob, charlie, django_user_model):
    only(batches, "rating:truthfulqa")
    client = api(bob)
    done = client.post("/api/tasks/next").json()
    answer = {"response": {"truthful": "yes", "informative": "yes"}, "key": str(uuid.uuid4())}
    assert client.post(f"/api/tasks/{done['id']}/submit", answer, format="json").status_code == 200
    submitted = client.post(f"/api/tasks/{done['id']}/skip", {"reason": "changed my mind"}, format="json")
    assert submitted.status_code == 409 and "in progress" in submitted.json()["detail"]

    task = client.post("/api/tasks/next").json()
    url = f"/api/tasks/{task['id']}/skip"
    for outsider, refused in ((make_user(django_user_model, "lena", "labeler"), 404), (charlie, 403)):
        assert api(outsider).post(url, {"reason": "not mine"}, format="json").status_code == refused
    assert client.post(url, {}, format="json").json() == {"reason": ["This field is required."]}
    blank = client.post(url, {"reason": "   "}, format="json")
    assert blank.status_code == 400 and set(blank.json()) == {"reason"}
    skipped = client.post(url, {"reason": " I cannot judge medical claims "}, format="json")
    assert skipped.status_code == 200 and skipped.json() == {"status": "skipped"}
    assignment = Assignment.objects.get(pk=task["id"])
    assert assignment.status == AssignmentStatus.SKIPPED
    assert assignment.skip_reason == "I cannot judge medical claims"
    assert client.post(url, {"reason": "again"}, format="json").status_code == 409
    assert client.post("/api/tasks/next").json().get("id") != task["id"]  # never handed to him again


def test_when_no_task_is_left_next_is_204_and_leases_nothing(batches, bob):
    batch = only(batches, "rating:truthfulqa")
    batch.items.update(is_open=False)  # every slot taken by others
    response = api(bob).post("/api/tasks/next")
    assert (response.status_code, response.content) == (204, b"")
    assert not Assignment.objects.filter(labeler=bob).exists()


def test_a_researcher_creates_a_batch_and_an_export_and_downloads_it(batches, alice, bob, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    client = api(alice)
    body = {"name": "API batch", "template": "webgpt_comparison", "source": "bank", "overlap": 2}
    created = client.post("/api/batches", body, format="json")
    assert created.status_code == 201, created.json()
    batch = created.json()
    assert batch["progress"]["items"] > 0 and batch["progress"]["needed"] == 2 * batch["progress"]["items"]
    assert client.get(f"/api/batches/{batch['id']}").json()["name"] == "API batch"
    refused = client.post("/api/batches", {"template": "rating", "source": "nowhere"}, format="json")
    assert refused.status_code == 400 and {"name", "source"} <= set(refused.json())
    no_preset = client.post("/api/batches", {**body, "template": "rating"}, format="json")
    assert no_preset.status_code == 400 and "preset" in no_preset.json()

    only(batches, "rating:truthfulqa")
    task = api(bob).post("/api/tasks/next").json()
    answer = {"response": {"truthful": "yes", "informative": "yes"}, "key": str(uuid.uuid4())}
    assert api(bob).post(f"/api/tasks/{task['id']}/submit", answer, format="json").status_code == 200

    queued = client.post(
        "/api/exports",
        {"format": "comparisons-full", "batch": batches["rating:truthfulqa"].pk},
        format="json",
    )
    assert queued.status_code == 202 and queued.json()["status"] == "queued"
    export_id = queued.json()["id"]
    assert client.get(f"/api/exports/{export_id}/download").status_code == 404  # not finished
    run_export_job(export_id)
    detail = client.get(f"/api/exports/{export_id}").json()
    assert detail["status"] == "done" and detail["row_count"] == 1
    download = client.get(f"/api/exports/{export_id}/download", HTTP_ACCEPT="application/octet-stream")
    content = b"".join(download.streaming_content)
    assert download.status_code == 200 and hashlib.sha256(content).hexdigest() == detail["sha256"]
    assert json.loads(content)["response"]["truthful"] == "yes"
    assert client.post("/api/exports", {"format": "csv", "batch": 10**6}, format="json").json().keys() == {
        "format",
        "batch",
    }


def test_a_researcher_creates_a_batch_from_an_answers_file_all_or_nothing(alice, bob, charlie):
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    rows = [
        {"question": "Why is the sky blue?", "answer": text, "quotes": [], "source": {"model": "m1"}}
        for text in ("Rayleigh scattering.", "It reflects the sea.", "Dust in the air.")
    ]
    good = "\n".join(json.dumps(row) for row in rows).encode()
    form = {"name": "from a file", "template": "webgpt_comparison", "source": "file", "overlap": "2"}

    def create(user, data: bytes | None, **changes):
        body = {**form, **changes} | ({"answers_file": _upload("answers.jsonl", data)} if data else {})
        return api(user).post("/api/batches", body, format="multipart")

    created = create(alice, good)
    assert created.status_code == 201, created.json()
    assert created.json()["name"] == "from a file" and created.json()["progress"]["items"] == 3  # every pair
    assert Answer.objects.filter(source__model="m1").count() == 3

    bad_lines = {
        b'{"question": "Why is the sky blue?", "answer": " "}': "'answer' must be a non-empty string",
        b'{"question": "Why is grass green?", "answer": "Chlorophyll."}': "not in the bank",
        b'{"question": "Why is the sky blue?", "answer": "a\\u0000b"}': "NUL",
        b"{nope": "invalid JSON",
        b"\xff": "not valid UTF-8",
    }
    for line, reason in bad_lines.items():
        refused = create(alice, good + b"\n" + line)
        assert refused.status_code == 400 and refused.json()["line"] == 4, (line, refused.json())
        assert (
            reason in refused.json()["reason"] and "Nothing was created" in refused.json()["answers_file"][0]
        )
    assert Answer.objects.count() == 3 and FeedbackBatch.objects.count() == 1  # nothing of the bad files
    assert create(alice, None).json() == {
        "answers_file": ["Choose the answers file (the source is an answers file)."]
    }  # the same check and message as the console form and the command (tests/test_feedback_batches.py)
    assert set(create(alice, good, source="bank").json()) == {"answers_file"}
    assert create(alice, good, template="ranking").json() == {
        "non_field_errors": [
            "no items: the answers file give 3 answers on 1 question, and an item needs 4 answers to the "
            "same question"
        ]
    }  # the service's rules hold: three answers are too few to rank, and nothing was imported
    assert Answer.objects.count() == 3
    assert create(bob, good).status_code == 403 and create(charlie, good).status_code == 403
    assert api().post("/api/batches", {**form, "answers_file": _upload("a.jsonl", good)}).status_code == 401


def test_question_import_and_list_filters(alice, bob):
    client = api(alice)
    good = b'{"question": "Why is the sky blue?"}\n{"question": "Why is grass green?"}\n'
    response = client.post(
        "/api/questions/import", {"file": _upload("q.jsonl", good), "dataset": "mine"}, format="multipart"
    )
    assert response.status_code == 201 and response.json()["created_count"] == 2
    bad = client.post(
        "/api/questions/import",
        {"file": _upload("bad.jsonl", b'{"question": "ok"}\n{nope\n')},
        format="multipart",
    )
    assert bad.status_code == 400 and bad.json()["line"] == 2 and bad.json()["reason"]
    listed = client.get("/api/questions", {"dataset": "mine"}).json()
    assert listed["count"] == 2 and {q["dataset"] for q in listed["results"]} == {"mine"}
    assert client.get("/api/questions", {"dataset": "other"}).json()["count"] == 0
    assert api(bob).post("/api/questions/import", {"file": _upload("q.jsonl", good)}).status_code == 403


def _upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def test_the_schema_renders_and_the_docs_page_loads_under_the_csp(alice, client_for, tmp_path):
    # Every endpoint described without a guess: a warning (an unknown serializer, a clashing name) fails.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    client = client_for(alice)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    paths = yaml.safe_load(schema.content)["paths"]
    assert {
        "/api/tasks/next",
        "/api/tasks/{id}/submit",
        "/api/tasks/{id}/skip",
        "/api/exports/{id}/download",
    } <= set(paths)
    assert client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["openapi"].startswith("3.")
    page = client.get("/api/docs/")
    html = page.content.decode()
    assert page.status_code == 200 and "swagger-ui" in html
    sources = re.findall(r'<script[^>]*src="([^"]+)"', html) + re.findall(r'<link[^>]*href="([^"]+)"', html)
    assert sources and all(src.startswith("/") and not src.startswith("//") for src in sources), sources
    assert "<script>" not in html and "<style" not in html  # nothing inline: the CSP would refuse it
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    init = client.get(re.findall(r'<script[^>]*src="([^"]+)"', html)[-1].replace("&amp;", "&"))
    assert init.status_code == 200 and "/api/schema/" in init.content.decode()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = st.sampled_from(
    ["name", "template", "preset", "source", "overlap", "required_probability", "always_required",
     "lease_seconds", "format", "batch", "split", "include_flagged", "response", "key", "draft"]
)  # fmt: skip
SUBMISSIONS = st.fixed_dictionaries(
    {
        "response": st.dictionaries(st.sampled_from(["ratings", "answers", "flags", "comment"]), JSON),
        "key": st.uuids(),
    }
).map(lambda body: {**body, "key": str(body["key"])})
BODIES = (
    JSON
    | st.dictionaries(FIELDS, JSON, max_size=6)
    | SUBMISSIONS
    | st.builds(dict, batch=st.integers(), format=st.just("bc-pairs"), overlap=st.integers())
)
RAW = st.text(max_size=40) | st.binary(max_size=40).map(lambda b: b.decode("latin-1"))


def stored(task_pk: int) -> tuple:
    """What a refused request must leave as it was: the rows of every kind a write endpoint creates, the
    audit log, and the task's state (its draft aside: an incomplete submit keeps it, by design)."""
    counts = tuple(
        model.objects.count()
        for model in (FeedbackBatch, Export, Question, QuestionImport, Answer, Assignment)
    )
    task = Assignment.objects.values("status", "response", "skip_reason", "submit_key", "version").get(
        pk=task_pk
    )
    return counts, AuditEntry.objects.count(), task


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES, raw=RAW)
def test_any_body_to_a_write_endpoint_is_never_a_5xx_and_a_refusal_writes_nothing(
    batches, alice, bob, body, raw
):
    only(batches, "webgpt_comparison")
    task = Assignment.objects.filter(labeler=bob).first() or Assignment.objects.get(
        pk=api(bob).post("/api/tasks/next").json()["id"]
    )
    calls = [
        (alice, "/api/batches"),
        (alice, "/api/exports"),
        (alice, "/api/questions/import"),
        (bob, "/api/tasks/next"),
        (bob, f"/api/tasks/{task.pk}/submit"),
        (bob, f"/api/tasks/{task.pk}/draft"),
        (bob, f"/api/tasks/{task.pk}/skip"),
    ]
    for user, url in calls:
        client = api(user)
        for sent in ({"data": body, "format": "json"}, {"data": raw, "content_type": "application/json"}):
            before = stored(task.pk)
            response = client.post(url, **sent)
            assert response.status_code < 500, (url, sent, response.content)
            if response.status_code >= 400:
                assert stored(task.pk) == before, (url, sent, response.content)
    answers = f"{json.dumps(body)}\n{raw}".encode()  # any lines as an answers file
    upload = {"name": "h", "template": "webgpt_comparison", "source": "file"}
    before = stored(task.pk)
    uploaded = api(alice).post(
        "/api/batches", {**upload, "answers_file": _upload("a.jsonl", answers)}, format="multipart"
    )
    assert uploaded.status_code < 500, (answers, uploaded.content)
    if uploaded.status_code >= 400:
        assert stored(task.pk) == before, (answers, uploaded.content)
