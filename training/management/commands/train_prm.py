"""``manage.py train_prm --export ID [--preset fast|paper] [--labels ratings|preferences|both] [settings]``:
a process reward model on a step-labels export (issue 38)."""

from typing import Any

from django.core.management.base import CommandParser

from training.management.commands._train import TrainCommand
from training.runs.config import PRM_LABELS, RM_PRESETS


class Command(TrainCommand):
    help = "Train a process reward model on a step-labels export, with a progress bar."
    kind = "prm"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--preset", choices=list(RM_PRESETS), help="fast (MiniLM; CPU default) or paper (GPU default)"
        )
        parser.add_argument(
            "--labels",
            choices=PRM_LABELS,
            help="learn from the step ratings, the preferences, or both (default)",
        )

    def overrides(self, options: dict[str, Any]) -> dict[str, Any]:
        chosen = super().overrides(options)
        if options.get("labels"):
            chosen["labels"] = options["labels"]
        return chosen
