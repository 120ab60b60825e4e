"""Bad input is a clear 4xx that writes nothing, never a 500: quote URLs, NUL and sizes in task forms (one
validator for the pages and the API), deep JSON, question-import lengths and numbers, query parameters and
ids, and the size of uploads (checked before reading)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.feedback import assignment as work
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import Answer, Assignment, AssignmentStatus, FeedbackBatch, Question
from annotation.questions.formats import QuestionFileError
from annotation.questions.service import import_questions
from core.inputs import JSONInputError, has_nul, json_depth, loads

pytestmark = pytest.mark.django_db
DEEP = "[" * 5000 + "]" * 5000


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def answer_row(text: str, url: str = "https://en.wikipedia.org/wiki/Rayleigh_scattering") -> dict:
    return {
        "question": "Why is the sky blue?",
        "answer": text,
        "quotes": [{"title": "Rayleigh scattering", "url": url, "extract": "scattering of light"}],
    }


def lines(*rows: dict) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode()


@pytest.fixture
def task(bob) -> Assignment:
    """Bob's leased WebGPT comparison of two answers with one quote each."""
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    answers = import_answers(lines(answer_row("Rayleigh scattering [1]."), answer_row("Dust [1].")))
    settings = BatchSettings("sky", "webgpt_comparison", required_probability=0.0)
    create_feedback_batch(None, settings, group_answers(answers, "webgpt_comparison"))
    return work.next_assignment(bob)


def page_fields(client, task) -> dict[str, str]:
    """The hidden fields of the task page's form (the submit key, and the version where the page has one)."""
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    return dict(re.findall(r'name="(submit_key|version)" value="([^"]*)"', html))


def post_task(client, task, name: str, data: dict):
    """A task form posted as the page would, following a refusal back to the task page that shows it."""
    return client.post(
        reverse(f"annotation:{name}", args=[task.pk]), {**page_fields(client, task), **data}, follow=True
    )


# Item 12: deep JSON, odd numbers and NUL at the parser


def test_json_limits_say_what_is_wrong_and_never_recurse():
    for text, reason in [
        (DEEP, "nested more than"),
        ("[" * 40 + "]" * 40, "nested more than 32"),
        ('{"x": 1e999}', "too large"),
        ('{"x": NaN}', "not a number"),
        ('{"x": -Infinity}', "not a number"),
        ('{"x": ' + "9" * 5000 + "}", "more than 4300 digits"),
        ("{nope", "invalid JSON"),
    ]:
        with pytest.raises(JSONInputError, match=reason):
            loads(text)
    assert loads('{"a": [1, 2.5, "b"]}') == {"a": [1, 2.5, "b"]}
    deep: list = []
    for _ in range(100_000):  # far deeper than any recursion limit: the walks are iterative
        deep = [deep]
    assert json_depth(deep) == 100_001 and not has_nul(deep)
    assert has_nul([[[{"k": ["a\x00"]}]]]) and has_nul({"a\x00": 1})


def test_deep_or_odd_json_to_the_api_is_a_400(task, alice, bob):
    client = api(bob)
    for user, url in (
        (bob, f"/api/tasks/{task.pk}/draft"),
        (bob, f"/api/tasks/{task.pk}/submit"),
        (bob, f"/api/tasks/{task.pk}/skip"),
        (alice, "/api/batches"),
        (alice, "/api/exports"),
    ):
        for body in (DEEP, '{"draft": {"x": 1e999}}', '{"draft": {"x": NaN}}'):
            response = api(user).post(url, body, content_type="application/json")
            assert response.status_code == 400, (url, body[:30], response.content[:200])
            assert "JSON parse error" in response.json()["detail"]
    nul = client.post(f"/api/tasks/{task.pk}/draft", {"draft": {"comment": "a\x00b"}}, format="json")
    assert (
        nul.status_code == 400 and "NUL" in nul.json()["detail"] and "draft.comment" in nul.json()["detail"]
    )
    task.refresh_from_db()
    assert task.draft in ({}, None)


def test_deep_claims_on_the_task_page_are_refused(task, bob, client):
    client.force_login(bob)
    data = {"rating-overall": "a_better", "claims-A": DEEP}
    assert post_task(client, task, "task_draft", data).status_code == 400
    page = post_task(client, task, "task_submit", data)
    assert "The claims must be a list of marked spans." in page.content.decode()
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED and task.draft in ({}, None)


# Item 11: NUL and sizes in the task forms: the page runs the API's validator


