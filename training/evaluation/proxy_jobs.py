"""Reward-model proxy evaluations as jobs: checked and queued by the console page or the API (one check,
``check_proxy_request``, for both), run by a worker on the ``training`` queue. The job scores every
answered sample of the runs with the validation reward model, on exactly the text the run's own reward
model saw (the answer prompt of the question and the sample's quotes, then its answer:
``RewardScorer.score_samples``), then computes the curves (``training.evaluation.proxy``). Progress and the
cancel flag go through the row; whatever happens it ends done, cancelled or failed with the reason."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from annotation.models import Question
from browser.engine.page import Quote
from core.jobs.models import Cancelled
from core.jobs.queueing import enqueue
from core.jobs.runner import run_job
from core.models import log_action
from core.progress import Every, estimated_end
from training.checkpoints import local_folder
from training.errors import RunError
from training.evaluation.proxy import DEFAULT_RESAMPLES, ScoredSample, curve_rows, run_curve
from training.models import ModelCheckpoint, ProxyEvaluation, RunKind, Sample, SamplingRun
from training.models import RunStatus as Status

MAX_RUNS = 8  # curves on one chart that can still be told apart (the palette has eight colours)
BOUNDS = {"seed": (0, 2**31 - 1), "resamples": (100, 10_000)}
# Samples scored between two progress writes and cancel checks: one batch of the scorer (32 could sit
# still for half a minute on a CPU with a SmolLM2-sized reward model).
SCORE_CHUNK = 16


@dataclass(frozen=True)
class ProxyRequest:
    reward_model: ModelCheckpoint | None
    runs: Sequence[SamplingRun] = ()
    seed: int = 0
    resamples: int = DEFAULT_RESAMPLES


def is_scored(run: SamplingRun) -> bool:
    """Whether a reward model chose the run's answers (its name stays if the model was deleted)."""
    return bool(run.reward_model_id or run.reward_model_name)


def answered_samples(run: SamplingRun) -> QuerySet[Sample]:
    """The samples best-of-n could choose: scored ones in a scored run (``best_of_n.choose`` skips the
    rest), those with an answer in an unscored one."""
    samples = Sample.objects.filter(run=run)
    return samples.filter(score__isnull=False) if is_scored(run) else samples.exclude(episode__answer="")


@dataclass(frozen=True)
class CheckedRequest:
    reward_model: ModelCheckpoint
    runs: list[SamplingRun]  # each once, in the order given
    warnings: list[str]  # a validation model that may have seen the runs' questions


