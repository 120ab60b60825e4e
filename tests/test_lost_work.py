"""No lost work on feedback tasks: a submit after the lease ran out (the slot free again, or taken by someone
else: then kept as late), two tabs on one task, and a reload after a refused submit.

bob labels in two tabs at times; erin is another labeler who takes bob's slot; alice researches."""

from __future__ import annotations

import io
import json
import re
import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.exports.service import write_rows
from annotation.feedback import assignment as work
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import Answer, Assignment, AssignmentStatus, FeedbackItem, Question, SourceKind
from annotation.questions.service import import_questions
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

# bob's full TruthfulQA rating, with a comment he would hate to type twice.
COMMENT = "Checked three sources; the second one contradicts the answer."
FULL = {"field-truthful": "no", "field-informative": "yes", "comment": COMMENT}


@pytest.fixture
def erin(django_user_model):
    return make_user(django_user_model, "erin", "labeler")


@pytest.fixture
def item(db) -> FeedbackItem:
    """One answer to rate (TruthfulQA preset), by one labeler."""
    import_questions(b'{"question": "Is the sky blue?"}', filename="q.jsonl")
    answer = Answer.objects.create(
        question=Question.objects.get(), text="Yes, it is.", source_kind=SourceKind.MODEL
    )
    settings = BatchSettings("sky", "rating", preset="truthfulqa", required_probability=0.0)
    create_feedback_batch(None, settings, [[answer]])
    return FeedbackItem.objects.get()


def open_page(client, task: Assignment) -> dict[str, str]:
    """Load the task page (a tab); its form's hidden fields."""
    html = client.get(reverse("annotation:task", args=[task.pk])).content.decode()
    return {
        name: re.search(rf'name="{name}" value="([^"]+)"', html).group(1)
        for name in ("submit_key", "version")
    }


def run_out(task: Assignment) -> None:
    """The lease ran out and the pool took the slot back."""
    ran_out = timezone.now() - timedelta(seconds=1)
    Assignment.objects.filter(pk=task.pk).update(leased_until=ran_out)
    assert work.reclaim_expired(timezone.now()) == 1


def post(client, name: str, task: Assignment, data: dict):
    return client.post(reverse(f"annotation:{name}", args=[task.pk]), data)


def exported_assignments() -> list[int]:
    out = io.BytesIO()
    write_rows("comparisons-full", {}, out)
    return [json.loads(line)["assignment"] for line in out.getvalue().splitlines()]


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


# Item 2: the lease ran out ----------------------------------------------------------------------------------


