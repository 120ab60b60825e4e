"""``manage.py sample_answers --dataset demo --n 2 [options]``: best-of-n answers from a policy, run here
with a progress bar (the worker's job code), or queued for the sampling worker with ``--queue``.

The options are the API's and the page's, checked by the same ``request_sampling``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from annotation.models import DemonstrationBatch
from training.errors import RunError
from training.management.commands._train import progress_bar
from training.models import ModelCheckpoint, RunStatus, SamplingRun
from training.sampling.jobs import run_sampling_job
from training.sampling.runs import QuestionSet, SamplingRequest, request_sampling

# setting -> (type, help); an option left out takes the default of sampling_runs.DEFAULTS
SETTINGS: dict[str, tuple[type, str]] = {
    "n": (int, "samples per question (best-of-n), 1 to 64"),
    "temperature": (float, "sampling temperature (default 0.8, the paper's)"),
    "max_actions": (int, "actions per episode (default 100, the paper's)"),
    "max_command_tokens": (int, "tokens of a command"),
    "max_answer_tokens": (int, "tokens of the answer"),
    "seed": (int, "random seed: the same seed gives the same episodes"),
    "examples": (int, "demonstrations shown to a prompted model as examples"),
    "decline_threshold": (float, "decline to answer below this reward (needs --reward-model)"),
    "guide_k": (int, "commands sampled at each guided step, the best taken (needs --step-model)"),
}
QUESTION_OPTIONS = ("batch", "split", "dataset", "limit")


class Command(BaseCommand):
    help = "Sample best-of-n answers from a policy in the browsing environment, with a progress bar."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--policy", type=int, help="a registered BC or RL model (default: prompted SmolLM2)"
        )
        parser.add_argument("--reward-model", type=int, help="a registered reward model to score with")
        parser.add_argument(
            "--step-model",
            type=int,
            help="a registered process reward model: each question is also sampled n times guided by it",
        )
        parser.add_argument("--backend", default="local", help="local, or an endpoint's name")
        parser.add_argument(
            "--search", default="local", help="the search provider: local (searches --corpus), searxng, brave"
        )
        parser.add_argument("--corpus", default="", help="the corpus the local provider searches")
        parser.add_argument("--batch", type=int, help="questions of this demonstration batch")
        parser.add_argument("--split", default="", help="questions of this split")
        parser.add_argument("--dataset", default="", help="questions of this dataset")
        parser.add_argument("--limit", type=int, help="the first this many questions by id (default 20)")
        for name, (kind, text) in SETTINGS.items():
            parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)
        parser.add_argument(
            "--constrain-commands",
            choices=("on", "off"),
            help="only commands valid on the current page (default: on for prompted models)",
        )
        parser.add_argument(
            "--at-states",
            action="store_true",
            help="instead of browsing: the policy's next action at states of the questions' demonstrations",
        )
        parser.add_argument("--queue", action="store_true", help="queue the run for the worker and return")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run = request_sampling(None, self.sampling_request(options), queue=options["queue"])
        except RunError as exc:
            option = _option(exc.field)
            raise CommandError(f"{option}: {exc.reason}" if option else exc.reason) from None
        page = reverse("training:sampling_run", kwargs={"pk": run.pk})
        if options["queue"]:
            self.stdout.write(f"run {run.pk} queued on the sampling worker; its page: {page}")
            return
        run = run_sampling_job(run.pk, echo=self.echo)
        self.stdout.write("")
        if run.status != RunStatus.DONE:
            raise CommandError(f"run {run.pk} {run.status}: {run.error} (its page: {page})")
        self.stdout.write(summary(run))
        self.stdout.write(f"samples, scores and trajectories: {page}")

    def sampling_request(self, options: dict[str, Any]) -> SamplingRequest:
        constrain = {"on": True, "off": False, None: None}[options["constrain_commands"]]
        settings_ = {name: options[name] for name in SETTINGS if options[name] is not None}
        if constrain is not None:
            settings_["constrain_commands"] = constrain
        if options["at_states"]:
            settings_["at_states"] = True
        questions = QuestionSet(
            batch=_batch(options["batch"]),
            split=options["split"],
            dataset=options["dataset"],
            **({"limit": options["limit"]} if options["limit"] is not None else {}),
        )
        return SamplingRequest(
            policy=_checkpoint(options["policy"], "--policy"),
            reward_model=_checkpoint(options["reward_model"], "--reward-model"),
            step_model=_checkpoint(options["step_model"], "--step-model"),
            backend=options["backend"],
            search=options["search"],
            corpus=options["corpus"],
            questions=questions,
            settings=settings_,
        )

    def echo(self, run: SamplingRun) -> None:
        bar = progress_bar(run.episodes_done, run.episodes_total, {}).rstrip()
        self.stdout.write(f"\r{bar} episodes, {run.tokens_per_second:.1f} tokens/s", ending="")
        self.stdout.flush()


def summary(run: SamplingRun) -> str:
    metrics = run.metrics
    if "at_states" in metrics:
        states = metrics["at_states"]
        return (
            f"run {run.pk} done: {states['candidates']} candidate action(s) at {states['states']} state(s) "
            f"of {states['demonstrations']} demonstration(s)"
        )
    line = (
        f"run {run.pk} done: {metrics['questions']} question(s); {metrics['answered']} answered, "
        f"{metrics['declined']} declined, {metrics['no_answer']} without an answer; "
        f"invalid actions {metrics['invalid_action_rate']:.1%} ({metrics['invalid_actions']} of "
        f"{metrics['actions']}); {run.tokens_per_second:.1f} tokens/s"
    )
    for name, arm in metrics.get("arms", {}).items():  # a guided run: its two arms
        line += f"\n  {name}: {arm['episodes']} episodes, valid actions {_share(arm['valid_action_rate'])}, "
        line += f"mean step score {_number(arm['mean_step_score'])}, mean answer score "
        line += f"{_number(arm['mean_answer_score'])}"
    return line


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _option(field: str) -> str:
    """The command-line option a refusal is about ("" for the questions as a whole)."""
    known = {*SETTINGS, *QUESTION_OPTIONS, "policy", "reward_model", "step_model", "backend", "search"}
    known.update({"corpus", "at_states"})
    known.add("constrain_commands")
    if field in known:
        return f"--{field.replace('_', '-')}"
    return "--batch/--split/--dataset" if field == "questions" else field


def _checkpoint(pk: int | None, option: str) -> ModelCheckpoint | None:
    if pk is None:
        return None
    found = ModelCheckpoint.objects.filter(pk=pk).first()
    if found is None:
        raise CommandError(f"{option}: model {pk} does not exist")
    return found


def _batch(pk: int | None) -> DemonstrationBatch | None:
    if pk is None:
        return None
    found = DemonstrationBatch.objects.filter(pk=pk).first()
    if found is None:
        raise CommandError(f"--batch: demonstration batch {pk} does not exist")
    return found
