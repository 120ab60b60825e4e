"""The sampling job, run by a worker on the ``sampling`` queue: n episodes of each question browse the
same environment as the demonstrators (corpus, blocklist, censoring, quote budget), are stored as episodes
of kind model with every action and page, scored by the run's reward model, and best-of-n chooses (or
declines). Questions are stepped a chunk at a time (``SAMPLING_BATCH`` episodes together); each question
is scored and stored in its own transaction as soon as its n episodes have all ended (best-of-n needs all
n), so the run page shows samples while its partners browse on. Progress (actions taken of at most how
many, episodes finished, tokens as they are generated, an estimate of the time left), a log line per
round (throttled) and the cancel flag go through the run's row; whatever happens the row ends done,
cancelled or failed with the reason. A cancel stops the stepping: every question whose episodes all ended
is already stored, only those with an episode cut off mid-browse are dropped, and the log says so."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, Q, Sum

from annotation.demonstrations.model_episodes import ActionRecord, store_model_episode
from annotation.models import Episode, Question
from browser.engine.browser import Browser
from browser.services import browser_settings
from browser.sources import LOCAL, open_source
from core.jobs.runner import run_job
from training.models import RunStatus as Status
from training.models import Sample, SamplingRun
from training.sampling.episode import EpisodeSample, SamplingSettings, StepGuide, run_episodes
from training.sampling.progress import SamplingProgress
from training.sampling.states import sample_at_states
from training.sampling.types import BackendError

SETTINGS_FIELDS = (
    "temperature",
    "max_actions",
    "max_command_tokens",
    "max_answer_tokens",
    "seed",
    "constrain_commands",
)


def sampling_settings(run: SamplingRun) -> SamplingSettings:
    """The episode loop's settings, from the run's."""
    return SamplingSettings(**{name: run.settings[name] for name in SETTINGS_FIELDS if name in run.settings})


def run_sampling_job(run_id: int, echo: Callable[[SamplingRun], None] | None = None) -> SamplingRun:
    """The worker's job (``echo`` is told about progress, for the command's progress bar). An unreachable
    endpoint or bad settings fail it with the reason on the row (core.jobs.runner)."""

    def execute(run: SamplingRun) -> SamplingRun:
        progress = SamplingProgress(run, echo)
        run.keep_on_failure(progress.fields)
        if run.settings.get("at_states"):  # the policy's next actions at demonstrations' states
            return _at_states(run, progress)
        status = _execute(run, progress)
        return run.finish(status, **progress.fields(final=True))

    return run_job(
        SamplingRun, run_id, execute, related=("policy", "reward_model"), expected=(BackendError, ValueError)
    )


def _execute(run: SamplingRun, progress: SamplingProgress) -> str:
    """Sample chunk by chunk, storing each question as its episodes end; the status the run ends with
    (done, or cancelled when a cancel left questions unsampled)."""
    # torch: loaded in the worker only, not in every process that imports this module
    from training.sampling.loading import load_policy, load_scorer, load_step_scorer

    sampling = sampling_settings(run)
    loading = [run.policy_name]
    loading += [run.reward_model_name] if run.reward_model_id else []
    loading += [run.step_model_name] if run.step_model_id else []
    run.append_log("Loading " + " and ".join(loading))
    policy = load_policy(run)
    scorer = load_scorer(run)
    step_scorer = load_step_scorer(run)
    questions = _questions(run)
    search = open_source(run.search, run.corpus)
    per_chunk = max(1, settings.SAMPLING_BATCH // run.n)
    arms = _arms(run, step_scorer)
    guided = (
        f", unguided and guided (best of {run.settings['guide_k']} commands a step)" if len(arms) > 1 else ""
    )
    run.append_log(
        f"Sampling {len(questions)} question(s) x {run.n}{guided}, at most "
        f"{sampling.max_actions} actions each, {min(per_chunk, len(questions)) * run.n} episodes stepped "
        "together"
    )
    progress.begin(sampling.max_actions, len(questions) * len(arms))
    sampler = _Sampler(run, scorer, progress, step_scorer)
    totals = sampler.totals
    dropped = 0  # questions cut off mid-browse by a cancel (only ever in the last chunk sampled)
    for start in range(0, len(questions), per_chunk):
        chunk = questions[start : start + per_chunk]
        for arm in arms:  # the baseline first, then the guided samples of the same questions
            if progress.cancel_requested():
                break
            sampler.arm = arm
            sampler.chunk = _Chunk(
                chunk, [Browser(search, browser_settings()) for _ in range(len(chunk) * run.n)]
            )
            run_episodes(
                policy,
                sampler.chunk.browsers,
                [question.text for question in chunk for _ in range(run.n)],
                sampling,
                # question p's sample k is episode p*n + k whatever the chunking, in each arm: a guided
                # episode's first candidate a step is drawn with its unguided twin's seed
                first_index=start * run.n,
                reference_answers=[question.reference_answers for question in chunk for _ in range(run.n)],
                on_round=sampler.on_round,
                on_tokens=progress.on_tokens,
                guide=StepGuide(step_scorer, int(run.settings["guide_k"])) if arm.guided else None,
            )
            progress.chunk_done()
            if arm.chooses:
                dropped = len(chunk) - len(sampler.chunk.stored)
        if progress.cancelled:
            break
    metrics = totals.metrics(progress.fields()["tokens_per_second"])
    if len(arms) > 1:
        metrics["arms"] = arm_figures(run)
    SamplingRun.objects.filter(pk=run.pk).update(metrics=metrics)
    if totals.questions == len(questions):  # a cancel seen after the last round cut nothing off
        run.append_log(
            f"{totals.questions} question(s) sampled: {totals.answered} answered, {totals.declined} "
            f"declined, {totals.no_answer} without an answer"
        )
        if progress.cancelled:
            run.append_log("The cancel came after the last question was sampled: every sample is kept.")
        return Status.DONE
    unstarted = len(questions) - totals.questions - dropped
    run.append_log(
        f"Cancelled: kept {totals.questions} of {len(questions)} questions' samples; "
        f"{dropped} unfinished question(s) dropped, {unstarted} not started"
    )
    return Status.CANCELLED


def _at_states(run: SamplingRun, progress: SamplingProgress) -> SamplingRun:
    """A run at demonstration states (``states.sample_at_states``): its progress counts states, one
    "action" each."""
    from training.sampling.loading import load_policy  # torch: in the worker only

    sampling = sampling_settings(run)
    run.append_log(f"Loading {run.policy_name}")
    policy = load_policy(run)

    def counts(done: int, total: int) -> dict[str, int]:
        return {"episodes_done": done, "episodes_total": total, "actions_done": done, "actions_limit": total}

    def on_state(done: int, total: int) -> None:
        SamplingRun.objects.filter(pk=run.pk).update(**counts(done, total))

    figures = sample_at_states(run, policy, sampling, on_state=on_state, cancelled=progress.cancel_requested)
    run.append_log(
        f"{figures['candidates']} candidate action(s) at {figures['states']} state(s) of "
        f"{figures['demonstrations']} demonstration(s)"
    )
    status = Status.CANCELLED if progress.cancelled else Status.DONE
    return run.finish(status, metrics={"at_states": figures}, **counts(figures["states"], figures["planned"]))


@dataclass(frozen=True)
class _Arm:
    """Samples browsed one way: ``guided`` by the step model or not; their indexes start at ``offset``,
    and best-of-n ``chooses`` the run's answer among them (the guided ones when the run has both)."""

    guided: bool
    offset: int
    chooses: bool


