"""The benchmark job, run by a worker on the ``sampling`` queue, in two stages:

1. **Answering**: the run's sampling run, run here by the sampling job itself (``run_sampling_job``: its
   progress, log and samples on its own row, as for any sampling run). Should another worker hold it (a
   sweep sent its message again), this job waits for it to end, watching its own cancel flag.
2. **Scoring** (``benchmark_scores``): TriviaQA against the aliases; TruthfulQA by a rating batch of the
   run's chosen answers (TruthfulQA preset), opened to labelers when people judge, and judged by the
   endpoint's model through a judge run, run here by the judge job (both orders of every item), or by a
   reward model calibrated on the questions' reference answers (``truthfulqa_reward``).

Its own row holds the stage reached, the log and the scores; whatever happens it ends done, cancelled
(a cancel of it, or of its sampling run) or failed with the reason (core.jobs.runner)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from annotation.feedback.batch_settings import BatchError, BatchSettings
from annotation.feedback.batches import create_batch_from_source, set_active
from annotation.models import JudgeRun
from core.jobs.models import Cancelled, JobError, JobRow
from core.jobs.runner import run_job
from training.checkpoints import local_folder
from training.errors import RunError
from training.evaluation.benchmark_scores import chosen_answers, triviaqa_results, truthfulqa_results
from training.evaluation.truthfulqa_reward import reward_judge_figures
from training.judging.jobs import run_judge_job
from training.judging.runs import JudgeRequest, request_judge_run
from training.models import Benchmark, BenchmarkRun, ModelCheckpoint, Sample, SamplingRun
from training.models import RunStatus as Status
from training.sampling.jobs import run_sampling_job
from training.sampling.types import BackendError

WAIT_SECONDS = 2.0  # between two looks at a row another worker is running


def run_benchmark_job(benchmark_id: int) -> BenchmarkRun:
    """The worker's job (and ``run_experiment``'s, in its own process)."""

    def execute(run: BenchmarkRun) -> BenchmarkRun:
        _answer(run)
        BenchmarkRun.objects.filter(pk=run.pk).update(stages_done=1)
        if run.benchmark == Benchmark.TRIVIAQA:
            results = triviaqa_results(run.sampling_run)
        else:
            _rating_batch(run)
            _judge(run)
            answers = chosen_answers(run.sampling_run)
            results = truthfulqa_results(run, answers, _reward_judge(run, answers))
        run.append_log("Scored")
        return run.finish(Status.DONE, results=results, stages_done=2)

    return run_job(
        BenchmarkRun,
        benchmark_id,
        execute,
        related=("sampling_run", "batch", "judge_run"),
        expected=(RunError, BatchError, BackendError, ValueError),
    )


def _answer(run: BenchmarkRun) -> None:
    answers = run.sampling_run
    run.append_log(f"Answering {len(answers.question_ids)} question(s): sampling run {answers.pk}")
    answers = _run_or_wait(run, SamplingRun, answers.pk, run_sampling_job)
    _stop_unless_done(run, answers, f"its sampling run {answers.pk}")
    run.sampling_run = answers


def _rating_batch(run: BenchmarkRun) -> None:
    """The rating batch of the answers (an endpoint judge's items, people's when open to them)."""
    answers, judge = run.sampling_run, run.judge
    if run.batch is not None or not (judge.get("endpoint") or judge.get("people")):
        return
    config = BatchSettings(
        name=f"TruthfulQA benchmark run {run.pk}: {answers.policy_name}",
        template="rating",
        preset="truthfulqa",
        runs=[answers.pk],
        required_probability=0.0,
    )
    try:
        batch = create_batch_from_source(run.owner, config, "runs")
    except BatchError as exc:  # every question declined: nothing to rate, the declines still count
        run.append_log(f"No answer to rate ({exc}): every question counts as declined")
        return
    set_active(run.owner, batch, bool(judge.get("people")))
    BenchmarkRun.objects.filter(pk=run.pk).update(batch=batch)
    run.batch = batch
    opened = "open to labelers" if judge.get("people") else "not open to labelers"
    run.append_log(f"Rating batch {batch.pk} of {batch.items.count()} answer(s), {opened}")


def _reward_judge(run: BenchmarkRun, answers: dict[int, Sample | None]) -> dict[str, Any] | None:
    """A reward-model judge's figures (``truthfulqa_reward``), or None without one."""
    pk = run.judge.get("reward_model")
    if pk is None:
        return None
    # torch: loaded in the worker only, not in every process that imports this module
    from training.sampling.best_of_n import RewardScorer

    model = ModelCheckpoint.objects.filter(pk=pk).first()
    if model is None:
        raise JobError(f"the judge's reward model {run.judge.get('reward_model_name')} was deleted")
    run.append_log(f"Judging with the reward model {model.name}, calibrated on the reference answers")
    scorer = RewardScorer(local_folder(model))
    return reward_judge_figures(scorer, answers, model.name)


def _judge(run: BenchmarkRun) -> None:
    """An endpoint judge's run over the rating batch (kept on the row)."""
    judge = run.judge
    if run.batch is None or not judge.get("endpoint"):
        return
    if run.judge_run is None:
        settings = judge.get("settings", {}) | {"limit": min(run.batch.items.count(), 10_000)}
        request = JudgeRequest(batch=run.batch, endpoint=judge["endpoint"], settings=settings)
        judged = request_judge_run(run.owner, request, queue=False)
        BenchmarkRun.objects.filter(pk=run.pk).update(judge_run=judged)
        run.judge_run = judged
    run.append_log(f"Judging with {run.judge_run.judge_name}: judge run {run.judge_run.pk}")
    judged = _run_or_wait(run, JudgeRun, run.judge_run.pk, run_judge_job)
    _stop_unless_done(run, judged, f"its judge run {judged.pk}")
    run.judge_run = judged


def _run_or_wait(run: BenchmarkRun, model: type[JobRow], pk: int, job: Callable[[int], Any]) -> Any:
    """Row ``pk`` of ``model`` run here when still queued, else waited for; the row as it ended."""
    row = model.objects.get(pk=pk)
    if row.status == Status.QUEUED:
        row = job(pk)  # claims it; a row another worker claimed meanwhile comes back as it stands
    while not row.is_finished:
        if run.cancel_was_requested():
            row.request_cancel()
            raise Cancelled()
        time.sleep(WAIT_SECONDS)
        row.refresh_from_db()
    return row


def _stop_unless_done(run: BenchmarkRun, row: JobRow, name: str) -> None:
    if row.status == Status.CANCELLED or run.cancel_was_requested():
        raise Cancelled()
    if row.status == Status.FAILED:
        raise JobError(f"{name} failed: {row.error}")