def test_a_submit_after_the_lease_ran_out_takes_back_the_free_slot(client_for, bob, item):
    client = client_for(bob)
    task = work.next_assignment(bob)
    tab = open_page(client, task)
    run_out(task)
    response = client.post(reverse("annotation:task_submit", args=[task.pk]), {**tab, **FULL}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("annotation:next_task")
    assert "Submitted. Thank you!" in response.content.decode()
    task.refresh_from_db()
    assert task.status == AssignmentStatus.SUBMITTED and task.response["comment"] == COMMENT
    assert FeedbackItem.objects.get().slots_taken == 1
    assert exported_assignments() == [task.pk]


def test_a_skip_after_the_lease_ran_out_is_recorded_with_its_reason(client_for, bob, item):
    client = client_for(bob)
    task = work.next_assignment(bob)
    client.get(reverse("annotation:task", args=[task.pk]))
    run_out(task)
    response = post(client, "task_skip", task, {"reason": "I do not know this topic"})
    assert response.url == reverse("annotation:next_task")
    task.refresh_from_db()
    assert (task.status, task.skip_reason) == (AssignmentStatus.SKIPPED, "I do not know this topic")
    assert FeedbackItem.objects.get().slots_taken == 0  # released once, at expiry, not twice


def test_when_someone_else_took_the_slot_the_response_is_kept_as_late_and_left_out_of_exports(
    client_for, alice, bob, erin, item, admin_client
):
    client = client_for(bob)
    task = work.next_assignment(bob)
    tab = open_page(client, task)
    run_out(task)
    erins = work.next_assignment(erin)
    assert erins.item == task.item
    response = client.post(reverse("annotation:task_submit", args=[task.pk]), {**tab, **FULL}, follow=True)
    assert "Submitted late" in response.content.decode()
    task.refresh_from_db()
    assert task.status == AssignmentStatus.LATE and task.response["comment"] == COMMENT
    assert FeedbackItem.objects.get().slots_taken == 1  # still erin's
    assert "Submitted late" in client.get(reverse("annotation:task", args=[task.pk])).content.decode()

    work.submit(erins.pk, erin, {"truthful": "yes", "informative": "yes"}, uuid.uuid4())
    assert exported_assignments() == [erins.pk]  # bob's late response is not in the export

    console = client_for(alice).get(reverse("console:feedback_batch", args=[item.batch_id])).content.decode()
    assert "<dt>Submitted late</dt><dd>1 " in console
    assert reverse("annotation:task", args=[task.pk]) in console and "bob" in console
    assert api(alice).get(f"/api/batches/{item.batch_id}").json()["progress"]["late"] == 1
    page = client_for(alice).get(reverse("annotation:task", args=[task.pk])).content.decode()
    assert COMMENT in page  # researchers read the late response
    admin = admin_client.get("/admin/annotation/assignment/?status__exact=late").content.decode()
    assert f"/admin/annotation/assignment/{task.pk}/change/" in admin and "Submitted late" in admin


def test_an_incomplete_late_response_is_kept_as_the_draft_and_its_errors_are_shown(
    client_for, bob, erin, item
):
    client = client_for(bob)
    task = work.next_assignment(bob)
    tab = open_page(client, task)
    run_out(task)
    work.next_assignment(erin)
    response = post(client, "task_submit", task, {**tab, "field-truthful": "no", "comment": COMMENT})
    assert response.url == reverse("annotation:task", args=[task.pk])
    page = client.get(response.url).content.decode()
    assert 'role="alert"' in page and "went to someone else" in page and "Read only." not in page
    assert COMMENT in page
    task.refresh_from_db()
    assert task.status == AssignmentStatus.EXPIRED and task.draft["comment"] == COMMENT
    post(client, "task_submit", task, {**open_page(client, task), **FULL})
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.LATE


def test_the_api_takes_back_a_free_slot_after_the_lease_ran_out(bob, item):
    task = work.next_assignment(bob)
    run_out(task)
    body = {"response": {"truthful": "yes", "informative": "no"}, "key": str(uuid.uuid4()), "version": 0}
    response = api(bob).post(f"/api/tasks/{task.pk}/submit", body, format="json")
    assert response.status_code == 200 and response.json()["late"] is False
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.SUBMITTED


def test_the_api_keeps_a_response_whose_slot_went_to_someone_else_as_late(bob, erin, item):
    task = work.next_assignment(bob)
    run_out(task)
    work.next_assignment(erin)
    draft = api(bob).post(f"/api/tasks/{task.pk}/draft", {"draft": {"truthful": "no"}}, format="json")
    assert draft.status_code == 200 and draft.json()["late"] is True
    body = {"response": {"truthful": "yes", "informative": "no"}, "key": str(uuid.uuid4())}
    response = api(bob).post(f"/api/tasks/{task.pk}/submit", body, format="json")
    assert response.status_code == 200 and response.json()["late"] is True
    assert api(bob).get(f"/api/tasks/{task.pk}").json()["status"] == "late"


def test_the_api_skips_a_task_whose_lease_ran_out(bob, item):
    task = work.next_assignment(bob)
    run_out(task)
    response = api(bob).post(f"/api/tasks/{task.pk}/skip", {"reason": "Not my field"}, format="json")
    assert response.status_code == 200
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.SKIPPED


# Item 3: two tabs on one task -------------------------------------------------------------------------------


def test_a_submit_from_a_stale_tab_is_refused_and_what_it_held_is_shown_back(client_for, bob, item):
    client = client_for(bob)
    task = work.next_assignment(bob)
    first, second = open_page(client, task), open_page(client, task)
    post(client, "task_submit", task, {**first, "field-truthful": "yes", "field-informative": "yes"})
    response = post(client, "task_submit", task, {**second, **FULL})
    assert response.url == reverse("annotation:task", args=[task.pk])
    page = client.get(response.url).content.decode()
    assert "another tab or window" in page
    assert "What you sent (not saved)" in page and COMMENT in page  # nothing typed is lost
    assert re.search(r'name="field-truthful" value="yes" checked', page)  # the current state in the form
    task.refresh_from_db()
    assert task.response == {"comment": "", "truthful": "yes", "informative": "yes"}
    assert task.revisions.count() == 0


def test_a_tabs_own_autosave_keeps_it_current_but_a_stale_tabs_draft_is_refused(client_for, bob, item):
    client = client_for(bob)
    task = work.next_assignment(bob)
    old, current = open_page(client, task), open_page(client, task)
    assert post(client, "task_draft", task, {**current, "field-truthful": "no"}).status_code == 200
    assert post(client, "task_draft", task, {**old, "comment": "from the old tab"}).status_code == 200
    post(client, "task_submit", task, {**current, **FULL})
    assert Assignment.objects.get(pk=task.pk).status == AssignmentStatus.SUBMITTED
    refused = post(client, "task_draft", task, {**old, "comment": "typed after"})
    assert refused.status_code == 409 and "another tab" in refused.content.decode()
    assert Assignment.objects.get(pk=task.pk).draft["comment"] == COMMENT


def test_the_api_refuses_a_submit_from_an_older_version_with_the_current_state(bob, item):
    task = work.next_assignment(bob)
    client = api(bob)
    version = client.get(f"/api/tasks/{task.pk}").json()["version"]
    body = {
        "response": {"truthful": "yes", "informative": "yes"},
        "key": str(uuid.uuid4()),
        "version": version,
    }
    assert client.post(f"/api/tasks/{task.pk}/submit", body, format="json").status_code == 200
    stale = {**body, "response": {"truthful": "no", "informative": "no"}, "key": str(uuid.uuid4())}
    response = client.post(f"/api/tasks/{task.pk}/submit", stale, format="json")
    assert response.status_code == 409
    assert response.json()["task"]["response"]["truthful"] == "yes"
    assert response.json()["task"]["version"] == version + 1
    draft = client.post(f"/api/tasks/{task.pk}/draft", {"draft": {}, "version": version}, format="json")
    assert draft.status_code == 409
    assert Assignment.objects.get(pk=task.pk).response["truthful"] == "yes"


# Item 4: a reload after a refused submit --------------------------------------------------------------------


def test_a_refused_submit_redirects_and_a_reload_shows_the_newer_draft(client_for, bob, item):
    client = client_for(bob)
    task = work.next_assignment(bob)
    tab = open_page(client, task)
    refused = post(client, "task_submit", task, {**tab, "field-truthful": "no", "comment": "first try"})
    assert refused.status_code == 302 and refused.url == reverse("annotation:task", args=[task.pk])
    page = client.get(refused.url).content.decode()
    assert 'role="alert"' in page and "first try" in page
    post(client, "task_draft", task, {**tab, "field-truthful": "yes", "comment": "second thoughts"})
    reload = client.get(refused.url).content.decode()  # a reload GETs the page: nothing is re-posted
    assert "second thoughts" in reload and "first try" not in reload and 'role="alert"' not in reload
    assert re.search(r'name="field-truthful" value="yes" checked', reload)
    assert Assignment.objects.get(pk=task.pk).draft["comment"] == "second thoughts"