def _arms(run: SamplingRun, step_scorer: Any) -> list[_Arm]:
    if step_scorer is None:
        return [_Arm(guided=False, offset=0, chooses=True)]
    return [_Arm(guided=False, offset=0, chooses=False), _Arm(guided=True, offset=run.n, chooses=True)]


def arm_figures(run: SamplingRun) -> dict[str, dict[str, Any]]:
    """Unguided against guided samples of a run: episodes, the valid-action rate, the step model's mean
    score of the actions taken, and the reward model's mean score of the answers (issue 38)."""
    figures = {}
    for name, guided in (("unguided", False), ("guided", True)):
        rows = Sample.objects.filter(run=run, guided=guided)
        totals = rows.aggregate(
            episodes=Count("pk"),
            actions=Sum("actions"),
            invalid=Sum("invalid_actions"),
            step_score=Avg("step_score"),
            answer_score=Avg("score"),
            answered=Count("pk", filter=Q(score__isnull=False)),
        )
        actions = totals["actions"] or 0
        figures[name] = {
            "episodes": totals["episodes"],
            "actions": actions,
            "valid_action_rate": 1 - (totals["invalid"] or 0) / actions if actions else None,
            "mean_step_score": totals["step_score"],
            "mean_answer_score": totals["answer_score"],
            "scored_answers": totals["answered"],
        }
    return figures


@dataclass
class _Chunk:
    """Questions stepped together (question p's episode k browses in ``browsers[p*n + k]``) and the
    positions of those stored."""

    questions: Sequence[Question]
    browsers: list[Browser]
    stored: set[int] = field(default_factory=set)


