"""A researcher, in the real browser, samples best-of-2 answers: from the model registry ("Sample answers" on
a tiny BC policy), the reward model and two FreshWiki questions chosen on the form, the run page polling to
Done on a real worker on the sampling queue, the scores and the chosen answer, then one sample's trajectory
with its actions."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import Page, expect

from annotation.models import Question, Split
from tests.conftest import database_url_for_tests, make_user, running_worker
from tests.tiny_models import tiny_reward_model
from training.models import ModelCheckpoint, RunKind, RunStatus, Sample, SamplingRun

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_researcher_samples_answers_and_reads_a_trajectory(
    page: Page, settings, tmp_path, broker_namespace, freshwiki, model_store, tiny_llama_dir, tiny_bert_dir,
    django_user_model,
):  # fmt: skip
    make_user(django_user_model, "rita", "researcher")
    policy = ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="random", path=str(tiny_llama_dir)
    )
    reward_dir = tiny_reward_model(tmp_path / "rm", tiny_bert_dir, offset=0.25, max_length=64)
    ModelCheckpoint.objects.create(kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward_dir))
    for i, text in enumerate(
        ["Who won the 2022 AFL Grand Final?", "What happened to the Crimean Bridge in October 2022?"]
    ):
        Question.objects.create(
            text=f"{text} ({i})", key=f"fw{i}", dataset="freshwiki_demo", split=Split.EVAL
        )
    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "MODEL_STORE_DIR": str(model_store),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "CORPUS_INDEX_DIR": str(settings.CORPUS_INDEX_DIR),
        "DEFAULT_CORPUS": settings.DEFAULT_CORPUS,
        "OMP_WAIT_POLICY": "PASSIVE",
        "PATH": "/usr/bin:/bin",
    }
    with running_worker(env, queues="sampling"):
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill("rita")
        page.get_by_label("Password").fill("rita-pw")
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("link", name="Training").click()
        page.get_by_role("link", name="Model registry").first.click()
        page.locator(f"#model-{policy.pk}").get_by_role("link", name="Sample answers").click()
        expect(page.get_by_label("Policy")).to_have_value(str(policy.pk))
        page.get_by_label("Reward model").select_option(label="tiny-rm (rm, from random)")
        page.get_by_label("Dataset").select_option("freshwiki_demo")
        page.get_by_label("Limit").fill("2")
        page.get_by_label("Samples per question (n)").fill("2")
        page.get_by_label("Max actions").fill("3")
        page.get_by_label("Max answer tokens").fill("16")
        page.get_by_label("Few-shot examples").fill("0")
        # Commands held to the page's grammar: with seed 1 the random tiny policy quotes, so some of its
        # samples answer and are scored (unconstrained, it writes no valid command in 3 actions).
        page.get_by_label("Constrain commands").select_option("on")
        page.get_by_label("Seed").fill("1")
        page.get_by_role("button", name="Start sampling").click()
        # The banner stays true once the run is done (issue 24: it said "queued" beside "Done").
        expect(page.get_by_text("requested: its status below follows it to the end")).to_be_visible()
        expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=180_000)
    run = SamplingRun.objects.get()
    assert run.status == RunStatus.DONE and run.episodes_done == 4, run.error
    assert run.policy == policy and run.reward_model.name == "tiny-rm" and run.n == 2
    assert run.settings["constrain_commands"] is True and run.settings["seed"] == 1
    expect(page.locator("progress")).to_have_attribute("value", "100")
    expect(page.get_by_text("4 of 4 episodes finished")).to_be_visible()
    actions = run.actions_done  # all taken: the most the run could still take is what it took
    expect(page.get_by_text(f"{actions} actions taken of at most {actions}")).to_be_visible()
    samples = list(Sample.objects.filter(run=run).order_by("question", "index"))
    chosen = [sample for sample in samples if sample.chosen]
    assert chosen, [(s.score, s.episode.answer) for s in samples]
    expect(page.locator(".run-done", has_text="chosen")).to_have_count(len(chosen))
    expect(page.get_by_text(f"score {chosen[0].score:.3f}")).to_be_visible()
    expect(page.locator("svg.chart")).to_be_visible()  # coverage against threshold
    page.locator(f"#sample-{chosen[0].pk}").get_by_role("link", name="trajectory").click()
    expect(page.get_by_text("Model sample", exact=False)).to_be_visible()
    commands = list(chosen[0].episode.actions.order_by("index").values_list("command", flat=True))
    actions = page.locator("ol.actions li")
    expect(actions).to_have_count(len(commands))
    expect(actions.first.locator("code")).to_have_text(commands[0])
    page.get_by_role("link", name=f"Sampling run {run.pk}").click()
    expect(page.get_by_role("heading", name=f"Sampling run {run.pk}")).to_be_visible()
