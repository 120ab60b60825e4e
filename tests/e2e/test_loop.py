"""The loop, in the real browser, on real workers (sampling, exports, training queues) and tiny models: a
researcher samples best-of-2 answers, makes a WebGPT-comparison batch of the run's answers against the human
demonstrations from the run's page, starts a round with the run; a labeler judges the pairs; the researcher
opens the results (preference with its interval, per dimension, the plot), exports the data collected up to
the round (the default, counted and warned about on the round's page) and retrains the reward model on it,
the training form prefilled."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import Browser, Page, expect

from annotation.demonstrations import service as demos
from annotation.demonstrations.batches import create_demonstration_batch
from annotation.feedback.results import batch_results
from annotation.models import Assignment, AssignmentStatus, Export, FeedbackBatch, Question, Split
from tests.conftest import database_url_for_tests, make_user, running_worker
from tests.tiny_models import tiny_reward_model
from training.evaluation.rounds import create_round
from training.models import ModelCheckpoint, Round, RunKind, RunStatus, SamplingRun, TrainingRun

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]
QUESTIONS = ("Who won the 2022 AFL Grand Final?", "What happened to the Crimean Bridge in October 2022?")


def demonstrate(person, questions) -> None:
    """A finished human demonstration of each question (what the run's answers are compared against)."""
    create_demonstration_batch(None, "FreshWiki demo questions", Question.objects.filter(pk__in=questions))
    for _ in questions:
        episode = demos.next_episode(person)
        for command in ("Search 2022", "Clicked on link 0", "Quote: 2022", "End: Answer"):
            episode.refresh_from_db()
            demos.record_action(episode.pk, person, command, uuid.uuid4(), episode.version)
        demos.submit_answer(episode.pk, person, "It happened in 2022 [1].")


def sign_in(page: Page, username: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"{username}-pw")
    page.get_by_role("button", name="Sign in").click()


def judge(page: Page, overall: str) -> None:
    page.get_by_role("button", name="Start next task").click()
    expect(page.locator("#task-form")).to_be_visible()
    page.wait_for_load_state("load")
    page.get_by_role("radiogroup", name="Overall usefulness").get_by_label(overall, exact=True).check()
    page.get_by_role("button", name="Submit and back to the list").click()  # the next pair starts from there
    expect(page.locator(".messages")).to_contain_text("Submitted. Thank you!")


def test_sample_batch_judge_result_retrain(
    page: Page, browser: Browser, live_server, settings, tmp_path, broker_namespace, freshwiki, model_store,
    tiny_llama_dir, tiny_bert_dir, django_user_model,
):  # fmt: skip
    settings.MEDIA_ROOT = tmp_path / "media"
    make_user(django_user_model, "rita", "researcher")
    make_user(django_user_model, "lou", "labeler")
    dana = make_user(django_user_model, "dana2", "demonstrator")
    policy = ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="random", path=str(tiny_llama_dir)
    )
    reward_dir = tiny_reward_model(tmp_path / "rm", tiny_bert_dir, offset=0.25, max_length=64)
    reward_model = ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward_dir)
    )
    questions = [
        Question.objects.create(text=text, key=f"fw{i}", dataset="freshwiki_demo", split=split).pk
        for i, (text, split) in enumerate(zip(QUESTIONS, (Split.RM, Split.EVAL), strict=True))
    ]
    demonstrate(dana, questions)
    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "MEDIA_ROOT": str(tmp_path / "media"),
        "MODEL_STORE_DIR": str(model_store),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "CORPUS_INDEX_DIR": str(settings.CORPUS_INDEX_DIR),
        "DEFAULT_CORPUS": settings.DEFAULT_CORPUS,
        "OMP_WAIT_POLICY": "PASSIVE",
        "PATH": "/usr/bin:/bin",
    }
    with running_worker(env, queues="sampling,exports,training"):
        # The researcher samples best-of-2 (seed 1: the tiny policy answers each question once).
        sign_in(page, "rita")
        page.goto(f"/console/training/sampling/new/?policy={policy.pk}&reward_model={reward_model.pk}")
        page.get_by_label("Dataset").select_option("freshwiki_demo")
        for label, value in (
            ("Samples per question (n)", "2"), ("Max actions", "3"), ("Max answer tokens", "16"),
            ("Few-shot examples", "0"), ("Seed", "1"),
        ):  # fmt: skip
            page.get_by_label(label).fill(value)
        page.get_by_label("Constrain commands").select_option("on")
        page.get_by_role("button", name="Start sampling").click()
        expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=180_000)
        run = SamplingRun.objects.get()
        assert run.status == RunStatus.DONE and run.policy == policy, run.error

        # A comparison batch of the run's answers against the demonstrations, from the run's page.
        page.get_by_role("link", name="Make a feedback batch from this run").click()  # shown when it ends
        expect(page.get_by_label("Sampling runs")).to_have_values([str(run.pk)])
        page.get_by_label("Name").fill("Best-of-2 vs demonstrations")
        page.get_by_label("Against human demonstrations").check()
        page.get_by_label("Required probability").fill("0")
        page.get_by_role("button", name="Create batch").click()
        expect(page.locator(".messages")).to_contain_text("created with")
        batch = FeedbackBatch.objects.get(name="Best-of-2 vs demonstrations")
        assert batch.origin["pairing"] == "vs_demonstrations" and list(batch.sampling_runs.all()) == [run]
        items = batch.items.count()
        assert items >= 1, batch.origin

        # ... and a round named by the run.
        page.goto(f"/console/training/sampling/{run.pk}/")
        page.get_by_role("link", name="Start a round with this run").click()
        page.get_by_label("Name").fill("first round")
        page.get_by_role("button", name="Start the round").click()
        expect(page.get_by_role("heading", name="round 1: first round")).to_be_visible()
        round_url = page.url

        # The labeler judges every pair, never told which answer is the model's.
        labeler = browser.new_context(base_url=live_server.url).new_page()
        sign_in(labeler, "lou")
        for number in range(items):
            judge(labeler, "A better" if number % 2 == 0 else "Equally good")
        submitted = Assignment.objects.filter(item__batch=batch, status=AssignmentStatus.SUBMITTED).count()
        assert submitted == items
        labeler.context.close()

        # The results: the preference for the run over the demonstrations, with its interval and count.
        page.goto(round_url)
        page.get_by_role("link", name="results").first.click()
        expect(page.get_by_role("heading", name="Preference", exact=True)).to_be_visible()
        expect(page.locator("svg").first).to_be_visible()
        overall = next(f for f in batch_results(batch)["preference"] if f["dimension"] == "overall")
        assert overall["judgements"] == items
        expect(page.locator("table td", has_text=f"{overall['value']:.3f}").first).to_be_visible()

        # Retrain the reward model from the round: the data so far is the default, counted before it is
        # exported (the eval question is left out), with a warning that so few pairs cannot be read.
        page.goto(round_url)
        rows = batch.items.filter(question__split=Split.RM).count()
        expect(
            page.get_by_role("radio", name="Everything collected up to this round: rm-pairs")
        ).to_be_checked()
        expect(page.locator(".data-choice").first).to_contain_text(f"{rows} pair")
        expect(page.locator(".data-choice .warning").first).to_contain_text("to train on")
        page.get_by_role("button", name="Export this data").click()
        expect(page.locator(".messages")).to_contain_text("queued on the exports worker")
        export = Export.objects.get(filters__up_to_round=1)
        retrain = page.get_by_role("link", name=f"Retrain the reward model on export {export.pk}")
        expect(retrain).to_be_visible(timeout=60_000)  # the block polls until the export is written
        export.refresh_from_db()
        assert export.row_count == rows >= 1 and export.filters["exclude_eval"] is True
        retrain.click()
        expect(page.get_by_label("Export")).to_have_value(str(export.pk))
        page.get_by_label("Max steps").fill("2")
        page.get_by_label("Eval every").fill("2")
        page.get_by_role("button", name="Start run").click()
        expect(page.locator(".messages")).to_contain_text("requested: its status below follows it to the end")
        retrained = TrainingRun.objects.get(export=export)
        finished = page.get_by_text("Done", exact=True).or_(page.get_by_text("Failed", exact=True))
        expect(finished.first).to_be_visible(timeout=180_000)
    retrained.refresh_from_db()
    assert retrained.status == RunStatus.DONE and retrained.kind == RunKind.RM, retrained.error
    assert retrained.base_checkpoint == reward_model
    page.goto(round_url)
    expect(page.get_by_role("link", name=f"{retrained.pk}", exact=True)).to_be_visible()
    trained_on = page.get_by_role("row", name=f"{retrained.pk} Reward model").get_by_role("cell").nth(2)
    expect(trained_on).to_contain_text("rm-pairs: everything collected up to round 1")
    expect(trained_on).to_contain_text(f"{retrained.metrics['train_examples']} to train")
    assert Round.objects.get().sampling_runs.get() == run


