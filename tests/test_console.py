"""The researcher console: bank summary, importing through the browser, question list filters, pausing and
starting a feedback batch."""

import re
from collections import Counter

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import Answer, Assignment, FeedbackBatch, Question, QuestionImport, SourceKind
from annotation.questions.service import import_questions
from core.models import AuditEntry, WorkerPing
from tests.conftest import QUESTION_DATA, make_user

pytestmark = pytest.mark.django_db


def upload(name: str, data: bytes, **fields):
    return {"file": SimpleUploadedFile(name, data), **fields}


def test_console_summarises_the_bank_per_dataset_and_split(client_for, alice):
    import_questions((QUESTION_DATA / "TruthfulQA.csv").read_bytes(), filename="TruthfulQA.csv")
    response = client_for(alice).get(reverse("console:home"))
    assert response.status_code == 200
    rows = response.context["bank_rows"]
    assert [row["dataset"] for row in rows] == ["truthfulqa"]
    assert sum(rows[0]["counts"]) == rows[0]["total"] == 790
    assert response.context["bank_total"] == 790


def test_a_researcher_imports_a_file_from_the_console(client_for, alice):
    data = (QUESTION_DATA / "web_questions.jsonl").read_bytes()
    response = client_for(alice).post(reverse("questions:import"), upload("web_questions.jsonl", data))
    report = QuestionImport.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("questions:import_detail", args=[report.pk])
    assert (report.created_by, report.created_count, report.duplicate_count) == (alice, 381, 19)
    entry = AuditEntry.objects.get(action="questions.import")
    assert (entry.actor, entry.object_id, entry.data) == (
        alice,
        str(report.pk),
        {"created": 381, "duplicates": 19},
    )
    page = client_for(alice).get(response.url)
    assert "same question as line" in page.content.decode()


def test_a_bad_upload_shows_the_line_and_imports_nothing(client_for, alice):
    data = b'{"question": "fine?"}\n{"question": "oops"\n'
    response = client_for(alice).post(reverse("questions:import"), upload("mine.jsonl", data))
    assert response.status_code == 400
    assert "mine.jsonl: line 2: invalid JSON" in response.content.decode()
    assert Question.objects.count() == QuestionImport.objects.count() == 0


def test_the_import_form_validates_its_fields(client_for, alice):
    response = client_for(alice).post(
        reverse("questions:import"), upload("x.jsonl", b"{}", dataset="not a slug!", file_format="yaml")
    )
    assert response.status_code == 400
    assert set(response.context["import_form"].errors) == {"dataset", "file_format"}
    assert client_for(alice).post(reverse("questions:import"), {}).status_code == 400


def test_question_list_filters_and_rejects_bad_filters(client_for, alice):
    import_questions((QUESTION_DATA / "TruthfulQA.csv").read_bytes(), filename="TruthfulQA.csv")
    client = client_for(alice)
    response = client.get(reverse("questions:list"), {"q": "watermelon"})
    assert response.context["page"].paginator.count == 1
    response = client.get(reverse("questions:list"), {"split": "bc", "dataset": "truthfulqa", "page": "2"})
    assert response.context["page"].paginator.count == Question.objects.filter(split="bc").count()
    assert response.context["page"].number == 2
    response = client.get(reverse("questions:list"), {"split": "nonsense", "page": "abc"})
    assert response.status_code == 200
    assert "split" in response.context["form"].errors


