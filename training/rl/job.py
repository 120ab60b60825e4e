"""The RL run's job body, called by ``training.runs.jobs`` on a worker of the ``training`` queue: the
questions and their references from the database, the starting policy and reward model from the registry,
a browser per browsing episode, then ``train_rl``; every step's episodes (RLEpisode rows), the latest
step's on the row and the progress are written as it trains, and the policy it saved is registered with
the run as its lineage (starting policy, reward model, questions, settings: all on the run's row)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from django.conf import settings

from annotation.exports.formats import stored_quotes
from annotation.models import Answer, Episode, EpisodeStatus, Question
from browser.engine.browser import Browser
from browser.services import browser_settings
from browser.sources import LOCAL, open_source
from core.progress import Every
from training import checkpoints
from training.models import RunKind, TrainingRun
from training.models import RunStatus as Status
from training.rl.config import BC, BROWSE, PROMPTED, RLConfig, saved_policy_format
from training.rl.episodes import record_step
from training.rl.runs import ENVIRONMENT
from training.rl.types import EpisodeReport, RLQuestion
from training.runs.config import SMOLLM2
from training.runs.hooks import Hooks, RunResult
from training.runs.processes import train
from training.runs.register import register_model


def execute_rl(run: TrainingRun, hooks: Hooks, timeline: list[dict[str, Any]]) -> TrainingRun:
    """Train and register (done), or keep nothing but the curves (cancelled). ``hooks`` report progress
    into the row and read its cancel flag; ``timeline`` is the list they fill (kept on a failure too)."""
    run.keep_on_failure(lambda: {"timeline": timeline})
    config = job_config(run)
    output = checkpoints.output_dir(run.pk)
    shutil.rmtree(output, ignore_errors=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    result = train(run, config, hooks, here=train_rl_here)
    fields = {"metrics": result.metrics, "timeline": result.history, "step": result.steps}
    checkpoints.discard_state(run.pk)
    if result.cancelled:
        shutil.rmtree(output, ignore_errors=True)
        run.append_log(
            f"Cancelled after step {result.steps}: the partly trained policy was discarded (a policy is "
            "registered only when its training ends); the curves and samples so far are kept"
        )
        return run.finish(Status.CANCELLED, **fields)
    if result.metrics.get("stopped") == "kl_budget":
        run.append_log(
            f"Stopped early after step {result.steps} of {config.steps}: the mean KL from the starting "
            f"policy passed the budget ({config.kl_budget:g} nats)"
        )
    register_model(run, output, starting_name(run), result.metrics)
    return run.finish(Status.DONE, **fields)


def train_rl_here(run: TrainingRun, config: RLConfig, hooks: Hooks, *, main: bool) -> RunResult:
    """This process's part of the run (training.runs.processes): the questions from the database, a
    browser per browsing episode, every step's episodes into RLEpisode rows and the latest on the row
    (the first process's hooks only)."""
    # torch: loaded in the worker only, not in every process that imports this module
    from training.rl.trainer import train_rl

    questions = rl_questions(run, main=main)
    if main:
        with_references = sum(1 for question in questions if question.references)
        run.append_log(
            f"{len(questions)} question(s), {with_references} with a reference to answer from; starting "
            f"from {starting_name(run)}, rewarded by {run.reward_model_name}"
        )
        samples = LatestSamples(run)
        hooks.on_samples = samples.on_samples
    source = run.config.get("search") or LOCAL, run.config.get("corpus") or ""
    browsers = browser_factory(*source) if config.episodes == BROWSE else None
    result = train_rl(config, questions, hooks, checkpoints.store_dir(), browsers)
    if main:
        samples.save()
    return result


def job_config(run: TrainingRun) -> RLConfig:
    """The run's settings with what the job fills in: where to write, the models' folders on this worker
    (downloaded if need be) and how the starting policy is prompted."""
    config = RLConfig.from_dict({k: v for k, v in run.config.items() if k not in ENVIRONMENT})
    if run.reward_model is None:
        raise ValueError(f"the reward model {run.reward_model_name} was deleted from the registry")
    config.reward_model = str(checkpoints.local_folder(run.reward_model))
    config.output_dir = str(checkpoints.output_dir(run.pk))
    config.state_dir = str(checkpoints.state_dir(run.pk))
    config.base_model, config.policy_format = starting_policy(run)
    config.threads = config.threads or settings.TRAINING_THREADS
    config.check()
    return config


def starting_policy(run: TrainingRun) -> tuple[str, str]:
    """(model, policy_format): the prompted default, a BC model (raw BC prompts), or an RL policy, which
    continues in the format its own training.json names."""
    base = run.base_checkpoint
    if base is None:
        if run.config.get("base_model", SMOLLM2) != SMOLLM2:
            raise ValueError("the starting policy was deleted from the registry")
        return SMOLLM2, PROMPTED
    folder = checkpoints.local_folder(base)
    if base.kind == RunKind.BC:
        return str(folder), BC
    return str(folder), saved_policy_format(folder)


def starting_name(run: TrainingRun) -> str:
    return run.base_checkpoint.name if run.base_checkpoint else f"{SMOLLM2} (prompted)"


def rl_questions(run: TrainingRun, *, main: bool = True) -> list[RLQuestion]:
    """The run's questions (those deleted since it was requested are skipped, and the ``main`` process
    says so in the log), each with the quote sets of its answers and finished episodes, as rm-pairs
    prompts are made of them."""
    found = Question.objects.in_bulk(run.question_ids)
    ids = [pk for pk in run.question_ids if pk in found]
    if main and len(ids) < len(run.question_ids):
        run.append_log(f"{len(run.question_ids) - len(ids)} question(s) deleted since: skipped")
    references: dict[int, list[tuple]] = {pk: [] for pk in ids}
    answers = Answer.objects.filter(question_id__in=ids).exclude(quotes=[])
    for question_id, quotes in answers.values_list("question_id", "quotes"):
        if quotes:
            references[question_id].append(stored_quotes(quotes))
    finished = Episode.objects.filter(question_id__in=ids, status=EpisodeStatus.FINISHED)
    for question_id, state in finished.values_list("question_id", "state"):
        if quotes := (state or {}).get("quotes"):
            references[question_id].append(stored_quotes(quotes))
    return [
        RLQuestion(
            id=pk,
            text=found[pk].text,
            references=tuple(dict.fromkeys(references[pk])),  # the same quotes twice are one prompt
            reference_answers=tuple(found[pk].reference_answers or ()),
        )
        for pk in ids
    ]


def browser_factory(search: str, corpus: str) -> Callable[[], Browser]:
    """A fresh browser over the run's source for each browsing episode, as sampling runs browse."""
    backend = open_source(search, corpus)
    return lambda: Browser(backend, browser_settings())


class LatestSamples:
    """``on_samples``: every step's episodes into RLEpisode rows (one insert per step, never skipped: the
    run's audit needs them all), and the latest step's into the row's ``samples`` for its page, throttled
    like the progress."""

    def __init__(self, run: TrainingRun) -> None:
        self.run, self.saves = run, Every()
        self.latest: list[dict[str, Any]] = []

    def on_samples(self, step: int, reports: list[EpisodeReport]) -> None:
        record_step(self.run, step, reports)
        self.latest = [report.shown() | {"step": step} for report in reports]
        if self.saves.due():
            self.save()

    def save(self) -> None:
        TrainingRun.objects.filter(pk=self.run.pk).update(samples=self.latest)
