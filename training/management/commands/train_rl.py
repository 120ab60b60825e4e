"""``manage.py train_rl``: an RL run in the foreground, with a progress bar, in one of two forms.

- ``--reward-model ID [--base-checkpoint ID] [questions]``: a registered run (a TrainingRun row, the policy
  registered), run here instead of on a worker: the same check as the page and the API, the same job code.
- ``--reward-model-dir DIR --questions-file FILE --output DIR [--base-model DIR_or_preset]``: just the
  trainer, no database writes, so that every process of ``accelerate launch`` or ``torchrun`` may run it
  (``accelerate launch --num_processes 8 manage.py train_rl --questions-file q.jsonl ...``); the questions
  file: ``training/rl/questions_file.py``.

Every setting of ``training.rl.config.RL_SETTABLE`` is an option of the same name in both forms."""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import DemonstrationBatch
from browser.sources import check_source
from training.checkpoints import store_dir
from training.errors import RunError
from training.models import ModelCheckpoint
from training.models import RunStatus as Status
from training.rl.config import BROWSE, POLICY_FORMATS, RL_SETTABLE, RLConfig
from training.rl.inputs import RLRequest, check_file_run
from training.rl.runs import request_rl_run
from training.runs.config import SMOLLM2
from training.runs.hooks import Hooks
from training.runs.jobs import run_training_job
from training.sampling.runs import DEFAULTS, QuestionSet

SHOWN = ("reward_mean", "kl", "entropy")  # on the progress bar
REGISTERED_ONLY = ("base_checkpoint", "batch", "dataset", "limit", "question_ids")
FILE_ONLY = ("questions_file", "output", "base_model", "policy_format")


def progress_bar(step: int, total: int, logs: dict[str, float], width: int = 30) -> str:
    filled = int(width * step / total) if total else 0
    shown = " ".join(f"{k} {logs[k]:.4g}" for k in SHOWN if isinstance(logs.get(k), int | float))
    return f"[{'#' * filled}{'.' * (width - filled)}] {step}/{total} {shown}"


def question_ids(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError("expected question ids separated by commas") from None


def option(name: str) -> str:
    return f"--{name.replace('_', '-')}"


class Command(BaseCommand):
    help = "Train a policy against a reward model (registered, or a folder and a questions file)."

    def add_arguments(self, parser: CommandParser) -> None:
        reward = parser.add_mutually_exclusive_group(required=True)
        reward.add_argument("--reward-model", type=int, help="a registered reward model")
        reward.add_argument("--reward-model-dir", type=Path, help="a reward-model folder: no database writes")
        parser.add_argument(
            "--base-checkpoint", type=int, help="a registered BC or RL model; none: the prompted default"
        )
        parser.add_argument("--batch", type=int, help="questions of this demonstration batch")
        parser.add_argument("--dataset", help="questions of this dataset")
        parser.add_argument(
            "--limit", type=int, help=f"the first this many by id (default {DEFAULTS['limit']})"
        )
        parser.add_argument("--question-ids", type=question_ids, help="questions by id: 1,2,3")
        parser.add_argument(
            "--questions-file", type=Path, help="questions as JSONL (with --reward-model-dir)"
        )
        parser.add_argument("--output", type=Path, help="the policy's folder (with --reward-model-dir)")
        parser.add_argument(
            "--base-model", help=f"the starting policy: a model folder or {SMOLLM2} (default)"
        )
        parser.add_argument(
            "--policy-format",
            choices=POLICY_FORMATS,
            help="how it is asked (default: as its training.json says)",
        )
        parser.add_argument("--search", default="local", help="where browsing episodes search")
        parser.add_argument("--corpus", default="", help="the local corpus; empty: the default")
        defaults = RLConfig()
        for f in fields(RLConfig):
            if f.name not in RL_SETTABLE:
                continue
            value = getattr(defaults, f.name)
            if isinstance(value, bool):
                parser.add_argument(
                    option(f.name), action=argparse.BooleanOptionalAction, help=f"default {value}"
                )
            else:
                parser.add_argument(option(f.name), type=type(value), help=f"default {value}")

    def handle(self, *args: Any, **options: Any) -> None:
        settings_ = {name: options[name] for name in RL_SETTABLE if options.get(name) is not None}
        file_form = options["reward_model_dir"] is not None
        other_form = REGISTERED_ONLY if file_form else FILE_ONLY
        given = [option(name) for name in other_form if options.get(name) is not None]
        if given:
            which = (
                "--reward-model-dir (a questions file)" if file_form else "--reward-model (a registered run)"
            )
            raise CommandError(f"{', '.join(given)}: not an option of the form with {which}")
        if file_form:
            return self.train_file(options, settings_)
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # each process would register a run of its own
            raise CommandError("a registered run is one process: launch the form with --reward-model-dir")
        batch = None
        if options["batch"]:
            batch = DemonstrationBatch.objects.filter(pk=options["batch"]).first()
            if batch is None:
                raise CommandError(f"demonstration batch {options['batch']} does not exist")
        limit = DEFAULTS["limit"] if options["limit"] is None else options["limit"]
        request = RLRequest(
            reward_model=self.checkpoint(options["reward_model"]),
            base=self.checkpoint(options["base_checkpoint"]),
            questions=QuestionSet(batch=batch, dataset=options["dataset"] or "", limit=limit),
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

    def train_file(self, options: dict[str, Any], settings_: dict[str, Any]) -> None:
        """The trainer alone, on every process a launcher started; the first prints the progress and saves
        the policy, each prints the digest of the weights it ended with (the same on all)."""
        # torch: loaded by this form only
        from accelerate import PartialState

        from training.rl.job import browser_factory
        from training.rl.questions_file import read_questions
        from training.rl.trainer import train_rl

        if not options["questions_file"] or not options["output"]:
            raise CommandError("--questions-file and --output are required with --reward-model-dir")
        try:
            config = check_file_run(
                settings_,
                options["reward_model_dir"],
                options["output"],
                options["base_model"] or SMOLLM2,
                options["policy_format"] or "",
            )
            browsers = None
            if config.episodes == BROWSE:
                if problem := check_source(options["search"], options["corpus"]):
                    raise RunError(problem[1].rstrip("."), problem[0])
                browsers = browser_factory(options["search"], options["corpus"])
            questions = read_questions(options["questions_file"])
            result = train_rl(config, questions, Hooks(on_progress=self.echo), store_dir(), browsers)
        except ValueError as exc:  # RunError included
            raise CommandError(str(exc)) from None
        process = PartialState()
        if process.is_main_process:
            self.stdout.write("")
            self.stdout.write(f"{result.steps} steps; policy in {result.output_dir}")
            self.stdout.write(f"metrics: {result.metrics}")
        if process.num_processes > 1:
            digest = result.metrics["weights_sha256"]
            self.stdout.write(
                f"process {process.process_index} of {process.num_processes}: weights sha256 {digest}"
            )

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
