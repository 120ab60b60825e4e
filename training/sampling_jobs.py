"""The sampling job, run by a worker on the ``sampling`` queue: n episodes of each question browse the
same environment as the demonstrators (corpus, blocklist, censoring, quote budget), are stored as episodes
of kind model with every action and page, scored by the run's reward model, and best-of-n chooses (or
declines). Progress, tokens/s and the cancel flag go through the run's row; whatever happens the row ends
done, cancelled or failed with the reason. Questions are sampled a chunk at a time (``SAMPLING_BATCH``
episodes stepped together) and each chunk is stored in one transaction. A cancel stops the stepping; the
questions whose episodes all finished are still scored and stored (a whole chunk, when the cancel comes
after its last round), only those with an episode cut off mid-browse are dropped, and the log says so."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.models import Episode, EpisodeAction, EpisodeKind, EpisodeStatus, Question
from browser.engine.browser import Browser
from browser.services import browser_settings, save_browser
from browser.sources import LOCAL, open_source
from training.models import RunStatus as Status
from training.models import Sample, SamplingRun
from training.sampling.episode import EpisodeSample, SamplingSettings, run_episodes
from training.sampling.types import BackendError
from webgpt_site.heartbeat import beating
from webgpt_site.sweeper import redelivered

SAVE_EVERY_S = 1.0  # progress writes and cancel checks at most this often
SETTINGS_FIELDS = (
    "temperature",
    "max_actions",
    "max_command_tokens",
    "max_answer_tokens",
    "seed",
    "constrain_commands",
)


def run_sampling_job(run_id: int, echo: Callable[[SamplingRun], None] | None = None) -> SamplingRun:
    """The worker's job (``echo`` is told about progress, for the command's progress bar)."""
    claimed = SamplingRun.claim(run_id)
    run = SamplingRun.objects.select_related("policy", "reward_model").get(pk=run_id)
    if not claimed:
        return redelivered(run)
    progress = _Progress(run, echo)
    try:
        with beating(SamplingRun, run.pk):
            status = _execute(run, progress)
    except Exception as exc:  # the row must say why; the worker log has the traceback
        run.fail(exc, **progress.fields())
        if isinstance(exc, BackendError | ValueError):
            return run  # an unreachable endpoint or bad settings: the reason is on the row
        raise
    return run.finish(status, **progress.fields())


class _Progress:
    """Counts episodes and tokens across chunks, writes them to the row (throttled), reads the cancel flag."""

    def __init__(self, run: SamplingRun, echo: Callable[[SamplingRun], None] | None) -> None:
        self.run, self.echo = run, echo
        self.started = time.monotonic()
        self.saved_at = 0.0
        self.done_before = 0  # episodes of the chunks already stored
        self.tokens_before = 0
        self.done = 0
        self.tokens = 0
        self.cancelled = False

    def cancel_requested(self) -> bool:
        """Whether the run's cancel flag is set (read from the row until it is)."""
        self.cancelled = self.cancelled or self.run.cancel_was_requested()
        return self.cancelled

    def on_round(self, samples: Sequence[EpisodeSample], running: int) -> bool:
        """Called by ``run_episodes`` after each round: an episode counts as done once it stops browsing.
        True (stop stepping) once the cancel flag is seen."""
        self.done = self.done_before + len(samples) - running
        self.tokens = self.tokens_before + sum(sample.tokens_generated for sample in samples)
        now = time.monotonic()
        if now - self.saved_at >= SAVE_EVERY_S:
            self.saved_at = now
            self.save()
            self.cancel_requested()
        return self.cancelled

    def chunk_stored(self, samples: Sequence[EpisodeSample], stored: int) -> None:
        """The chunk's ``samples`` were generated and ``stored`` of them kept: episodes done count what
        was stored, tokens (the model's speed) everything generated."""
        self.done_before += stored
        self.tokens_before += sum(sample.tokens_generated for sample in samples)
        self.done, self.tokens = self.done_before, self.tokens_before
        self.save()

    def fields(self) -> dict[str, Any]:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return {
            "episodes_done": self.done,
            "tokens_generated": self.tokens,
            "tokens_per_second": self.tokens / elapsed,
        }

    def save(self) -> None:
        SamplingRun.objects.filter(pk=self.run.pk).update(**self.fields())
        if self.echo:
            self.run.__dict__.update(self.fields())
            self.echo(self.run)


