"""A researcher reviews a flagged judgement in the real browser: the batch page's flag count leads to the
review page, "Exclude from exports" swaps the judgement in place (htmx), and an export made on a real
worker leaves it out."""

from __future__ import annotations

import json
import uuid

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import Page, expect

from annotation.exports.service import export_path
from annotation.feedback import assignment as work
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import Assignment, Export
from annotation.questions.service import import_questions
from tests.conftest import database_url_for_tests, make_user, running_worker

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_exclude_a_flagged_judgement_and_export_without_it(page: Page, settings, tmp_path, django_user_model):
    settings.MEDIA_ROOT = tmp_path / "media"
    make_user(django_user_model, "rita", "researcher")
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    rows = [
        {"question": "Why is the sky blue?", "answer": "Rayleigh scattering.", "quotes": []},
        {"question": "Why is the sky blue?", "answer": "It reflects the sea.", "quotes": []},
    ]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    config = BatchSettings("Sky pairs", "webgpt_comparison", overlap=2, required_probability=0.0)
    batch = create_feedback_batch(None, config, [answers])
    # Bob's overall rating contradicts his coherence rating (flagged); carol's does not.
    for name, coherence in (("bob", "b_much_better"), ("carol", "a_better")):
        person = make_user(django_user_model, name, "labeler")
        task = work.next_assignment(person)
        work.submit(
            task.pk, person, {"ratings": {"overall": "a_better", "coherence": coherence}}, uuid.uuid4()
        )
    flagged = Assignment.objects.get(labeler__username="bob")
    assert flagged.flags

    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill("rita-pw")
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"/console/feedback/{batch.pk}/")
    page.get_by_role("link", name="1 flagged, 1 not reviewed").click()
    expect(page.get_by_role("heading", name="Flagged judgements")).to_be_visible()
    judgement = page.locator(f"#flag-{flagged.pk}")
    expect(judgement).to_contain_text("The overall rating prefers one answer")
    expect(judgement).to_contain_text("Not reviewed")
    judgement.get_by_label("Note (optional)").fill("overall contradicts coherence")
    judgement.get_by_role("button", name="Exclude from exports").click()
    # Swapped in place: the same judgement, now excluded, with the decision in its history.
    expect(judgement.locator(".flag-state")).to_contain_text("Excluded from exports")
    expect(judgement).to_contain_text("Exclude from exports (rita): overall contradicts coherence")
    expect(page.locator("#flag-counts")).to_contain_text("0 not reviewed, 0 kept, 1 excluded")
    flagged.refresh_from_db()
    assert flagged.flag_decision == "exclude"

    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "MEDIA_ROOT": str(tmp_path / "media"),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "PATH": "/usr/bin:/bin",
    }
    with running_worker(env, queues="exports"):
        page.goto(f"/console/exports/?batch={batch.pk}&export_format=comparisons-full")
        page.get_by_role("button", name="Export").click()
        expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=60_000)
    export = Export.objects.get(filters__batch=batch.pk)
    assert export.row_count == 1
    [row] = [json.loads(line) for line in export_path(export).read_text().splitlines()]
    assert row["assignment"] == Assignment.objects.get(labeler__username="carol").pk
