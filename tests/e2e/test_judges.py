"""A researcher, in the real browser, judges a comparison batch with a tiny reward model: "Judge this batch"
on the batch page, the judge chosen on the form, the run page polling to Done on a real worker of the sampling
queue, each item's two verdicts with their raw output; both pages pass axe-core."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from annotation.models.judging import JudgeRun, ModelJudgement
from tests.conftest import make_user, running_worker
from tests.e2e.axe import describe, run_axe
from tests.test_judge_jobs import make_batch
from tests.test_training_jobs import worker_env
from tests.tiny_models import tiny_reward_model
from training.models import ModelCheckpoint, RunKind, RunStatus

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_researcher_judges_a_batch_with_a_reward_model(
    page: Page, settings, tmp_path, broker_namespace, model_store, tiny_bert_dir, django_user_model
):
    make_user(django_user_model, "rita", "researcher")
    reward_dir = tiny_reward_model(tmp_path / "rm", tiny_bert_dir, offset=0.25, max_length=64)
    ModelCheckpoint.objects.create(kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward_dir))
    batch = make_batch(2)
    with running_worker(worker_env(settings, tmp_path), queues="sampling"):
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill("rita")
        page.get_by_label("Password").fill("rita-pw")
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"/console/feedback/{batch.pk}/")
        page.get_by_role("link", name="Judge this batch").click()
        assert not run_axe(page), describe(run_axe(page))
        page.get_by_label("Judge").select_option(label="tiny-rm (rm, from random): reward model")
        page.get_by_label("Tie margin").fill("0.0")
        page.get_by_role("button", name="Start judging").click()
        expect(page.get_by_text("requested: its status below follows it to the end")).to_be_visible()
        expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=180_000)
    run = JudgeRun.objects.get()
    assert run.status == RunStatus.DONE and run.items_done == 2, run.error
    assert ModelJudgement.objects.filter(run=run).count() == 4
    expect(page.get_by_text("2 of 2 items judged in both orders")).to_be_visible()
    page.reload()  # the verdicts are listed with the page, not with its polled status
    expect(page.get_by_role("heading", name="Drawn order")).to_have_count(2)
    expect(page.get_by_role("heading", name="Reversed order")).to_have_count(2)
    page.locator("summary", has_text="Raw output").first.click()
    expect(page.get_by_text('{"scores": {"A":').first).to_be_visible()
    assert not run_axe(page), describe(run_axe(page))
    page.get_by_role("link", name="Back to the batch").click()
    expect(page.get_by_role("link", name=str(run.pk), exact=True)).to_be_visible()