def _execute(run: SamplingRun, progress: _Progress) -> str:
    """Sample, score and store chunk by chunk; the status the run ends with (done, or cancelled when a
    cancel left questions unsampled)."""
    from training.sampling_models import load_policy, load_scorer

    sampling = SamplingSettings(
        **{name: run.settings[name] for name in SETTINGS_FIELDS if name in run.settings}
    )
    policy = load_policy(run)
    scorer = load_scorer(run)
    questions = _questions(run)
    search = open_source(run.search, run.corpus)
    progress.started = time.monotonic()  # tokens/s counts sampling, not loading the models
    per_chunk = max(1, settings.SAMPLING_BATCH // run.n)
    totals = _Totals()
    dropped = 0  # questions cut off mid-browse by a cancel (only ever in the last chunk sampled)
    for start in range(0, len(questions), per_chunk):
        if progress.cancel_requested():
            break
        chunk = questions[start : start + per_chunk]
        browsers = [Browser(search, browser_settings()) for _ in range(len(chunk) * run.n)]
        samples = run_episodes(
            policy,
            browsers,
            [question.text for question in chunk for _ in range(run.n)],
            sampling,
            first_index=start * run.n,  # question p's sample k is episode p*n + k, whatever the chunking
            reference_answers=[question.reference_answers for question in chunk for _ in range(run.n)],
            on_round=progress.on_round,
        )
        kept, kept_browsers, kept_samples = _finished(chunk, browsers, samples, run.n)
        scores = scorer.score_samples(kept_samples) if scorer else [None] * len(kept_samples)
        _store(run, kept, kept_browsers, kept_samples, scores, totals)
        progress.chunk_stored(samples, stored=len(kept_samples))
        dropped = len(chunk) - len(kept)
        run.append_log(f"{totals.questions}/{len(questions)} questions sampled")
    metrics = totals.metrics(progress.fields()["tokens_per_second"])
    SamplingRun.objects.filter(pk=run.pk).update(metrics=metrics)
    if totals.questions == len(questions):  # a cancel seen after the last round cut nothing off
        if progress.cancelled:
            run.append_log("The cancel came after the last question was sampled: every sample is kept.")
        return Status.DONE
    unstarted = len(questions) - totals.questions - dropped
    run.append_log(
        f"Cancelled: kept {totals.questions} of {len(questions)} questions' samples; "
        f"{dropped} unfinished question(s) dropped, {unstarted} not started"
    )
    return Status.CANCELLED


def _finished(
    chunk: Sequence[Question], browsers: Sequence[Browser], samples: Sequence[EpisodeSample], n: int
) -> tuple[list[Question], list[Browser], list[EpisodeSample]]:
    """The chunk's questions whose n episodes all finished, with their browsers and samples: a cancel
    leaves the others' episodes half-browsed, and half an episode is not a sample."""
    kept = [p for p in range(len(chunk)) if all(s.finished for s in samples[p * n : (p + 1) * n])]
    rows = [p * n + k for p in kept for k in range(n)]
    return [chunk[p] for p in kept], [browsers[i] for i in rows], [samples[i] for i in rows]


def _questions(run: SamplingRun) -> list[Question]:
    found = Question.objects.in_bulk(run.question_ids)
    missing = [pk for pk in run.question_ids if pk not in found]
    if missing:
        run.append_log(f"{len(missing)} question(s) deleted since the run was requested: skipped")
    return [found[pk] for pk in run.question_ids if pk in found]


class _Totals:
    """What the run page and the API report when the run ends."""

    def __init__(self) -> None:
        self.questions = self.answered = self.declined = self.no_answer = 0
        self.episodes = self.actions = self.invalid = 0
        self.env_seconds = 0.0
        self.best_scores: list[float | None] = []

    def add(self, samples: Sequence[EpisodeSample], choice: Any) -> None:
        self.questions += 1
        self.answered += choice.answered
        self.declined += choice.declined
        self.no_answer += choice.best is None
        self.best_scores.append(choice.best_score)
        for sample in samples:
            self.episodes += 1
            self.actions += len(sample.steps)
            self.invalid += sample.invalid_actions
            self.env_seconds += sample.env_seconds

    def metrics(self, tokens_per_second: float) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "answered": self.answered,
            "declined": self.declined,
            "no_answer": self.no_answer,
            "episodes": self.episodes,
            "actions": self.actions,
            "invalid_actions": self.invalid,
            "invalid_action_rate": self.invalid / self.actions if self.actions else 0.0,
            "env_seconds": round(self.env_seconds, 3),
            "tokens_per_second": tokens_per_second,
            "best_scores": self.best_scores,
        }


def _store(
    run: SamplingRun,
    chunk: Sequence[Question],
    browsers: Sequence[Browser],
    samples: Sequence[EpisodeSample],
    scores: Sequence[float | None],
    totals: _Totals,
) -> None:
    """One transaction per chunk: its episodes (with actions and page snapshots) and sample rows."""
    from training.sampling.best_of_n import Choice, choose

    threshold = run.settings.get("decline_threshold")
    with transaction.atomic():
        for position, question in enumerate(chunk):
            rows = slice(position * run.n, (position + 1) * run.n)
            group, group_scores = samples[rows], scores[rows]
            choice = choose(group, group_scores, threshold)
            if run.reward_model_id is None:  # unscored: keep the first answer
                first = next((i for i, sample in enumerate(group) if sample.answer is not None), None)
                choice = Choice(choice.scores, first, None, False, None)
            totals.add(group, choice)
            for index, (sample, browser, score) in enumerate(
                zip(group, browsers[rows], group_scores, strict=True)
            ):
                episode = _episode(run, question, browser, sample)
                Sample.objects.create(
                    run=run,
                    episode=episode,
                    question=question,
                    index=index,
                    score=score,
                    chosen=choice.chosen == index,
                    declined=choice.declined,
                    invalid_actions=sample.invalid_actions,
                    actions=len(sample.steps),
                    tokens=sample.tokens_generated,
                )


def _episode(run: SamplingRun, question: Question, browser: Browser, sample: EpisodeSample) -> Episode:
    now = timezone.now()
    episode = Episode.objects.create(
        kind=EpisodeKind.MODEL,
        user=None,
        policy=run.policy_name,
        question=question,
        status=EpisodeStatus.FINISHED,
        end_reason=sample.end_reason,
        corpus=(run.corpus or settings.DEFAULT_CORPUS) if run.search == LOCAL else "",
        search=run.search,
        settings=browser.settings.to_dict(),
        state=save_browser(browser),
        answer=sample.answer or "",
        finished_at=now,
        last_seen_at=now,
    )
    EpisodeAction.objects.bulk_create(
        EpisodeAction(
            episode=episode,
            index=index,
            command=step.command,
            valid=step.valid,
            message=step.message,
            observation_before=step.observation,
            page_before=step.page_before,
            page_after=step.page_after,
        )
        for index, step in enumerate(sample.steps)
    )
    return episode
