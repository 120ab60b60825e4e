"""Benchmark runs as the console page, the API and ``run_experiment`` ask for them: one check of every input
(``check_benchmark``), the run's answers requested as a sampling run of the benchmark's ``eval`` questions
(not queued: the benchmark's job runs it), the benchmark's row, its job queued on the ``sampling`` queue
once committed, and cancelling (its sampling run and judge run with it). Nothing here loads torch.

The questions are the benchmark dataset's ``eval`` split (WebGPT section 4 measures on held-out questions;
the splits keep training off them), the first ``limit`` by id: the same questions for every policy, so
their scores compare.

TruthfulQA is judged by a language model behind an endpoint of ``SAMPLING_ENDPOINTS`` (the endpoint's
model with the rating prompt, on the TruthfulQA preset's two questions) or by a reward model trained on
its reference judgements (``truthfulqa_reward``), and/or by people: the run's rating batch is opened to
labelers when ``people`` is asked for. At least one is required."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation.models import Split
from annotation.questions.service import DEFAULT_DATASETS
from core.jobs.queueing import enqueue
from core.models import log_action
from training.errors import RunError
from training.judging.runs import check_settings as check_judge_settings
from training.models import Benchmark, BenchmarkRun, ModelCheckpoint, RunKind
from training.sampling.runs import QuestionSet, SamplingRequest, cancel_sampling, request_sampling

# A benchmark's questions: its dataset as ``import_questions`` names it.
DATASETS = {benchmark: DEFAULT_DATASETS[benchmark] for benchmark in Benchmark.values}
DEFAULT_LIMIT = 50
JUDGE_SETTINGS = ("temperature", "max_tokens", "seed")


@dataclass(frozen=True)
class BenchmarkRequest:
    """A policy (with its sampling settings, ``sampling.questions`` ignored) on a benchmark."""

    benchmark: str
    sampling: SamplingRequest
    limit: int = DEFAULT_LIMIT
    judge_endpoint: str = ""  # TruthfulQA: an endpoint of SAMPLING_ENDPOINTS judges the answers
    judge_reward_model: ModelCheckpoint | None = None  # or a reward model trained on its references
    judge_settings: dict[str, Any] = field(default_factory=dict)
    people: bool = False  # TruthfulQA: the rating batch opened to labelers


def benchmark_questions(benchmark: str, limit: int) -> QuestionSet:
    return QuestionSet(split=Split.EVAL, dataset=DATASETS[benchmark], limit=limit)


def check_benchmark(request: BenchmarkRequest) -> dict[str, Any]:
    """The judge as stored on the run ({} for TriviaQA), or RunError naming the input at fault. The
    sampling inputs are checked by the sampling run's own check when it is requested."""
    if request.benchmark not in Benchmark.values:
        raise RunError(f"expected one of {', '.join(Benchmark.values)}", "benchmark")
    if request.sampling.settings.get("at_states"):
        raise RunError(
            "a benchmark run answers its questions: it cannot sample at demonstration states", "at_states"
        )
    if request.benchmark == Benchmark.TRIVIAQA:
        if request.judge_endpoint or request.judge_reward_model or request.people or request.judge_settings:
            field_name = (
                "people"
                if request.people
                else "judge_reward_model"
                if request.judge_reward_model
                else "judge_endpoint"
            )
            raise RunError("TriviaQA is scored against its answers' aliases: no judge, no people", field_name)
        return {}
    if not request.judge_endpoint and request.judge_reward_model is None and not request.people:
        raise RunError(
            "choose who judges TruthfulQA: a language model behind an endpoint or a reward model, people, or "
            "both",
            "judge_endpoint",
        )
    if request.judge_endpoint and request.judge_reward_model is not None:
        raise RunError("choose one judge: an endpoint's model or a reward model", "judge_reward_model")
    judge: dict[str, Any] = {"people": request.people}
    if (model := request.judge_reward_model) is not None:
        if model.kind != RunKind.RM:
            raise RunError("the judge must be a registered reward model", "judge_reward_model")
        if request.judge_settings:
            raise RunError("only for a language model's judging", "judge_settings")
        judge |= {"reward_model": model.pk, "reward_model_name": model.name}
    if request.judge_endpoint:
        endpoint = settings.SAMPLING_ENDPOINTS.get(request.judge_endpoint)
        if endpoint is None:
            names = ", ".join(settings.SAMPLING_ENDPOINTS) or "none configured"
            raise RunError(f"unknown endpoint; expected one of: {names}", "judge_endpoint")
        if endpoint.policy != "prompted":
            raise RunError(
                "a judge is prompted with instructions: choose an endpoint serving an instruct model "
                "(policy prompted), not a behaviour-cloned one",
                "judge_endpoint",
            )
        given = request.judge_settings if isinstance(request.judge_settings, dict) else {}
        if wrong := sorted(set(given) - set(JUDGE_SETTINGS)):
            raise RunError(f"not a judge setting; expected {', '.join(JUDGE_SETTINGS)}", wrong[0])
        values = check_judge_settings(given)
        judge |= {"endpoint": request.judge_endpoint, "settings": {k: values[k] for k in JUDGE_SETTINGS}}
    return judge


def request_benchmark(user: Any, request: BenchmarkRequest, *, queue: bool = True) -> BenchmarkRun:
    """Check, create the sampling run (unqueued) and the benchmark's row, queue the job once committed.
    Raises RunError with the reason (nothing is created then)."""
    judge = check_benchmark(request)
    sampling = replace(request.sampling, questions=benchmark_questions(request.benchmark, request.limit))
    with transaction.atomic():
        try:
            answers = request_sampling(user, sampling, queue=False)
        except RunError as exc:
            if exc.field == "questions":  # said in the benchmark's words
                raise RunError(
                    f"no {Benchmark(request.benchmark).label} questions in the eval split: import its "
                    "question file (data/questions/)",
                    "benchmark",
                ) from None
            raise
        run = BenchmarkRun.objects.create(
            owner=user if getattr(user, "is_authenticated", False) else None,
            benchmark=request.benchmark,
            sampling_run=answers,
            judge=judge,
        )
        log_action(user, "benchmark.request", run, benchmark=run.benchmark, policy=answers.policy_name)
        if queue:
            enqueue(run)
    return run


def cancel_benchmark(user: Any, run: BenchmarkRun) -> None:
    """The run and what it is running: its sampling run (which keeps the questions it finished) and its
    judge run (which keeps the items it judged)."""
    run.request_cancel()
    cancel_sampling(user, run.sampling_run)
    if run.judge_run is not None:
        run.judge_run.request_cancel()
    log_action(user, "benchmark.cancel", run)