@pytest.mark.parametrize(
    ("comment", "reason"),
    [("fine\x00", "may not contain NUL characters"), ("x" * 4_000_000, "This text is too long")],
    ids=["nul", "4MB"],
)
def test_the_page_and_the_api_refuse_the_same_comment_and_store_nothing(task, bob, client, comment, reason):
    client.force_login(bob)
    data = {"rating-overall": "a_better", "comment": comment}
    draft = post_task(client, task, "task_draft", data)
    assert draft.status_code == 400 and reason in draft.content.decode()
    page = post_task(client, task, "task_submit", data)
    assert reason in page.content.decode()
    body = {"response.comment": comment, "key": str(uuid.uuid4())}  # a form body: JSON refuses NUL earlier
    refused = api(bob).post(f"/api/tasks/{task.pk}/submit", body, format="multipart")
    assert refused.status_code == 400 and reason in json.dumps(refused.json()), refused.json()
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED and task.draft in ({}, None) and task.response in ({}, None)


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("tired\x00", "may not contain NUL characters"),
        ("x" * 1001, "at most 1000"),
        ("x" * 4_000_000, "at most 1000"),
        ("   ", "Say why you skip this task."),
    ],
    ids=["nul", "1001", "4MB", "blank"],
)
def test_the_page_and_the_api_refuse_the_same_skip_reasons(task, bob, client, reason, message):
    client.force_login(bob)
    page = client.post(reverse("annotation:task_skip", args=[task.pk]), {"reason": reason}, follow=True)
    assert message in page.content.decode()
    refused = api(bob).post(f"/api/tasks/{task.pk}/skip", {"reason": reason}, format="multipart")
    assert refused.status_code == 400 and message in refused.json()["reason"][0]
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LEASED and not task.skip_reason
    assert api(bob).post(f"/api/tasks/{task.pk}/skip", {"reason": "y" * 1000}).status_code == 200


def test_a_nul_in_a_demonstration_says_what_is_wrong(freshwiki, dana, client):
    from annotation.demonstrations import service
    from annotation.models import Episode, EpisodeStatus

    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    episode = service.next_episode(dana)
    for command in ("Search AFL Grand Final", "Clicked on link 0", "Quote: won by Geelong", "End: Answer"):
        episode = service.record_action(episode.pk, dana, command, uuid.uuid4(), episode.version).episode
    assert episode.status == EpisodeStatus.ANSWERING
    client.force_login(dana)
    url = reverse("annotation:episode", args=[episode.pk])
    draft = client.post(url + "draft/", {"answer": "Geelong\x00"})
    assert draft.status_code == 400 and "may not contain NUL" in draft.content.decode()
    page = client.post(url + "answer/", {"answer": "Geelong won [1].\x00"}, follow=True).content.decode()
    assert "The answer may not contain NUL characters" in page and "too long" not in page
    for action, field in (("note", "note"), ("skip", "reason")):
        page = client.post(url + f"{action}/", {field: "why\x00"}, follow=True).content.decode()
        assert "may not contain NUL characters" in page, action
    episode = Episode.objects.get(pk=episode.pk)
    assert episode.status == EpisodeStatus.ANSWERING and episode.answer == "" and "\x00" not in episode.note


# Item 10: quote URLs are http(s) or text


def test_an_answers_file_with_a_quote_url_that_is_not_http_is_refused_with_its_line():
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    for url in (
        "javascript:alert(1)",
        "data:text/html,<b>x</b>",
        "/relative",
        "ftp://example.org/x",
        "http://",
    ):
        with pytest.raises(QuestionFileError, match="line 2: quote 0: 'url' must be an http"):
            import_answers(lines(answer_row("Fine [1]."), answer_row("Bad [1].", url=url)))
    for question_id in (10**30, 0, -1, True, "12"):
        row = {"question_id": question_id, "answer": "x"}
        with pytest.raises(QuestionFileError, match="line 1: 'question_id' must be"):
            import_answers(lines(row))
    assert not Answer.objects.exists()
    (plain, web) = import_answers(
        lines(answer_row("No link [1].", url=""), answer_row("Link [1].", url="HTTPS://a.org"))
    )
    assert plain.quotes[0]["url"] == "" and web.quotes[0]["domain"] == "a.org"


def test_a_stored_quote_url_that_is_not_http_is_shown_as_text(task, bob, client):
    answer = Answer.objects.get(pk=task.order[0])
    answer.quotes = [{"title": "", "url": "javascript:alert(1)", "domain": "", "extract": "x"}]
    answer.save()
    client.force_login(bob)
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert "javascript:alert(1)" in html and 'href="javascript' not in html
    assert 'href="https://en.wikipedia.org/wiki/Rayleigh_scattering"' in html  # the other answer's link


# Item 14: query parameters and ids in paths

THIRTY_DIGITS = "9" * 30


def test_query_parameters_that_are_not_what_they_name_are_a_400(alice):
    client = api(alice)
    for query in ("question=²", f"question={THIRTY_DIGITS}", "question=-1", "question=1.0"):
        response = client.get(f"/api/answers?{query}")
        assert response.status_code == 400 and "must be an id" in response.json()["question"][0], query
    assert client.get("/api/answers?question=5").status_code == 200
    for query in ("split=bc%00", "split=nope", "dataset=a%00", "q=" + "x" * 201):
        response = client.get(f"/api/questions?{query}")
        assert response.status_code == 400, (query, response.content[:200])
    assert client.get("/api/questions?split=bc&dataset=x&q=sky").status_code == 200


