"""RL runs on real Celery worker processes of the ``training`` queue (tests/test_rl_runs.py runs the job in
this process): one asked for over the API runs to done and registers a policy that then samples answers in a
sampling run, and one whose worker is killed mid-step is failed by the next worker's sweep, registering
nothing."""

from __future__ import annotations

import pytest

from core.jobs.heartbeat import WORKER_STOPPED
from tests.conftest import running_worker
from tests.test_job_faults import FAST_LIVENESS, kill_when_paused, wait_for
from tests.test_rl_runs import answered, model, questions
from tests.test_sampling_core import seeded_tiny_llama
from tests.test_training_jobs import worker_env
from tests.tiny_models import tiny_reward_model
from training.models import ModelCheckpoint, RunKind, RunStatus, TrainingRun
from training.rl.inputs import RLRequest
from training.rl.runs import request_rl_run
from training.sampling.jobs import run_sampling_job
from training.sampling.runs import QuestionSet, SamplingRequest, request_sampling

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("model_store"),
]


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rl-rm"), tiny_bert_dir, offset=0.25, max_length=128)


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return seeded_tiny_llama(tmp_path_factory.mktemp("rl-bc"))


def test_an_rl_run_asked_for_over_the_api_reaches_done_and_its_policy_samples_answers(
    settings, tmp_path, alice, freshwiki, reward_dir, policy_dir, broker_namespace
):
    from tests.test_api import api

    reward = model(RunKind.RM, "tiny-rm", str(reward_dir))
    start = model(RunKind.BC, "tiny-bc", str(policy_dir))
    for question in questions(2):
        answered(question)
    body = {
        "kind": "rl",
        "reward_model": reward.pk,
        "base_checkpoint": start.pk,
        "questions": {"limit": 2},
        "settings": {"steps": 2, "group_size": 2, "questions_per_step": 1, "max_answer_tokens": 6},
    }
    response = api(alice).post("/api/training-runs", body, format="json")
    assert response.status_code == 202, response.content
    run = TrainingRun.objects.get(pk=response.json()["id"])
    with running_worker(worker_env(settings, tmp_path), queues="training"):
        run = wait_for(run, lambda r: r.is_finished, seconds=240)
    assert run.status == RunStatus.DONE, run.error
    assert run.step == run.total_steps == 2 and len(run.timeline) == 2 and run.samples
    policy = ModelCheckpoint.objects.get(run=run)
    assert (policy.kind, policy.base_model) == (RunKind.RL, "tiny-bc")

    # The registered policy browses the corpus as a sampling run's policy (one of the run's questions).
    sampling = request_sampling(
        alice,
        SamplingRequest(
            policy=policy,
            questions=QuestionSet(split="rl", limit=1),
            settings={"n": 1, "max_actions": 2, "max_answer_tokens": 6, "max_command_tokens": 12},
        ),
        queue=False,
    )
    sampled = run_sampling_job(sampling.pk)
    assert sampled.status == RunStatus.DONE, sampled.error
    assert sampled.policy_name == policy.name and sampled.samples.count() == 1


def test_an_rl_run_whose_worker_is_killed_mid_step_fails_and_registers_nothing(
    settings, tmp_path, alice, reward_dir, policy_dir, broker_namespace
):
    reward = model(RunKind.RM, "tiny-rm", str(reward_dir))
    start = model(RunKind.BC, "tiny-bc", str(policy_dir))
    for question in questions(2):
        answered(question)
    fast = {"steps": 4, "group_size": 2, "questions_per_step": 1, "max_answer_tokens": 4}
    run = request_rl_run(alice, RLRequest(reward, start, settings=fast))  # queued at once: no transaction
    env = worker_env(settings, tmp_path) | FAST_LIVENESS
    # The job's first progress write (after step 1) waits there for the kill, with steps left to take.
    run = kill_when_paused(env, "training", run, "training_trainingrun", "step")
    assert run.status == RunStatus.FAILED and run.error.startswith(WORKER_STOPPED)
    assert run.step < run.total_steps and not ModelCheckpoint.objects.filter(run=run).exists()
