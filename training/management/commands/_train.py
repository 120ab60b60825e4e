"""What ``train_bc``, ``train_rm`` and ``train_prm`` share: the options, the progress bar, and the two modes.

- ``--export ID``: a registered run (a TrainingRun row, the model in the store, a ModelCheckpoint), run
  here instead of on a worker: the same job code.
- ``--data FILE --output DIR``: just the trainer, no database writes; this is the form to launch on many
  GPUs (``torchrun --nproc-per-node 8 manage.py train_bc --data ... --output ...``).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Export
from training.checkpoints import store_dir
from training.errors import RunError
from training.models import ModelCheckpoint
from training.models import RunStatus as Status
from training.runs.hooks import Hooks
from training.runs.inputs import check_run
from training.runs.jobs import request_run, run_training_job

# option name -> (type, help); None means "the trainer's default"
SETTINGS: dict[str, tuple[type, str]] = {
    "base_model": (str, "preset name (smollm2-135m-instruct, all-minilm-l6-v2) or a model folder"),
    "max_steps": (int, "optimizer steps (overrides --epochs)"),
    "epochs": (float, "passes over the training data"),
    "batch_size": (int, "examples (BC) or comparisons (RM) per step"),
    "gradient_accumulation": (int, "steps accumulated per optimizer step"),
    "learning_rate": (float, "peak learning rate (cosine schedule)"),
    "max_length": (int, "tokens per sequence"),
    "lora_rank": (int, "train LoRA adapters of this rank (0: all weights)"),
    "validation_fraction": (float, "share of questions held out"),
    "eval_every": (int, "steps between validations"),
    "early_stopping_patience": (int, "validations without improvement before stopping (0: off)"),
    "checkpoint_every": (int, "steps between checkpoints a failed run continues from (0: at validations)"),
    "processes": (int, "data-parallel processes this run starts (--export; under torchrun: its own)"),
    "resume_attempts": (int, "times the sweeper continues the run when its worker dies (--export)"),
    "threads": (int, "CPU threads"),
    "seed": (int, "random seed"),
}


def progress_bar(step: int, total: int, logs: dict[str, float], width: int = 30) -> str:
    filled = int(width * step / total) if total else 0
    shown = " ".join(f"{k} {v:.4g}" for k, v in logs.items() if k in ("loss", "eval_loss", "eval_accuracy"))
    return f"[{'#' * filled}{'.' * (width - filled)}] {step}/{total} {shown}"


class TrainCommand(BaseCommand):
    kind = ""

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--export", type=int, help="a finished export: a registered run")
        source.add_argument("--data", type=Path, help="an export file (JSONL/Parquet): no registry")
        parser.add_argument("--output", type=Path, help="model folder (with --data)")
        parser.add_argument("--base-checkpoint", type=int, help="a registered model to start from")
        parser.add_argument("--gradient-checkpointing", action="store_true", default=None)
        for name, (kind, text) in SETTINGS.items():
            parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)

    def overrides(self, options: dict[str, Any]) -> dict[str, Any]:
        names = [*SETTINGS, "gradient_checkpointing"]
        return {name: options[name] for name in names if options.get(name) is not None}

    def echo(self, step: int, total: int, logs: dict[str, float]) -> None:
        if os.environ.get("RANK", "0") != "0":  # under torchrun, the first process draws the bar
            return
        self.stdout.write("\r" + progress_bar(step, total, logs), ending="")
        self.stdout.flush()

    def handle(self, *args: Any, **options: Any) -> None:
        preset = options.get("preset") or ""
        settings_ = self.overrides(options)
        base = None
        if options["base_checkpoint"]:
            base = ModelCheckpoint.objects.filter(pk=options["base_checkpoint"]).first()
            if base is None:
                raise CommandError(f"checkpoint {options['base_checkpoint']} does not exist")
        try:
            if options["data"]:
                return self.train_file(options, preset, settings_, base)
            export = Export.objects.filter(pk=options["export"]).first()
            if export is None:
                raise CommandError(f"export {options['export']} does not exist")
            # The operator at the command line may name a model folder as --base-model; pages and the
            # API may not (training.runs.inputs).
            run = request_run(None, self.kind, export, settings_, preset, base, queue=False, local_paths=True)
        except RunError as exc:
            raise CommandError(str(exc)) from None
        run = run_training_job(run.pk, echo=self.echo)
        self.stdout.write("")
        if run.status != Status.DONE:
            raise CommandError(f"run {run.pk} {run.status}: {run.error}")
        checkpoint = run.checkpoint
        self.stdout.write(f"run {run.pk} done: {checkpoint.name} in {checkpoint.path}")
        self.stdout.write(f"metrics: {run.metrics}")

    def train_file(
        self, options: dict[str, Any], preset: str, settings_: dict[str, Any], base: ModelCheckpoint | None
    ) -> None:
        from training.runs.bc import train_bc
        from training.runs.prm import train_prm
        from training.runs.reward import train_reward_model

        if not options["output"]:
            raise CommandError("--output is required with --data")
        _, config = check_run(self.kind, None, preset, settings_, base, local_paths=True)
        config = replace(config, data=str(options["data"]), output_dir=str(options["output"]))
        trainer = {"bc": train_bc, "prm": train_prm}.get(self.kind, train_reward_model)
        try:
            result = trainer(config, Hooks(on_progress=self.echo), store_dir())
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write("")
        self.stdout.write(f"{result.steps} steps; model in {result.output_dir}", ending="\n")
        self.stdout.write(f"metrics: {result.metrics}")
