"""``manage.py train_rm --export ID [--preset fast|paper] [settings]``: a reward model."""

from django.core.management.base import CommandParser

from training.management.commands._train import TrainCommand
from training.runs.config import RM_PRESETS


class Command(TrainCommand):
    help = "Train a reward model on an rm-pairs or rm-groups export, with a progress bar."
    kind = "rm"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--preset", choices=list(RM_PRESETS), help="fast (MiniLM; CPU default) or paper (GPU default)"
        )