# Text past a list box's edge is cut: each option's text, measured in the box's own font, against its room.
CUT_OPTIONS = """(box) => {
  const style = getComputedStyle(box);
  const pen = document.createElement("canvas").getContext("2d");
  pen.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 8;
  return [...box.options].filter((option) => pen.measureText(option.text).width > room).map((o) => o.text);
}"""


def test_the_round_pages_show_each_sampling_run_whole(page: Page, django_user_model):
    make_user(django_user_model, "rita", "researcher")
    sampling = {"n": 16, "status": RunStatus.DONE, "reward_model_name": "rm-run-123"}
    endpoint = SamplingRun.objects.create(policy_name="vllm:meta-llama/Llama-3.1-8B-Instruct", **sampling)
    local = SamplingRun.objects.create(policy_name="smollm2-135m-instruct (prompted)", **sampling)
    round_ = create_round(None, "Round 1", "", [local.pk])
    sign_in(page, "rita")
    page.goto("/console/training/rounds/")
    assert page.get_by_label("Sampling runs").evaluate(CUT_OPTIONS) == []
    page.goto(f"/console/training/rounds/{round_.pk}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("round 1")  # the name repeated the number
    added = page.get_by_label("Add sampling runs")
    assert added.locator("option").all_inner_texts() == [
        f"run {endpoint.pk}: {endpoint.policy_name}, best-of-16 by rm-run-123, done"
    ]  # the round's own run is not offered again
    assert added.evaluate(CUT_OPTIONS) == []