def check_proxy_request(request: ProxyRequest) -> CheckedRequest:
    """The request with its warnings, or RunError naming the input a refusal is about."""
    model = request.reward_model
    if model is None:
        raise RunError("choose the validation reward model", "reward_model")
    if model.kind != RunKind.RM:
        raise RunError("the validation model must be a registered reward model", "reward_model")
    for name, (low, high) in BOUNDS.items():
        value = getattr(request, name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise RunError(f"must be a whole number between {low:g} and {high:g}", name)
    runs = list({run.pk: run for run in request.runs}.values())
    if not 1 <= len(runs) <= MAX_RUNS:
        raise RunError(f"choose 1 to {MAX_RUNS} finished sampling runs, not {len(runs)}", "runs")
    for run in runs:
        if not run.is_finished:
            raise RunError(f"sampling run {run.pk} has not finished ({run.get_status_display()})", "runs")
        if not answered_samples(run).exists():
            raise RunError(f"sampling run {run.pk} has no answered samples to score", "runs")
        if run.reward_model_id == model.pk or (run.reward_model and run.reward_model.path == model.path):
            raise RunError(
                f"{model.name} chose the answers of sampling run {run.pk}: a validation reward model "
                "must be another one, trained on a separate split",
                "reward_model",
            )
    return CheckedRequest(model, runs, split_warnings(model, runs))


def split_warnings(model: ModelCheckpoint, runs: Sequence[SamplingRun]) -> list[str]:
    """Why the validation model may not be independent of the runs' questions (not a refusal: the
    researcher may know better, e.g. a model trained outside the platform)."""
    ids = {pk for run in runs for pk in run.question_ids}
    splits = sorted(set(Question.objects.filter(pk__in=ids).values_list("split", flat=True)))
    export = model.run.export if model.run_id else None  # a model registered by hand has no run
    split = (export.filters or {}).get("split") if export is not None else None
    where = f"the runs' questions are from the {', '.join(splits) or 'unknown'} split(s)"
    if export is None:
        return [f"{model.name} has no training export on record, so its split is unknown ({where})."]
    if not split:
        return [f"{model.name} was trained on an export of every split, which may hold the runs' questions."]
    if split in splits:
        return [f"{model.name} was trained on the {split} split, and {where}: use a separate split."]
    return []


def request_proxy_evaluation(user: Any, request: ProxyRequest, *, queue: bool = True) -> ProxyEvaluation:
    """Check, create the row and queue the job once committed. Raises RunError with the reason."""
    checked = check_proxy_request(request)
    model, runs, warnings = checked.reward_model, checked.runs, checked.warnings
    with transaction.atomic():
        evaluation = ProxyEvaluation.objects.create(
            owner=user if getattr(user, "is_authenticated", False) else None,
            reward_model=model,
            reward_model_name=model.name,
            settings={"seed": request.seed, "resamples": request.resamples, "warnings": warnings},
            samples_total=sum(answered_samples(run).count() for run in runs),
        )
        evaluation.sampling_runs.set(runs)
        log_action(user, "proxy_evaluation.request", evaluation, runs=[run.pk for run in runs])
        if queue:
            enqueue(evaluation)
    return evaluation


def cancel_proxy_evaluation(user: Any, evaluation: ProxyEvaluation) -> None:
    """A queued evaluation is cancelled at once; a running one after the samples it is scoring."""
    evaluation.request_cancel()
    log_action(user, "proxy_evaluation.cancel", evaluation)


@dataclass(frozen=True)
class StoredAnswer:
    """A stored sample as ``RewardScorer.score_samples`` reads one (``best_of_n.Answerable``)."""

    question: str
    quotes: tuple[Quote, ...]
    answer: str | None


def run_proxy_evaluation_job(evaluation_id: int) -> ProxyEvaluation:
    """The worker's job (core.jobs.runner: whatever happens, the row ends done, cancelled or failed
    with the reason; a deleted model or folder fails it without a traceback in the log)."""

    def execute(evaluation: ProxyEvaluation) -> ProxyEvaluation:
        scores: dict[str, float] = {}
        evaluation.keep_on_failure(lambda: {"scores": scores})
        _execute(evaluation, scores)
        return evaluation.finish(Status.DONE)

    return run_job(
        ProxyEvaluation, evaluation_id, execute, related=("reward_model",), expected=(ValueError, OSError)
    )


def _execute(evaluation: ProxyEvaluation, scores: dict[str, float]) -> None:
    # torch: loaded in the worker only, not in every process that imports this module
    from training.runs.runtime import set_threads
    from training.sampling.best_of_n import RewardScorer

    model = evaluation.reward_model
    if model is None:
        raise ValueError(f"the reward model {evaluation.reward_model_name} was deleted from the registry")
    runs = list(evaluation.sampling_runs.order_by("pk"))
    by_run = {run.pk: _samples(run) for run in runs}
    samples = [sample for run in runs for sample in by_run[run.pk]]
    ProxyEvaluation.objects.filter(pk=evaluation.pk).update(samples_total=len(samples), samples_done=0)
    set_threads(settings.TRAINING_THREADS)
    evaluation.append_log(f"Loading {model.name}")
    scorer = RewardScorer(local_folder(model), batch_size=SCORE_CHUNK)  # downloaded once per worker
    loaded = f"{model.name} loaded; scoring {len(samples)} answered samples of {len(runs)} run(s)"
    evaluation.append_log(loaded)
    started, saves = time.monotonic(), Every()  # the time left counts from here, not from loading the model
    for start in range(0, len(samples), SCORE_CHUNK):
        chunk = samples[start : start + SCORE_CHUNK]
        rewards = scorer.score_samples([_answer(sample) for sample in chunk])
        for sample, reward in zip(chunk, rewards, strict=True):
            if reward is None or not math.isfinite(reward):  # jsonb holds no NaN: the row could not end
                raise ValueError(f"{model.name} gave sample {sample.pk} no finite reward ({reward})")
            scores[str(sample.pk)] = reward
        # Only while samples are left: a cancel read after the last chunk would drop finished curves.
        if len(scores) < len(samples) and saves.due():
            end = estimated_end(len(scores), len(samples) - len(scores), time.monotonic() - started)
            ProxyEvaluation.objects.filter(pk=evaluation.pk).update(
                samples_done=len(scores), estimated_end_at=end
            )
            if evaluation.cancel_was_requested():
                evaluation.append_log(
                    f"Cancelled: kept the scores of {len(scores)} of {len(samples)} samples; "
                    "no curves computed (they need every sample)"
                )
                raise Cancelled(scores=scores)
    results = {"runs": [_run_results(evaluation, run, by_run[run.pk], scores) for run in runs]}
    ProxyEvaluation.objects.filter(pk=evaluation.pk).update(
        scores=scores, results=results, samples_done=len(scores)
    )
    evaluation.append_log(f"{len(scores)} samples scored; curves of {len(runs)} run(s) computed")


def _samples(run: SamplingRun) -> list[Sample]:
    return list(
        answered_samples(run)
        .select_related("question", "episode")
        .only(
            "run_id", "question_id", "index", "score", "question__text", "episode__answer", "episode__state"
        )
        .order_by("question_id", "index")
    )


def _answer(sample: Sample) -> StoredAnswer:
    quotes = (sample.episode.state or {}).get("quotes") or []
    return StoredAnswer(
        question=sample.question.text,
        quotes=tuple(
            Quote(q.get("title", ""), q.get("url", ""), q.get("domain", ""), q.get("extract", ""))
            for q in quotes
        ),
        answer=sample.episode.answer,  # "" only where the run's reward model scored an empty answer
    )


def _run_results(
    evaluation: ProxyEvaluation, run: SamplingRun, samples: Sequence[Sample], scores: dict[str, float]
) -> dict[str, Any]:
    scored = is_scored(run)
    by_question: dict[int, list[ScoredSample]] = {}
    for sample in samples:
        validation = scores[str(sample.pk)]
        training = sample.score if scored else None
        by_question.setdefault(sample.question_id, []).append(
            ScoredSample(sample.index, training, validation)
        )
    points = run_curve(
        list(by_question.values()),
        selected=scored,
        seed=evaluation.settings.get("seed", 0),
        resamples=evaluation.settings.get("resamples", DEFAULT_RESAMPLES),
    )
    return {
        "run": run.pk,
        "policy_name": run.policy_name,
        "reward_model_name": run.reward_model_name,
        "n": run.n,
        "selection": "reward model" if scored else "none",
        "questions": len(run.question_ids),
        "answered_questions": len(by_question),
        "samples": sum(len(samples) for samples in by_question.values()),
        "points": curve_rows(points),
    }
