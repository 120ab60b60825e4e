"""RL runs in the product (training.rl: inputs, runs, job, api, forms, views; the train_rl command): one
check of every input, with the same words on the page, over the API and at the command line; the row an RL
run leaves (questions, reward model, lineage); its page, live, with curves and the latest episodes (escaped);
the policy it registers sampling in the format its training.json names; the migration."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from annotation.models import Answer, Episode, EpisodeKind, EpisodeStatus, Question, SourceKind, Split
from tests.test_api import api
from training.errors import RunError
from training.models import ModelCheckpoint, RunKind, SamplingRun, TrainingRun
from training.rl.config import BC, PROMPTED, RL_BOUNDS, RLConfig, saved_policy_format
from training.rl.inputs import RLRequest, check_rl
from training.rl.job import rl_questions, starting_policy
from training.rl.runs import request_rl_run
from training.runs.config import SMOLLM2
from training.sampling.runs import QuestionSet

pytestmark = pytest.mark.usefixtures("model_store")

QUOTE = {"title": "Sky", "url": "https://example.org/sky", "domain": "example.org", "extract": "Blue light."}


def questions(count: int, split: str = Split.RL, dataset: str = "demo") -> list[Question]:
    start = Question.objects.count()
    return [
        Question.objects.create(
            text=f"Why is the sky blue? ({i})", key=f"rl{i}", dataset=dataset, split=split
        )
        for i in range(start, start + count)
    ]


def answered(question: Question, quotes: list[dict] | None = None) -> Answer:
    return Answer.objects.create(
        question=question, text="Rayleigh scattering [1].", quotes=[QUOTE] if quotes is None else quotes,
        source_kind=SourceKind.DEMONSTRATION,
    )  # fmt: skip


def model(kind: str, name: str, path: str = "/models/x") -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(kind=kind, name=name, base_model="x", path=path)


@pytest.fixture
def rm() -> ModelCheckpoint:
    return model(RunKind.RM, "tiny-rm")


@pytest.fixture
def rl_questions_with_reference() -> list[Question]:
    asked = questions(3)
    answered(asked[0])
    return asked


def refusal(request: RLRequest) -> RunError:
    with pytest.raises(RunError) as refused:
        request_rl_run(None, request, queue=False)
    assert not TrainingRun.objects.exists()
    return refused.value


@pytest.mark.django_db
def test_a_request_is_checked_and_leaves_its_questions_and_lineage_on_the_row(alice, rm):
    asked = questions(3)
    answered(asked[1])
    questions(2, Split.BC)  # never chosen: another split
    bc = model(RunKind.BC, "bc-run-1", "/models/bc")
    run = request_rl_run(
        alice, RLRequest(rm, bc, QuestionSet(limit=10), settings={"steps": 3, "kl_coef": 0.05}), queue=False
    )
    assert run.kind == RunKind.RL and run.export is None and run.status == "queued"
    assert run.question_ids == [q.pk for q in asked]
    assert run.question_source == {"batch": None, "split": "rl", "dataset": "", "limit": 10}
    assert run.reward_model == rm and run.reward_model_name == "tiny-rm" and run.base_checkpoint == bc
    assert run.config["steps"] == 3 and run.config["kl_coef"] == 0.05 and run.total_steps == 3
    assert run.config["base_model"] == "/models/bc"  # from the registry, never from the request
    assert (run.config["search"], run.config["corpus"]) == ("local", "")


@pytest.mark.django_db
def test_each_refusal_names_its_input_and_creates_nothing(rm, rl_questions_with_reference):
    bc, other_rm = model(RunKind.BC, "bc"), model(RunKind.RM, "rm-2")
    bc_questions = questions(2, Split.BC)
    cases = [
        (RLRequest(rm, other_rm), "base_checkpoint", "the starting policy must be a BC or RL model"),
        (RLRequest(None), "reward_model", "choose the reward model the policy is trained against"),
        (RLRequest(bc), "reward_model", "the reward model must be a registered reward model"),
        (RLRequest(rm, questions=QuestionSet(split=Split.BC)), "split", "RL trains on questions of the rl"),
        (RLRequest(rm, questions=QuestionSet(split=Split.EVAL)), "split", "not eval: the paper keeps"),
        (RLRequest(rm, ids=(bc_questions[0].pk,)), "question_ids", f"question(s) {bc_questions[0].pk} are"),
        (RLRequest(rm, ids=(10**9,)), "question_ids", "no such question(s): 1000000000"),
        (RLRequest(rm, questions=QuestionSet(dataset="none")), "questions", "no question matches"),
        (
            RLRequest(rm, settings={"nope": 1, "output_dir": "/x"}),
            "settings",
            "unknown setting(s): nope, output",
        ),
        (RLRequest(rm, settings={"steps": "3"}), "steps", "expected int, got '3'"),
        (RLRequest(rm, settings={"episodes": "dance"}), "episodes", "expected one of answer, browse"),
        (RLRequest(rm, search="altavista"), "search", "There is no search provider 'altavista'"),
    ]
    for request, field, words in cases:
        refused = refusal(request)
        assert refused.field == field, (request, refused)
        assert words in refused.reason, (words, refused.reason)


@pytest.mark.parametrize("name", sorted(RL_BOUNDS))
@pytest.mark.django_db
def test_every_number_outside_its_range_is_refused_by_name_with_the_range(
    rm, rl_questions_with_reference, name
):
    bound = RL_BOUNDS[name]
    is_float = isinstance(getattr(RLConfig(), name), float)
    for value in (
        bound.low if bound.low_open else bound.low - 1,
        bound.high if bound.high_open else bound.high + 1,
    ):
        value = float(value) if is_float else int(value)
        refused = refusal(RLRequest(rm, settings={name: value}))
        assert (refused.field, refused.reason) == (name, f"must be {bound.text()}, not {value!r}")


@pytest.mark.django_db
def test_answer_only_episodes_need_a_reference_of_a_chosen_question_browsing_does_not(rm):
    asked = questions(2)
    answered(asked[0], quotes=[])  # an answer without quotes is no reference
    Episode.objects.create(
        kind=EpisodeKind.MODEL, question=asked[1], status=EpisodeStatus.BROWSING, settings={},
        state={"quotes": [QUOTE]},  # not finished: no reference either
    )  # fmt: skip
    refused = refusal(RLRequest(rm, ids=(asked[0].pk, asked[1].pk)))
    assert refused.field == "questions" and "answer-only episodes need a reference" in refused.reason
    assert check_rl(RLRequest(rm, ids=(asked[0].pk,), settings={"episodes": "browse"}))[1] == [asked[0].pk]
    Episode.objects.filter(question=asked[1]).update(status=EpisodeStatus.FINISHED)
    assert check_rl(RLRequest(rm, ids=(asked[1].pk, asked[0].pk)))[1] == [asked[1].pk, asked[0].pk]


@pytest.mark.django_db
def test_the_job_gives_each_question_the_quote_sets_of_its_answers_and_finished_episodes(rm, dana):
    asked = questions(3)
    answered(asked[0])
    answered(asked[0])  # the same quotes again: one prompt
    other = {**QUOTE, "extract": "Scattering.", "domain": ""}
    Episode.objects.create(
        kind=EpisodeKind.HUMAN, user=dana, question=asked[0], status=EpisodeStatus.FINISHED, settings={},
        state={"quotes": [other]},
    )  # fmt: skip
    Question.objects.filter(pk=asked[1].pk).update(reference_answers=["Rayleigh"])
    run = request_rl_run(None, RLRequest(rm, ids=tuple(q.pk for q in asked)), queue=False)
    Question.objects.filter(pk=asked[2].pk).delete()
    built = rl_questions(run)
    assert [q.id for q in built] == [asked[0].pk, asked[1].pk]
    first = built[0]
    assert [[quote.extract for quote in ref] for ref in first.references] == [
        ["Blue light."],
        ["Scattering."],
    ]
    assert first.references[0][0].url == QUOTE["url"] and first.text == asked[0].text
    assert built[1].references == () and built[1].reference_answers == ("Rayleigh",)
    assert "1 question(s) deleted since: skipped" in TrainingRun.objects.get(pk=run.pk).log


def summary(folder, **fields) -> None:
    (folder / "training.json").write_text(json.dumps(fields))


@pytest.mark.django_db
def test_the_starting_policy_and_its_format_come_from_the_registry_and_training_json(rm, tmp_path):
    asked = questions(1)
    answered(asked[0])
    bc_dir, rl_dir, rl_bc_dir = tmp_path / "bc", tmp_path / "rl", tmp_path / "rl-bc"
    for folder in (bc_dir, rl_dir, rl_bc_dir):
        folder.mkdir()
    summary(bc_dir, kind="bc")
    summary(rl_dir, kind="rl", policy_format=PROMPTED)
    summary(rl_bc_dir, kind="rl", policy_format=BC)
    default = request_rl_run(None, RLRequest(rm), queue=False)
    assert starting_policy(default) == (SMOLLM2, PROMPTED)
    for folder, kind, expected in (
        (bc_dir, RunKind.BC, BC),
        (rl_dir, RunKind.RL, PROMPTED),
        (rl_bc_dir, RunKind.RL, BC),
    ):
        start = model(kind, folder.name, str(folder))
        run = request_rl_run(None, RLRequest(rm, start), queue=False)
        assert starting_policy(run) == (str(folder), expected)
    start.delete()  # the run's base is gone: it must not silently start from the default
    run.refresh_from_db()
    with pytest.raises(ValueError, match="deleted from the registry"):
        starting_policy(run)


def test_a_saved_policy_is_asked_in_the_format_its_training_json_names(tmp_path):
    summary(tmp_path, kind="rl", policy_format=PROMPTED)
    assert saved_policy_format(tmp_path) == PROMPTED
    summary(tmp_path, kind="rl", policy_format=BC)
    assert saved_policy_format(tmp_path) == BC
    summary(tmp_path, kind="bc", policy_format=PROMPTED)  # a BC model is BC whatever else it says
    assert saved_policy_format(tmp_path) == BC
    (tmp_path / "training.json").unlink()
    assert saved_policy_format(tmp_path) == BC  # registered by hand: as every policy was before RL


@pytest.mark.django_db
def test_a_sampling_run_loads_an_rl_policy_as_bc_or_prompted(alice, tiny_llama_dir, tmp_path):
    from training.sampling.loading import load_policy
    from training.sampling.policies import BCPolicy, PromptedPolicy

    folders = {}
    for policy_format in (BC, PROMPTED):
        folder = tmp_path / policy_format
        shutil.copytree(tiny_llama_dir, folder)
        summary(folder, kind="rl", policy_format=policy_format)
        folders[policy_format] = model(RunKind.RL, f"rl-{policy_format}", str(folder))
    for policy_format, expected in ((BC, BCPolicy), (PROMPTED, PromptedPolicy)):
        policy = folders[policy_format]
        run = SamplingRun.objects.create(owner=alice, policy=policy, policy_name=policy.name, question_ids=[])
        assert type(load_policy(run)) is expected


@pytest.mark.django_db
def test_the_api_starts_an_rl_run_and_refuses_by_field(alice, charlie, rm, rl_questions_with_reference):
    body = {"kind": "rl", "reward_model": rm.pk, "questions": {"limit": 2}, "settings": {"steps": 2}}
    response = api(alice).post("/api/training-runs", body, format="json")
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["kind"] == "rl" and run["export"] is None and run["reward_model"] == rm.pk
    assert run["question_count"] == 2 and run["question_source"]["split"] == "rl" and run["samples"] == []
    assert api(alice).get(f"/api/training-runs/{run['id']}").json()["reward_model_name"] == "tiny-rm"
    assert api(charlie).get(f"/api/training-runs/{run['id']}").status_code in (403, 404)
    created = TrainingRun.objects.count()
    bc_question = questions(1, Split.BC)[0]
    apart = "the paper keeps the questions of behaviour cloning, reward modelling and RL apart"
    cases = [
        ({"reward_model": 10**6}, {"reward_model": ["no such model"]}),
        ({"questions": {"split": "bc"}}, {"questions": {"split": [
            f"RL trains on questions of the rl split only, not bc: {apart}"]}}),
        ({"question_ids": [bc_question.pk]}, {"question_ids": [
            f"question(s) {bc_question.pk} are not in the rl split: {apart}"]}),
        ({"settings": {"kl_coef": -1}}, {"settings": {"kl_coef": [
            "must be at least 0 and at most 100, not -1.0"]}}),
        ({"settings": {"nope": 1}}, {"settings": ["unknown setting(s): nope"]}),
        ({"export": 1}, {"export": ["an rl run learns from questions, not an export"]}),
    ]  # fmt: skip
    for change, errors in cases:
        response = api(alice).post("/api/training-runs", body | change, format="json")
        assert response.status_code == 400, change
        assert response.json() == errors
    bc_body = {"kind": "bc", "export": 1, "reward_model": rm.pk}
    assert api(alice).post("/api/training-runs", bc_body, format="json").json() == {
        "reward_model": ["only an rl run takes this"]
    }
    assert TrainingRun.objects.count() == created


@pytest.mark.django_db
def test_the_page_starts_a_run_and_shows_the_services_refusal_in_the_same_words(
    client_for, alice, rm, rl_questions_with_reference
):
    client = client_for(alice)
    page = client.get(reverse("training:rl_new"))
    assert page.status_code == 200 and b"tiny-rm" in page.content and b"Start RL run" in page.content
    form = {"reward_model": rm.pk, "limit": 2, "search": "local", "episodes": "answer"}
    form |= {
        name: getattr(RLConfig(), name) for name in ("answers_per_browse", "steps", "questions_per_step")
    }
    form |= {
        name: getattr(RLConfig(), name) for name in ("group_size", "learning_rate", "kl_coef", "kl_budget")
    }
    form |= {
        name: getattr(RLConfig(), name)
        for name in ("temperature", "max_answer_tokens", "max_actions", "seed")
    }
    refused = client.post(reverse("training:rl_new"), form | {"group_size": 1})
    assert refused.status_code == 400 and b"Must be at least 2 and at most 256, not 1." in refused.content
    assert not TrainingRun.objects.exists()
    started = client.post(reverse("training:rl_new"), form)
    run = TrainingRun.objects.get()
    assert started.status_code == 302 and started["Location"] == reverse("training:run", args=[run.pk])
    assert run.kind == RunKind.RL and run.owner == alice and len(run.question_ids) == 2


@pytest.mark.django_db
def test_the_quick_start_prefills_the_demo_questions_the_newest_reward_model_and_its_settings(
    client_for, alice, rm
):
    from training.rl.views import QUICK_START

    newer = model(RunKind.RM, "newer-rm")
    questions(1, dataset="freshwiki_demo")
    client = client_for(alice)
    plain = client.get(reverse("training:rl_new")).context["form"]
    assert plain["steps"].value() == RLConfig().steps and not plain["reward_model"].value()
    page = client.get(reverse("training:rl_new") + "?quick_start=1")
    form = page.context["form"]
    assert form["reward_model"].value() == newer.pk and form["dataset"].value() == "freshwiki_demo"
    assert {name: form[name].value() for name in QUICK_START} == QUICK_START
    assert b"?quick_start=1" in page.content


@pytest.mark.django_db
def test_the_run_page_shows_lineage_curves_with_numbers_and_the_latest_episodes_escaped(
    client_for, alice, rm, rl_questions_with_reference
):
    run = request_rl_run(alice, RLRequest(rm, settings={"kl_budget": 0.5, "steps": 2}), queue=False)
    timeline = [
        {"step": 1, "reward_mean": -0.25, "kl": 0.0, "entropy": 2.5, "answer_tokens": 12.0},
        {"step": 2, "reward_mean": 0.125, "kl": 0.0312, "entropy": 2.4, "answer_tokens": 15.0},
    ]
    sample = {
        "question_id": 1, "question": "Why <b>blue</b>?", "kind": "answer", "answer": "<script>x()</script>",
        "reward": 0.75, "answer_tokens": 9, "commands": [], "invalid_actions": 0, "step": 2,
    }  # fmt: skip
    TrainingRun.objects.filter(pk=run.pk).update(
        status="running", step=2, timeline=timeline, samples=[sample]
    )
    page = client_for(alice).get(reverse("training:run", args=[run.pk]))
    text = page.content.decode()
    assert page.status_code == 200
    assert "tiny-rm" in text and "3 question(s) of the rl split" in text and "(prompted)" in text
    for title in ("Mean reward", "KL from the starting policy", "Entropy", "Answer length"):
        assert f"<h3>{title}</h3>" in text
    assert "Share of valid actions" not in text  # answer-only steps log no actions
    assert "KL budget" in text and "0.1250 (2)" in text and "-0.2500 (1)" in text
    assert "Episodes of step 2" in text and "0.750" in text
    assert "&lt;script&gt;x()&lt;/script&gt;" in text and "<script>x()" not in text
    assert "Why &lt;b&gt;blue&lt;/b&gt;?" in text
    polled = client_for(alice).get(reverse("training:run", args=[run.pk]), headers={"HX-Request": "true"})
    assert (
        'hx-headers=\'{"X-Poll": "1"}\'' in polled.content.decode()
        and b"Episodes of step 2" in polled.content
    )
    listed = client_for(alice).get(reverse("training:runs")).content.decode()
    assert "Reinforcement learning" in listed and "— (questions)" in listed


@pytest.mark.django_db
def test_the_run_page_warns_when_the_reward_model_hardly_separates_the_answers(
    client_for, alice, rm, rl_questions_with_reference
):
    run = request_rl_run(alice, RLRequest(rm), queue=False)
    page = reverse("training:run", args=[run.pk])
    step = {"step": 1, "reward_mean": 0.01, "kl": 0.0, "entropy": 1.2, "answer_tokens": 40.0}
    TrainingRun.objects.filter(pk=run.pk).update(status="running", timeline=[step | {"reward_std": 0.5}])
    assert "hardly tells" not in client_for(alice).get(page).content.decode()
    TrainingRun.objects.filter(pk=run.pk).update(
        timeline=[step | {"reward_std": 0.5}, step | {"reward_std": 0.01}]
    )
    text = " ".join(client_for(alice).get(page).content.decode().split())
    # a spread of 0.01 in preference logits: the better of two such answers is preferred 50.25% of the time
    assert "hardly tells this step" in text and "spread by 0.010, a preference of 0.502" in text


@pytest.mark.django_db
def test_the_command_refuses_with_the_same_words(rm, rl_questions_with_reference):
    with pytest.raises(CommandError, match="group_size: must be at least 2 and at most 256, not 1"):
        call_command("train_rl", "--reward-model", str(rm.pk), "--group-size", "1")
    with pytest.raises(CommandError, match="checkpoint 999999 does not exist"):
        call_command("train_rl", "--reward-model", "999999")
    bc_question = questions(1, Split.BC)[0]
    with pytest.raises(
        CommandError, match=f"question_ids: question.s. {bc_question.pk} are not in the rl split"
    ):
        call_command("train_rl", "--reward-model", str(rm.pk), "--question-ids", str(bc_question.pk))
    assert not TrainingRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_run_and_makes_the_export_optional():
    executor = MigrationExecutor(connection)
    executor.migrate([("training", "0008_job_state")])
    executor.loader.build_graph()
    # Forward to every app's leaf: going back to 0008 also unapplied the other apps' migrations that depend on
    # a later training one, and a table left missing breaks whatever reads it after this test.
    executor.migrate(executor.loader.graph.leaf_nodes())
    columns = {
        c.name: c
        for c in connection.introspection.get_table_description(connection.cursor(), "training_trainingrun")
    }
    assert columns["export_id"].null_ok
    assert {"reward_model_id", "reward_model_name", "question_source", "question_ids", "samples"} <= set(
        columns
    )


@pytest.mark.django_db
def test_a_tiny_rl_run_reports_its_steps_and_samples_and_registers_its_policy(
    alice, client_for, tiny_models, monkeypatch
):
    from training.runs.jobs import run_training_job

    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    reward, start = tiny_models
    asked = questions(2)
    for question in asked:
        answered(question)
    fast = {"steps": 2, "group_size": 3, "questions_per_step": 1, "max_answer_tokens": 8}
    run = request_rl_run(alice, RLRequest(reward, start, settings=fast), queue=False)
    run = run_training_job(run.pk)
    assert run.status == "done", run.error
    assert [entry["step"] for entry in run.timeline] == [1, 2] and "reward_mean" in run.timeline[-1]
    assert run.samples and all(sample["step"] == 2 for sample in run.samples)
    policy = ModelCheckpoint.objects.get(run=run)
    assert (policy.kind, policy.name, policy.base_model) == (RunKind.RL, f"rl-run-{run.pk}", "tiny-bc")
    assert saved_policy_format(Path(policy.path)) == BC  # it started from a BC model
    page = client_for(alice).get(reverse("training:run", args=[run.pk])).content.decode()
    assert "<h3>Mean reward</h3>" in page and f"rl-run-{run.pk}" in page and "Episodes of step 2" in page


@pytest.fixture
def tiny_models(tiny_bert_dir, tmp_path) -> tuple[ModelCheckpoint, ModelCheckpoint]:
    """A registered tiny reward model and a tiny BC policy (fixed weights), as RL runs start from them."""
    from tests.test_sampling_core import seeded_tiny_llama
    from tests.tiny_models import tiny_reward_model

    rm_dir = tiny_reward_model(tmp_path / "rm", tiny_bert_dir, offset=0.25, max_length=128)
    policy_dir = seeded_tiny_llama(tmp_path / "bc")
    return model(RunKind.RM, "tiny-rm", str(rm_dir)), model(RunKind.BC, "tiny-bc", str(policy_dir))


@pytest.mark.django_db
def test_a_browsing_run_browses_the_runs_corpus_and_its_page_shows_the_share_of_valid_actions(
    alice, client_for, freshwiki, tiny_models, monkeypatch
):
    from training.runs.jobs import run_training_job

    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    reward, start = tiny_models
    asked = questions(1)  # no reference: browsing episodes need none
    browse = {"episodes": "browse", "steps": 1, "group_size": 2, "max_actions": 2, "max_command_tokens": 12}
    browse |= {"answers_per_browse": 1, "max_answer_tokens": 8, "questions_per_step": 1}
    request = RLRequest(reward, start, ids=(asked[0].pk,), corpus="freshwiki", settings=browse)
    run = run_training_job(request_rl_run(alice, request, queue=False).pk)
    assert run.status == "done", run.error
    assert 0 <= run.timeline[0]["valid_actions"] <= 1
    browsing = [sample for sample in run.samples if sample["kind"] == "browse"]
    assert len(browsing) == 2 and all(1 <= len(sample["commands"]) <= 2 for sample in browsing)
    page = client_for(alice).get(reverse("training:run", args=[run.pk])).content.decode()
    assert "<h3>Share of valid actions</h3>" in page and "command(s)</summary>" in page


@pytest.mark.django_db
def test_a_run_stopped_by_its_kl_budget_says_so_and_registers_the_policy_within_it(
    alice, client_for, tiny_models
):
    from training.runs.jobs import run_training_job

    reward, start = tiny_models
    for question in questions(2):
        answered(question)
    budget = {"steps": 5, "kl_budget": 1e-9, "learning_rate": 1e-2, "group_size": 2, "max_answer_tokens": 4}
    run = run_training_job(request_rl_run(alice, RLRequest(reward, start, settings=budget), queue=False).pk)
    assert run.status == "done" and run.step == 1 and run.metrics["stopped"] == "kl_budget"
    assert (
        "Stopped early after step 1 of 5: the mean KL from the starting policy passed the budget" in run.log
    )
    assert ModelCheckpoint.objects.filter(run=run, kind=RunKind.RL).exists()
    page = client_for(alice).get(reverse("training:run", args=[run.pk])).content.decode()
    assert "KL budget" in page  # the budget's line on the KL chart


@pytest.mark.django_db
def test_a_cancel_after_a_step_keeps_the_curves_and_samples_and_no_policy(alice, tiny_models, monkeypatch):
    from training.checkpoints import output_dir
    from training.runs.jobs import run_training_job

    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    reward, start = tiny_models
    for question in questions(2):
        answered(question)
    fast = {"steps": 3, "group_size": 2, "questions_per_step": 1, "max_answer_tokens": 4}
    run = request_rl_run(alice, RLRequest(reward, start, settings=fast), queue=False)

    def cancel_after_step(step: int, total: int, logs: dict) -> None:  # the command's progress hook
        TrainingRun.objects.filter(pk=run.pk).update(cancel_requested=True)

    run = run_training_job(run.pk, echo=cancel_after_step)
    assert run.status == "cancelled" and run.step == 1
    assert len(run.timeline) == 1 and run.samples and run.samples[0]["step"] == 1
    assert not ModelCheckpoint.objects.filter(run=run).exists() and not output_dir(run.pk).exists()
    assert "the partly trained policy was discarded" in run.log


@pytest.mark.django_db
def test_a_reward_model_a_queued_rl_run_trains_against_is_not_deleted(alice, rm, rl_questions_with_reference):
    from training.runs.jobs import delete_checkpoint

    run = request_rl_run(alice, RLRequest(rm), queue=False)
    with pytest.raises(RunError, match="tiny-rm is in use by a queued or running run"):
        delete_checkpoint(alice, rm)
    TrainingRun.objects.filter(pk=run.pk).update(status="done")
    delete_checkpoint(alice, rm)
    run.refresh_from_db()
    assert run.reward_model is None and run.reward_model_name == "tiny-rm"  # the lineage keeps its name
