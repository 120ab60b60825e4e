"""A researcher, in the real browser, from the demo data to a trained reward model: an rm-pairs export of
the rm split (TruthfulQA's own judgements), "Train a model on it", the fast preset on the real MiniLM, the
run page polling to Done with its chart, on real workers for the exports and training queues."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import Page, expect

from tests.conftest import database_url_for_tests, running_worker
from training.models import ModelCheckpoint, RunStatus, TrainingRun

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_researcher_trains_a_reward_model_from_the_demo_data(
    page: Page, demo_data, settings, tmp_path, broker_namespace
):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.MODEL_STORE_DIR = tmp_path / "models"
    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "MODEL_STORE_DIR": str(tmp_path / "models"),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "OMP_WAIT_POLICY": "PASSIVE",
        "PATH": "/usr/bin:/bin",
    }
    with running_worker(env, queues="exports,training"):
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill("researcher")
        page.get_by_label("Password").fill("researcher")
        page.get_by_role("button", name="Sign in").click()
        page.goto("/console/exports/")
        page.get_by_label("Format").select_option("rm-pairs")
        page.get_by_label("Split").select_option("rm")
        page.get_by_role("button", name="Export").click()
        page.get_by_role("link", name="Train a model on it").click(timeout=60_000)
        expect(page.get_by_label("Kind")).to_have_value("rm")
        page.get_by_label("Max steps").fill("2")
        page.get_by_label("Eval every").fill("1")
        page.get_by_role("button", name="Start run").click()
        expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=180_000)
    run = TrainingRun.objects.get()
    assert run.status == RunStatus.DONE and run.step == 2 and run.preset == "fast"
    expect(page.locator("progress")).to_have_attribute("value", "100")
    expect(page.locator("svg path").first).to_be_attached()  # the loss chart, drawn by the server
    expect(page.get_by_role("link", name=f"rm-run-{run.pk}")).to_be_visible()
    assert ModelCheckpoint.objects.get().run == run