class _Sampler:
    """``run_episodes``' round hook for one run: each question is scored and stored as soon as its n
    episodes have all ended (half an episode is not a sample, and best-of-n needs all n), then the
    round is reported; True (stop stepping) once a cancel is seen."""

    def __init__(
        self, run: SamplingRun, scorer: Any, progress: SamplingProgress, step_scorer: Any = None
    ) -> None:
        self.run, self.scorer, self.progress, self.step_scorer = run, scorer, progress, step_scorer
        self.totals = _Totals()
        self.chunk = _Chunk((), [])
        self.arm = _Arm(guided=False, offset=0, chooses=True)

    def on_round(self, samples: Sequence[EpisodeSample], running: int) -> bool:
        n = self.run.n
        for position, question in enumerate(self.chunk.questions):
            rows = slice(position * n, (position + 1) * n)
            if position not in self.chunk.stored and all(sample.finished for sample in samples[rows]):
                group = samples[rows]
                scores = self.scorer.score_samples(group) if self.scorer else [None] * n
                steps = step_scores(self.step_scorer, group) if self.step_scorer else [None] * n
                stored = _Stored(self.chunk.browsers[rows], group, scores, steps)
                _store(self.run, question, stored, self.arm, self.totals)
                self.chunk.stored.add(position)
        self.progress.stored = self.totals.episodes
        self.progress.on_round(samples, running, self.totals.questions)
        return self.progress.cancelled


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
        # per constraint the actions' requests carried ("commands (regex)", "none"...): [actions, valid]
        self.constraints: dict[str, list[int]] = {}

    def add(self, samples: Sequence[EpisodeSample], choice: Any, *, question: bool = True) -> None:
        """A question's samples; ``question``: the arm whose choice is the run's (a guided run's baseline
        samples count as episodes and actions only)."""
        if question:
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
            for step in sample.steps:
                counts = self.constraints.setdefault(step.constraint, [0, 0])
                counts[0] += 1
                counts[1] += step.valid

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
            "constraints": {
                kind: {"actions": actions, "valid": valid}
                for kind, (actions, valid) in sorted(self.constraints.items())
            },
        }


@dataclass(frozen=True)
class _Stored:
    """A question's n samples as they ended: their browsers, the reward model's scores of their answers
    and the step model's mean scores of their actions (None where there is none)."""

    browsers: Sequence[Browser]
    samples: Sequence[EpisodeSample]
    scores: Sequence[float | None]
    step_scores: Sequence[float | None]


def step_scores(step_scorer: Any, samples: Sequence[EpisodeSample]) -> list[float | None]:
    """Each sample's mean step-model score of the actions it took, in one batch (None: no action)."""
    steps = [(n, step) for n, sample in enumerate(samples) for step in sample.steps]
    scored = step_scorer.score([step.observation for _, step in steps], [step.command for _, step in steps])
    by_sample: dict[int, list[float]] = {}
    for (n, _), value in zip(steps, scored, strict=True):
        by_sample.setdefault(n, []).append(float(value))
    return [sum(by_sample[n]) / len(by_sample[n]) if n in by_sample else None for n in range(len(samples))]


def _store(run: SamplingRun, question: Question, stored: _Stored, arm: _Arm, totals: _Totals) -> None:
    """One transaction per question and arm: its n episodes (with actions and page snapshots), best-of-n's
    choice (the run's answer when the arm ``chooses``), and a sample row each."""
    # torch: loaded in the worker only, not in every process that imports this module
    from training.sampling.best_of_n import Choice, choose

    samples = stored.samples
    choice = choose(samples, stored.scores, run.settings.get("decline_threshold"))
    if run.reward_model_id is None:  # unscored: keep the first answer
        first = next((i for i, sample in enumerate(samples) if sample.answer is not None), None)
        choice = Choice(choice.scores, first, None, False, None)
    rows = zip(samples, stored.browsers, stored.scores, stored.step_scores, strict=True)
    with transaction.atomic():
        for index, (sample, browser, score, step_score) in enumerate(rows):
            Sample.objects.create(
                run=run,
                episode=_episode(run, question, browser, sample),
                question=question,
                index=arm.offset + index,
                score=score,
                chosen=arm.chooses and choice.chosen == index,
                declined=choice.declined,
                invalid_actions=sample.invalid_actions,
                actions=len(sample.steps),
                tokens=sample.tokens_generated,
                guided=arm.guided,
                step_score=step_score,
            )
    totals.add(samples, choice, question=arm.chooses)


def _episode(run: SamplingRun, question: Question, browser: Browser, sample: EpisodeSample) -> Episode:
    actions = (
        ActionRecord(
            step.observation,
            step.command,
            step.valid,
            step.message,
            step.page_before,
            step.page_after,
            tuple(
                {"command": command, "score": score}
                for command, score in zip(step.candidates, step.candidate_scores, strict=True)
            ),
        )
        for step in sample.steps
    )
    return store_model_episode(
        question=question,
        policy=run.policy_name,
        browser=browser,
        actions=actions,
        answer=sample.answer or "",
        end_reason=sample.end_reason,
        corpus=(run.corpus or settings.DEFAULT_CORPUS) if run.search == LOCAL else "",
        search=run.search,
    )