def test_query_parameters_on_pages_never_give_a_500(alice, client):
    client.force_login(alice)
    for url in (
        "/console/questions/?split=bc%00&q=%00&page=²",
        "/console/training/new/?export=²&kind=%00",
        f"/console/training/new/?export={THIRTY_DIGITS}",
        "/console/training/compare/?run=²",
        f"/console/training/compare/?run={THIRTY_DIGITS}",
        f"/console/training/?page={THIRTY_DIGITS}",
    ):
        assert client.get(url).status_code in (200, 400), url


def test_gold_pairs_with_digits_that_are_not_ascii_are_refused():
    from annotation.feedback.batches import BatchError, parse_gold_pairs

    with pytest.raises(BatchError, match="gold line 2"):
        parse_gold_pairs("1 > 2\n1 > ²\n")


def test_a_thirty_digit_id_in_any_path_is_a_404(django_user_model, client):
    """On every route with an id, for a user who has every role (so that only the id decides)."""
    from tests.conftest import make_user
    from tests.routes import all_routes

    everyone = make_user(django_user_model, "erin", "researcher", "labeler", "demonstrator")
    client.force_login(everyone)
    checked = 0
    for route in all_routes():
        if "pk" not in route.params:
            continue
        url = route.url(pk=int(THIRTY_DIGITS))
        for method in route.methods:
            response = client.generic(method, url)
            assert response.status_code == 404, (method, url, response.status_code)
            checked += 1
    assert checked >= 20


# Item 15: uploads: the size first, then a chunk at a time


class UnreadableUpload(io.BytesIO):
    """An upload too large to read: reading it at all fails the test."""

    size = 10**9

    def read(self, *args):
        raise AssertionError("the file was read before its size was checked")


def test_an_import_checks_the_size_before_reading_the_file():
    for importer in (import_answers, lambda f: import_questions(f, filename="q.jsonl")):
        with pytest.raises(QuestionFileError, match="larger than 52428800 bytes"):
            importer(UnreadableUpload())


def test_uploads_over_the_limit_are_a_400_and_create_nothing(alice, client, settings):
    settings.QUESTION_IMPORT_MAX_BYTES = settings.ANSWERS_IMPORT_MAX_BYTES = 1000
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    big = lines(*[answer_row(f"Answer {n} [1].") for n in range(20)])
    assert len(big) > 1000
    batch = {"name": "b", "template": "webgpt_comparison", "source": "file"}
    refused = api(alice).post(
        "/api/batches", {**batch, "answers_file": SimpleUploadedFile("a.jsonl", big)}, format="multipart"
    )
    assert refused.status_code == 400 and "larger than 1000 bytes" in refused.json()["reason"]
    questions = b"\n".join(b'{"question": "Why is %d blue?"}' % n for n in range(60))
    refused = api(alice).post(
        "/api/questions/import", {"file": SimpleUploadedFile("q.jsonl", questions)}, format="multipart"
    )
    assert refused.status_code == 400 and "larger than 1000 bytes" in refused.json()["reason"]
    client.force_login(alice)
    page = client.post(reverse("questions:import"), {"file": SimpleUploadedFile("q.jsonl", questions)})
    assert page.status_code == 400 and "larger than 1000 bytes" in page.content.decode()
    page = client.post(
        reverse("console:feedback_create"),
        {**batch, "overlap": 1, "required_probability": 0.1, "lease_minutes": 30, "revision_minutes": 60,
         "answers_file": SimpleUploadedFile("a.jsonl", big)},
    )  # fmt: skip
    assert page.status_code == 400 and "larger than 1000 bytes" in page.content.decode()
    assert (
        Answer.objects.count() == 0 and Question.objects.count() == 1 and not FeedbackBatch.objects.exists()
    )


def test_files_read_a_few_bytes_at_a_time_import_exactly_as_whole(monkeypatch):
    from annotation.questions import formats
    from tests.conftest import QUESTION_DATA

    monkeypatch.setattr(formats, "CHUNK_BYTES", 7)  # lines, UTF-8 sequences and CSV rows span chunks
    data = (QUESTION_DATA / "TruthfulQA.csv").read_bytes()
    report = import_questions(io.BytesIO(data), filename="TruthfulQA.csv")
    assert (report.created_count, report.sha256) == (790, hashlib.sha256(data).hexdigest())
    import_questions(io.BytesIO(b'{"question": "Why is the sky blue?"}'), filename="q.jsonl")
    answers = import_answers(io.BytesIO(lines(answer_row("Ünïcode [1]."), answer_row("Zwei [1]."))))
    assert [a.text for a in answers] == ["Ünïcode [1].", "Zwei [1]."]


# Duplicated work


def test_the_api_task_view_computes_the_required_fields_once(task, bob, monkeypatch):
    from annotation.api import tasks as task_api
    from annotation.feedback import presenter, validation

    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return validation.required_fields(*args, **kwargs)

    for module in (presenter, task_api):  # wherever the view could reach it (it was computed three times)
        if hasattr(module, "required_fields"):
            monkeypatch.setattr(module, "required_fields", counted)
    response = api(bob).get(f"/api/tasks/{task.pk}")
    assert response.status_code == 200 and response.json()["required"] == ["ratings.overall"]
    assert len(calls) == 1
