"""``manage.py train_process RUN_ID``: one of the processes a training run's worker launched under torchrun
(training/runs/processes.py); not for people to call. It trains with the settings the worker prepared,
the first process reporting into the run's row and writing the result the worker finishes the run with."""

from __future__ import annotations

import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from training.checkpoints import state_dir
from training.models import RunKind, TrainingRun
from training.rl.job import train_rl_here
from training.runs.agent import die_with_parent
from training.runs.hooks import Hooks
from training.runs.jobs import Progress, job_config_class
from training.runs.processes import LAUNCH_FILE, train_here, write_error, write_result


class Command(BaseCommand):
    help = "One process of a training run its worker launched on several (internal: started by the worker)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        die_with_parent()
        run = TrainingRun.objects.select_related("export", "base_checkpoint", "reward_model").get(
            pk=options["run_id"]
        )
        prepared = json.loads((state_dir(run.pk) / LAUNCH_FILE).read_text())["config"]
        config = job_config_class(run.kind).from_dict(prepared)
        rank = int(os.environ.get("RANK", "0"))
        hooks = Progress(run, None).hooks() if rank == 0 else Hooks()
        here = train_rl_here if run.kind == RunKind.RL else train_here
        try:
            result = here(run, config, hooks, main=rank == 0)
        except BaseException as exc:
            write_error(run.pk, rank, exc)  # the worker's reason for the run; torchrun's report says less
            raise
        if rank == 0:
            write_result(run.pk, result)