def test_checking_workers_sends_one_ping_per_queue_after_commit(
    client_for, alice, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_for(alice).post(reverse("console:check_workers"), headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert sorted(WorkerPing.objects.values_list("queue", flat=True)) == sorted(settings.CELERY_QUEUES)
    assert len(callbacks) == len(settings.CELERY_QUEUES)  # enqueued only once the rows are committed
    assert "waiting" in response.content.decode()


def sky_batch(researcher) -> FeedbackBatch:
    """An active rating batch of one item."""
    question = import_questions(b'{"question": "Is the sky blue?"}', filename="q.jsonl").questions.get()
    answer = Answer.objects.create(question=question, text="Yes.", source_kind=SourceKind.MODEL)
    config = BatchSettings(name="sky", template="rating", preset="truthfulqa")
    return create_feedback_batch(researcher, config, [[answer]])


def test_pausing_a_batch_stops_handing_out_its_work_and_starting_it_resumes(client_for, alice, bob):
    batch = sky_batch(alice)
    state, page = (
        reverse(f"console:{name}", args=[batch.pk]) for name in ("feedback_state", "feedback_batch")
    )

    paused = client_for(alice).post(state, {"state": "paused"}, follow=True)
    assert paused.redirect_chain == [(page, 302)]
    assert [str(m) for m in paused.context["messages"]] == ["Batch paused."]
    html = paused.content.decode()
    assert "<dt>State</dt><dd>paused</dd>" in html and "Start batch</button>" in html
    assert FeedbackBatch.objects.get().is_active is False
    assert client_for(bob).post(reverse("annotation:task_start")).url == reverse("annotation:next_task")
    assert not Assignment.objects.exists()  # nothing is handed out from a paused batch

    started = client_for(alice).post(state, {"state": "active"}, follow=True)
    assert [str(m) for m in started.context["messages"]] == ["Batch started."]
    html = started.content.decode()
    assert "<dt>State</dt><dd>active</dd>" in html and "Pause batch</button>" in html
    response = client_for(bob).post(reverse("annotation:task_start"))
    task = Assignment.objects.get(labeler=bob)
    assert task.item.batch == batch and response.url == reverse("annotation:task", args=[task.pk])
    entries = AuditEntry.objects.filter(action__in=("feedback_batch.pause", "feedback_batch.start"))
    assert [(e.action, e.actor) for e in entries.order_by("id")] == [
        ("feedback_batch.pause", alice),
        ("feedback_batch.start", alice),
    ]


def test_a_second_pause_from_a_stale_page_leaves_the_batch_paused(client_for, alice, django_user_model):
    """Two researchers both see "Pause batch": the second press used to start the batch again."""
    erin = make_user(django_user_model, "erin", "researcher")
    batch = sky_batch(alice)
    state = reverse("console:feedback_state", args=[batch.pk])
    assert client_for(alice).post(state, {"state": "paused"}).status_code == 302
    second = client_for(erin).post(state, {"state": "paused"}, follow=True)
    assert [str(m) for m in second.context["messages"]] == ["The batch was already paused: nothing changed."]
    assert FeedbackBatch.objects.get().is_active is False
    assert AuditEntry.objects.filter(action="feedback_batch.pause").count() == 1  # the no-op is not logged
    refused = client_for(alice).post(state, {"state": "toggle"})
    assert refused.status_code == 400 and FeedbackBatch.objects.get().is_active is False


def test_only_researchers_pause_a_batch_and_only_by_post(client_for, alice, bob, charlie):
    batch = sky_batch(alice)
    state = reverse("console:feedback_state", args=[batch.pk])
    assert client_for(alice).get(state).status_code == 405
    assert client_for(bob).post(state, {"state": "paused"}).status_code == 403
    assert client_for(charlie).post(state, {"state": "paused"}).status_code == 403
    assert client_for(None).post(state, {"state": "paused"}).url.startswith(reverse("login"))
    missing = reverse("console:feedback_state", args=[batch.pk + 1])
    assert client_for(alice).post(missing, {"state": "paused"}).status_code == 404
    assert FeedbackBatch.objects.get().is_active is True


def test_a_researcher_pauses_starts_and_reprioritises_several_batches_from_the_list(client_for, alice, bob):
    first = sky_batch(alice)
    answer = Answer.objects.get()
    second, third = (
        create_feedback_batch(alice, BatchSettings(name, "rating", preset="truthfulqa"), [[answer]])
        for name in ("sea", "sun")
    )
    bulk, listing = reverse("console:feedback_bulk"), reverse("console:feedback")
    page = client_for(alice).get(listing).content.decode()
    assert "comes up twice as often" in page and 'name="batches"' in page  # what priority means, on the list

    paused = client_for(alice).post(bulk, {"batches": [first.pk, second.pk], "action": "pause"}, follow=True)
    assert [str(m) for m in paused.context["messages"]] == ["2 batches paused."]
    assert dict(FeedbackBatch.objects.values_list("pk", "is_active")) == {
        first.pk: False,
        second.pk: False,
        third.pk: True,
    }
    again = client_for(alice).post(bulk, {"batches": [first.pk, third.pk], "action": "pause"}, follow=True)
    assert [str(m) for m in again.context["messages"]] == ["1 batch paused (1 already paused)."]

    chosen = {"batches": [second.pk, third.pk], "action": "priority", "bulk_priority": "7"}
    set_seven = client_for(alice).post(bulk, chosen, follow=True)
    assert [str(m) for m in set_seven.context["messages"]] == ["Priority set to 7 for 2 batches."]
    assert sorted(FeedbackBatch.objects.values_list("priority", flat=True)) == [1, 7, 7]
    assert AuditEntry.objects.filter(action="feedback_batch.pause").count() == 3  # per change, not no-ops
    assert AuditEntry.objects.filter(action="feedback_batch.priority").count() == 2


def test_the_batch_list_puts_the_new_batch_form_first_and_names_each_field_once(client_for, alice):
    sky_batch(alice)
    page = client_for(alice).get(reverse("console:feedback")).content.decode()
    assert page.index("<h2>New batch</h2>") < page.index("<h2>Batches</h2>") < page.index("<table>")
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert ids and [name for name, count in Counter(ids).items() if count > 1] == []
    # The new batch's priority and the selected batches' new priority: two fields, two names, two labels.
    assert page.count('name="priority"') == page.count('name="bulk_priority"') == 1
    assert page.count(">Priority:</label>") == page.count(">New priority</label>") == 1


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"action": "pause"}, "Choose at least one batch."),
        ({"batches": ["1"], "action": "priority", "bulk_priority": "11"}, "less than or equal to 10"),
        ({"batches": ["1"], "action": "priority"}, "Give a priority from 1 to 10."),
        ({"batches": ["99999999999999999999"], "action": "pause"}, "is not a valid value"),
    ],
)
def test_a_bulk_request_that_cannot_be_done_changes_nothing_and_says_why(client_for, alice, bob, body, error):
    batch = sky_batch(alice)
    body = {key: [str(batch.pk)] if value == ["1"] else value for key, value in body.items()}
    refused = client_for(alice).post(reverse("console:feedback_bulk"), body)
    assert refused.status_code == 400 and error in refused.content.decode()
    assert FeedbackBatch.objects.filter(is_active=True, priority=1).count() == 1
    assert client_for(bob).post(reverse("console:feedback_bulk"), {"action": "pause"}).status_code == 403
