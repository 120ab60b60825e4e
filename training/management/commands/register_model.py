"""``manage.py register_model FOLDER [--name NAME]``: a model folder trained outside a worker (the training
commands' file form, launched with torchrun across machines) into the registry, read where it is. Its kind,
base model and metrics come from the ``training.json`` the trainer wrote beside the weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.models import log_action
from training.models import CHECKPOINT_KINDS, ModelCheckpoint

KINDS = {kind for kind, _ in CHECKPOINT_KINDS}


class Command(BaseCommand):
    help = "Register a model folder a training command's file form wrote (its training.json names the kind)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "folder", type=Path, help="the folder the trainer wrote (on a shared file system)"
        )
        parser.add_argument("--name", help="the name the console shows (default: the folder's name)")

    def handle(self, *args: Any, **options: Any) -> None:
        folder = options["folder"].resolve()
        summary_path = folder / "training.json"
        if not (folder / "config.json").is_file() or not summary_path.is_file():
            raise CommandError(f"{folder} is not a trained model folder (no config.json and training.json)")
        try:
            summary = json.loads(summary_path.read_text())
        except ValueError as exc:
            raise CommandError(f"{summary_path}: not JSON ({exc})") from None
        kind = summary.get("kind") if isinstance(summary, dict) else None
        if kind not in KINDS:
            raise CommandError(f"{summary_path}: kind {kind!r} is not one of {', '.join(sorted(KINDS))}")
        checkpoint = ModelCheckpoint.objects.create(
            kind=kind,
            name=options["name"] or folder.name,
            base_model=str(summary.get("base_model", ""))[:300],
            path=str(folder),
            metrics=summary.get("metrics") or {},
        )
        log_action(None, "training.register_model", checkpoint, path=str(folder))
        self.stdout.write(
            f"registered {checkpoint.kind} model {checkpoint.name} (id {checkpoint.pk}) at {folder}"
        )
