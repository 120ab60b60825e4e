"""``manage.py train_rl --reward-model ID [--base-checkpoint ID] [questions] [settings]``: an RL run, run
here instead of on a worker (the same check as the page and the API, the same job code), with a progress
bar. Every setting of ``training.rl.config.RL_SETTABLE`` is an option of the same name."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import DemonstrationBatch
from training.errors import RunError
from training.models import ModelCheckpoint
from training.models import RunStatus as Status
from training.rl.config import RL_SETTABLE, RLConfig
from training.rl.inputs import RLRequest
from training.rl.runs import request_rl_run
from training.runs.jobs import run_training_job
from training.sampling.runs import DEFAULTS, QuestionSet

SHOWN = ("reward_mean", "kl", "entropy")  # on the progress bar


def progress_bar(step: int, total: int, logs: dict[str, float], width: int = 30) -> str:
    filled = int(width * step / total) if total else 0
    shown = " ".join(f"{k} {logs[k]:.4g}" for k in SHOWN if isinstance(logs.get(k), int | float))
    return f"[{'#' * filled}{'.' * (width - filled)}] {step}/{total} {shown}"


def question_ids(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError("expected question ids separated by commas") from None


class Command(BaseCommand):
    help = "Train a policy against a reward model on questions of the rl split, with a progress bar."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--reward-model", type=int, required=True, help="a registered reward model")
        parser.add_argument(
            "--base-checkpoint", type=int, help="a registered BC or RL model; none: the prompted default"
        )
        parser.add_argument("--batch", type=int, help="questions of this demonstration batch")
        parser.add_argument("--dataset", default="", help="questions of this dataset")
        parser.add_argument("--limit", type=int, default=DEFAULTS["limit"], help="the first this many by id")
        parser.add_argument("--question-ids", type=question_ids, help="questions by id: 1,2,3")
        parser.add_argument("--search", default="local", help="where browsing episodes search")
        parser.add_argument("--corpus", default="", help="the local corpus; empty: the default")
        defaults = RLConfig()
        for f in fields(RLConfig):
            if f.name not in RL_SETTABLE:
                continue
            value = getattr(defaults, f.name)
            option = f"--{f.name.replace('_', '-')}"
            if isinstance(value, bool):
                parser.add_argument(option, action=argparse.BooleanOptionalAction, help=f"default {value}")
            else:
                parser.add_argument(option, type=type(value), help=f"default {value}")

    def handle(self, *args: Any, **options: Any) -> None:
        settings_ = {name: options[name] for name in RL_SETTABLE if options.get(name) is not None}
        batch = None
        if options["batch"]:
            batch = DemonstrationBatch.objects.filter(pk=options["batch"]).first()
            if batch is None:
                raise CommandError(f"demonstration batch {options['batch']} does not exist")
        request = RLRequest(
            reward_model=self.checkpoint(options["reward_model"]),
            base=self.checkpoint(options["base_checkpoint"]),
            questions=QuestionSet(batch=batch, dataset=options["dataset"], limit=options["limit"]),
            ids=options["question_ids"] or (),
            search=options["search"],
            corpus=options["corpus"],
            settings=settings_,
        )
        try:
            run = request_rl_run(None, request, queue=False)
        except RunError as exc:
            raise CommandError(str(exc)) from None
        run = run_training_job(run.pk, echo=self.echo)
        self.stdout.write("")
        if run.status != Status.DONE:
            raise CommandError(f"run {run.pk} {run.status}: {run.error}")
        self.stdout.write(f"run {run.pk} done: {run.checkpoint.name} in {run.checkpoint.path}")
        self.stdout.write(f"metrics: {run.metrics}")

    def checkpoint(self, pk: int | None) -> ModelCheckpoint | None:
        if not pk:
            return None
        found = ModelCheckpoint.objects.filter(pk=pk).first()
        if found is None:
            raise CommandError(f"checkpoint {pk} does not exist")
        return found

    def echo(self, step: int, total: int, logs: dict[str, float]) -> None:
        self.stdout.write("\r" + progress_bar(step, total, logs), ending="")
        self.stdout.flush()
