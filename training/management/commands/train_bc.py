"""``manage.py train_bc --export ID [settings]`` (or ``--data FILE --output DIR``): behaviour cloning."""

from training.management.commands._train import TrainCommand


class Command(TrainCommand):
    help = "Fine-tune a policy on a bc-pairs export (loss on completions only), with a progress bar."
    kind = "bc"
