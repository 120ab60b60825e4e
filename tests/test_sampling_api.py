"""Sampling runs over the API and the ``sample_answers`` command: the same checks (request_sampling) with
refusals by field and nothing created, 202 and a queued row, a run's detail and samples after the job ran
on tiny models, cancel, 404 for everyone but researchers, and the backends listed without key variables."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Episode, Question
from tests.test_api import api
from tests.test_sampling_jobs import TINY, questions
from tests.tiny_models import tiny_reward_model
from training.models import ModelCheckpoint, RunKind, RunStatus, SamplingRun
from training.sampling.endpoints import EndpointConfig
from training.sampling.jobs import run_sampling_job

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rm"), tiny_bert_dir, offset=0.25, max_length=64)


@pytest.fixture
def policy(tiny_llama_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="random", path=str(tiny_llama_dir)
    )


@pytest.fixture
def reward_model(reward_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-rm", base_model="random", path=str(reward_dir)
    )


@pytest.fixture
def endpoint(settings) -> EndpointConfig:
    config = EndpointConfig("gpu", "http://127.0.0.1:9/v1", "smollm2", api_key_env="GPU_SECRET_KEY_VAR")
    settings.SAMPLING_ENDPOINTS = {"gpu": config}
    return config


def ask(user, body: dict):
    return api(user).post("/api/sampling-runs", body, format="json")


def test_refusals_come_back_by_field_and_create_nothing(alice, policy, reward_model, endpoint):
    questions(1)
    demo = {"dataset": "demo"}
    choose = "choose the questions: a demonstration batch, a split or a dataset"
    cases = [
        ({"settings": {"n": 0}}, {"settings": {"n": ["must be between 1 and 64"]}}),
        ({"settings": {"n": "4"}}, {"settings": {"n": ["expected a number, got str"]}}),
        ({"settings": {"beam": 3}}, {"settings": ["unknown setting(s): beam"]}),
        ({"settings": {"limit": 3}}, {"settings": {"limit": ["give the limit under questions"]}}),
        ({"settings": "hot"}, {"settings": ['Expected a dictionary of items but got type "str".']}),
        ({"backend": "nowhere"}, {"backend": ["unknown backend; expected one of local, gpu"]}),
        (
            {"backend": "http://169.254.169.254/v1"},  # a name, never a URL
            {"backend": ["unknown backend; expected one of local, gpu"]},
        ),
        ({"backend": "gpu"}, {"policy": ["an endpoint serves its own model: leave the policy empty"]}),
        (
            {"settings": {"decline_threshold": 0.5}},
            {
                "settings": {
                    "decline_threshold": ["declining below a threshold needs a reward model to score"]
                }
            },
        ),
        ({"questions": {}}, {"questions": [choose]}),
        ({"questions": None}, {"questions": ["This field may not be null."]}),
        ({"questions": {"dataset": "nowhere"}}, {"questions": ["no question matches this choice"]}),
        ({"questions": {"split": "test"}}, {"questions": {"split": ["expected one of bc, rm, rl, eval"]}}),
        ({"questions": demo | {"limit": 0}}, {"questions": {"limit": ["must be between 1 and 10000"]}}),
        ({"questions": {"batch": 999999}}, {"questions": {"batch": ["no such demonstration batch"]}}),
        (
            {"questions": demo | {"splt": "eval"}},
            {"questions": {"splt": ["unknown; expected batch, split, dataset, limit"]}},
        ),
        (
            {"temprature": 0.5},
            {
                "temprature": [
                    "unknown; expected policy, reward_model, step_model, backend, search, corpus, questions, "
                    "settings"
                ]
            },
        ),
        (
            {"policy": reward_model.pk},
            {"policy": ["the policy must be a BC or RL model (or empty: the prompted SmolLM2 default)"]},
        ),
        (
            {"reward_model": policy.pk},
            {"reward_model": ["the reward model must be a registered reward model"]},
        ),
        ({"reward_model": 999999}, {"reward_model": ["no such model"]}),
    ]
    for change, errors in cases:
        body = {"policy": policy.pk, "questions": demo, "settings": TINY} | change
        response = ask(alice, body)
        assert response.status_code == 400, (change, response.content)
        assert response.json() == errors, change
    assert not SamplingRun.objects.exists() and not Episode.objects.exists()


def test_a_valid_request_answers_202_with_a_queued_run_listed_newest_first(alice, policy, reward_model):
    asked = questions(3)
    body = {
        "policy": policy.pk,
        "reward_model": reward_model.pk,
        "questions": {"dataset": "demo", "split": "eval", "limit": 2},
        "settings": TINY | {"temperature": 0.5, "constrain_commands": True, "decline_threshold": -1},
    }
    response = ask(alice, body)
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["status"] == "queued" and run["percent"] == 0 and run["question_count"] == 2
    assert (
        run["policy_name"] == "tiny-bc"
        and run["reward_model_name"] == "tiny-rm"
        and run["backend"] == "local"
    )
    assert run["n"] == 2 and run["episodes_total"] == 4
    assert run["settings"]["temperature"] == 0.5 and run["settings"]["decline_threshold"] == -1.0
    assert run["question_source"] == {"batch": None, "split": "eval", "dataset": "demo", "limit": 2}
    assert SamplingRun.objects.get(pk=run["id"]).question_ids == [q.pk for q in asked[:2]]

    later = ask(alice, {"questions": {"dataset": "demo"}}).json()  # the prompted default, every default
    assert later["policy"] is None and later["policy_name"].endswith("(prompted)") and later["n"] == 4
    listed = api(alice).get("/api/sampling-runs").json()
    assert listed["count"] == 2 and [r["id"] for r in listed["results"]] == [later["id"], run["id"]]


def test_a_run_reads_back_with_its_samples_scores_and_choices(alice, freshwiki, policy, reward_model):
    asked = questions(2)  # TINY's seed is the one whose tiny policy answers (test_sampling_jobs)
    body = {"policy": policy.pk, "reward_model": reward_model.pk, "questions": {"dataset": "demo"}}
    created = ask(alice, body | {"settings": TINY}).json()
    assert run_sampling_job(created["id"]).status == RunStatus.DONE

    run = api(alice).get(f"/api/sampling-runs/{created['id']}").json()
    assert run["status"] == "done" and run["percent"] == 100 and run["episodes_done"] == 4
    assert run["tokens_generated"] > 0 and run["tokens_per_second"] > 0 and not run["error"]
    assert run["metrics"]["questions"] == 2 and 0 <= run["metrics"]["invalid_action_rate"] <= 1

    page = api(alice).get(f"/api/sampling-runs/{created['id']}/samples").json()
    samples = page["results"]
    assert page["count"] == 4
    assert [(s["question"], s["index"]) for s in samples] == [(q.pk, i) for q in asked for i in range(2)]
    for s in samples:
        assert s["question_text"] == Question.objects.get(pk=s["question"]).text
        assert s["actions"] >= 1 and 0 <= s["invalid_actions"] <= s["actions"] and s["tokens"] > 0
        assert isinstance(s["quotes"], list) and (s["score"] is None) == (s["answer"] == "")
        assert not s["declined"]
        episode = api(alice).get(f"/api/episodes/{s['episode']}").json()  # the trajectory, one call away
        assert episode["answer"] == s["answer"] and len(episode["actions"]) == s["actions"]
    chosen_per_question = []
    for question in asked:
        group = [s for s in samples if s["question"] == question.pk]
        answered = [s for s in group if s["score"] is not None]
        best = max(answered, key=lambda s: (s["score"], -s["index"]), default=None)
        assert [s for s in group if s["chosen"]] == ([best] if best else [])
        chosen_per_question.append(best is not None)
    assert any(chosen_per_question)  # answered, scored and chosen


def test_cancel_stops_a_queued_run(alice, policy):
    questions(1)
    run = ask(alice, {"policy": policy.pk, "questions": {"dataset": "demo"}}).json()
    response = api(alice).post(f"/api/sampling-runs/{run['id']}/cancel")
    assert response.status_code == 202 and response.json()["status"] == "cancelled"
    assert SamplingRun.objects.get(pk=run["id"]).status == RunStatus.CANCELLED


def test_only_researchers_see_runs_others_get_403_or_404_anonymous_401(alice, bob, dana, charlie, policy):
    questions(1)
    run = ask(alice, {"policy": policy.pk, "questions": {"dataset": "demo"}}).json()
    objects = [f"/api/sampling-runs/{run['id']}", f"/api/sampling-runs/{run['id']}/samples"]
    for user in (bob, dana, charlie):
        for url in objects:
            assert api(user).get(url).status_code == 404, (user, url)
        assert api(user).post(f"/api/sampling-runs/{run['id']}/cancel").status_code == 404
        for url in ("/api/sampling-runs", "/api/sampling-endpoints"):
            assert api(user).get(url).status_code == 403, (user, url)
        assert ask(user, {"policy": policy.pk, "questions": {"dataset": "demo"}}).status_code == 403
    for url in [*objects, "/api/sampling-runs", "/api/sampling-endpoints"]:
        assert api().get(url).status_code == 401, url
    assert api().post(f"/api/sampling-runs/{run['id']}/cancel").status_code == 401
    assert SamplingRun.objects.get().status == RunStatus.QUEUED and SamplingRun.objects.count() == 1


def test_the_backends_are_listed_by_name_without_their_key_variable(alice, endpoint, monkeypatch):
    monkeypatch.setenv("GPU_SECRET_KEY_VAR", "sk-secret-value")
    response = api(alice).get("/api/sampling-endpoints")
    assert response.status_code == 200
    backends = response.json()
    assert [b["name"] for b in backends] == ["local", "gpu"]
    assert backends[1] == {"kind": "endpoint", **endpoint.public()}
    assert "api_key_env" not in backends[1] and b"GPU_SECRET_KEY_VAR" not in response.content
    assert b"sk-secret" not in response.content

    questions(1)
    run = ask(alice, {"backend": "gpu", "questions": {"dataset": "demo"}}).json()  # named, never a URL
    assert run["backend"] == "gpu" and run["policy_name"] == "gpu:smollm2"


def test_the_command_samples_with_a_progress_bar_and_a_summary(freshwiki, policy, reward_model):
    questions(2)
    expected = TINY | {"decline_threshold": -1000.0}
    given = expected | {"constrain_commands": "on" if TINY["constrain_commands"] else "off"}
    options = [item for name, value in given.items() for item in (f"--{name.replace('_', '-')}", value)]
    out = StringIO()
    models = ("--policy", policy.pk, "--reward-model", reward_model.pk)
    call_command("sample_answers", *models, "--dataset", "demo", *options, stdout=out)
    run = SamplingRun.objects.get()
    text = out.getvalue()
    assert run.status == RunStatus.DONE and run.owner is None
    assert {name: run.n if name == "n" else run.settings[name] for name in expected} == expected
    assert "] 4/4 episodes" in text and "tokens/s" in text  # the progress bar's last state
    answered = run.metrics["answered"]
    assert answered >= 1  # the seed's tiny policy answers (test_sampling_jobs)
    counts = f"{answered} answered, 0 declined, {2 - answered} without an answer"
    summary = rf"run {run.pk} done: 2 question\(s\); {counts}; "
    assert re.search(summary + r"invalid actions \d+\.\d% \(\d+ of \d+\); \d+\.\d tokens/s", text), text
    assert text.endswith(f"trajectories: /console/training/sampling/{run.pk}/\n")


def test_the_command_queues_for_the_worker_with_queue(policy):
    questions(2)
    out = StringIO()
    call_command(
        "sample_answers", "--policy", policy.pk, "--split", "eval", "--limit", 1, "--queue", stdout=out
    )
    run = SamplingRun.objects.get()
    assert run.status == RunStatus.QUEUED and run.question_ids == [Question.objects.first().pk]
    page = f"/console/training/sampling/{run.pk}/"
    assert out.getvalue() == f"run {run.pk} queued on the sampling worker; its page: {page}\n"


def test_the_command_refuses_bad_options_naming_them(policy, reward_model):
    questions(1)
    cases = [
        (["--dataset", "demo", "--n", "0"], "--n: must be between 1 and 64"),
        (["--dataset", "demo", "--temperature", "9"], "--temperature: must be between 0 and 2"),
        (["--dataset", "demo", "--max-command-tokens", "0"], "--max-command-tokens: must be between 1 and"),
        (["--dataset", "demo", "--decline-threshold", "0"], "--decline-threshold: declining below"),
        (["--dataset", "demo", "--backend", "http://10.0.0.1/v1"], "--backend: unknown backend"),
        (
            ["--dataset", "demo", "--policy", str(reward_model.pk)],
            "--policy: the policy must be a BC or RL model",
        ),
        (["--dataset", "demo", "--policy", "999999"], "--policy: model 999999 does not exist"),
        (["--batch", "999999"], "--batch: demonstration batch 999999 does not exist"),
        ([], "--batch/--split/--dataset: choose the questions"),
        (["--split", "test"], "--split: expected one of"),
        (["--dataset", "demo", "--constrain-commands", "maybe"], "invalid choice: 'maybe'"),
    ]
    for options, message in cases:
        with pytest.raises(CommandError, match=message.replace("/", ".")):
            call_command("sample_answers", *options, stdout=StringIO())
    assert not SamplingRun.objects.exists()
