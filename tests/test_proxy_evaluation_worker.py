"""Proxy evaluations on real Celery worker processes of the ``training`` queue (tests/test_proxy_evaluation.py
runs the job in this process): one queued by the service runs to done with the curves this process
computes for the same request, and one whose worker is killed mid-scoring is failed by the next worker's
sweep, keeping no scores and no curves."""

from __future__ import annotations

import pytest

from core.jobs.heartbeat import WORKER_STOPPED
from tests.conftest import running_worker
from tests.test_job_faults import FAST_LIVENESS, kill_when_paused, wait_for
from tests.test_proxy_evaluation import ANSWERS, crafted_run, questions
from tests.test_training_jobs import worker_env
from tests.tiny_models import tiny_reward_model
from training.evaluation.proxy_jobs import (
    SCORE_CHUNK,
    ProxyRequest,
    request_proxy_evaluation,
    run_proxy_evaluation_job,
)
from training.models import ModelCheckpoint, RunKind, RunStatus, SamplingRun

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("model_store"),
]

POINT_FIELDS = ("mean", "low", "high", "preference", "preference_low", "preference_high")


@pytest.fixture(scope="module")
def validation_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("val"), tiny_bert_dir, offset=0.75, max_length=64)


@pytest.fixture
def validation_model(validation_dir) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="tiny-validation", base_model="x", path=str(validation_dir)
    )


def scored_run(owner, asked: int, samples: int) -> SamplingRun:
    """A finished run of ``asked`` questions, ``samples`` answers each, chosen by a reward model of its own
    (registered only: the evaluation reads the scores it gave, never its folder)."""
    chooser = ModelCheckpoint.objects.create(kind=RunKind.RM, name="tiny-rm", base_model="x", path="/rm")
    answers = [
        [(ANSWERS[i % len(ANSWERS)], (7 * i + q) % 10 / 10) for i in range(samples)] for q in range(asked)
    ]
    return crafted_run(owner, chooser, questions(asked), answers)


def test_a_proxy_evaluation_queued_by_the_service_runs_to_done_on_a_real_worker(
    settings, tmp_path, alice, validation_model, broker_namespace
):
    run = scored_run(alice, asked=2, samples=4)
    request = ProxyRequest(validation_model, [run], seed=5, resamples=200)
    evaluation = request_proxy_evaluation(alice, request)  # sent once committed: at once, no transaction here
    assert evaluation.status == RunStatus.QUEUED
    with running_worker(worker_env(settings, tmp_path), queues="training"):
        evaluation = wait_for(evaluation, lambda e: e.is_finished, seconds=180)
    assert evaluation.status == RunStatus.DONE, evaluation.error
    assert evaluation.samples_done == evaluation.samples_total == len(evaluation.scores) == 8
    assert "curves of 1 run(s) computed" in evaluation.log and evaluation.finished_at
    [curve] = evaluation.results["runs"]
    assert (curve["run"], curve["selection"], curve["answered_questions"]) == (run.pk, "reward model", 2)
    assert [point["k"] for point in curve["points"]] == [1, 2, 4]
    # The worker scored and drew what this process does for the same request (seeded bootstrap).
    here = run_proxy_evaluation_job(request_proxy_evaluation(alice, request, queue=False).pk)
    assert here.status == RunStatus.DONE and evaluation.scores == pytest.approx(here.scores, abs=1e-5)
    [expected] = here.results["runs"]
    for point, same in zip(curve["points"], expected["points"], strict=True):
        assert (point["k"], point["questions"]) == (same["k"], same["questions"])
        assert [point[name] for name in POINT_FIELDS] == pytest.approx(
            [same[name] for name in POINT_FIELDS], abs=1e-4
        )


def test_a_proxy_evaluation_whose_worker_is_killed_mid_scoring_fails_keeping_no_curves(
    settings, tmp_path, alice, validation_model, broker_namespace
):
    # More samples than one chunk of the scorer: the job writes its progress after the first chunk, and
    # waits there (paused_at_progress) for the kill, with samples left to score.
    run = scored_run(alice, asked=2, samples=SCORE_CHUNK)
    evaluation = request_proxy_evaluation(alice, ProxyRequest(validation_model, [run]))
    env = worker_env(settings, tmp_path) | FAST_LIVENESS
    evaluation = kill_when_paused(env, "training", evaluation, "training_proxyevaluation", "samples_done")
    assert evaluation.status == RunStatus.FAILED and evaluation.error.startswith(WORKER_STOPPED)
    assert (evaluation.scores, evaluation.results) == ({}, {})  # the scores so far went with the worker
    assert evaluation.samples_done < evaluation.samples_total == 2 * SCORE_CHUNK
