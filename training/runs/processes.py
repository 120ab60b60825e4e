"""Where a training run's work happens: in the job's own process, or in several data-parallel processes.

A run's ``processes`` setting (1 by default) is how many. For more than one, the job launches them on its
machine with torchrun (``torch.distributed.run``, what ``accelerate launch`` runs underneath), each running
``manage.py train_process RUN_ID``: the trainers are accelerate's (BC, RM and PRM through transformers'
Trainer, which wraps the model in DDP; RL through ``training.rl.ranks``), one device each on a GPU
machine, the gloo backend and a share of the CPU threads each on a CPU. The first process reports the
progress into the run's row and reads its cancel flag (the others follow it) and writes the result the job
then finishes the run with; the job waits for them, and if they fail the run fails with the end of their
log. They die with the worker: a worker killed mid-run takes its processes with it, and the run continues
from its last checkpoint when it is resumed (``TrainingRun.resume``).

Nothing here loads torch: the web app imports it to check a request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings

from training.checkpoints import resumable_step, state_dir, store_dir
from training.errors import RunError
from training.models import RunKind
from training.runs.hooks import Hooks, RunResult

LAUNCH_FILE = "launch.json"  # the prepared settings every process reads
RESULT_FILE = "result.json"  # the first process's RunResult
ERROR_FILE = "error-{rank}.txt"  # a process's exception, when it failed
LOG_FILE = "processes.log"  # what the processes printed
LOG_TAIL = 1500  # characters of their log a failed run's reason keeps
MANAGE = Path(__file__).resolve().parents[2] / "manage.py"
# What trains a run in one process: (run, config, hooks, main=...) -> RunResult.
Trainer = Callable[..., RunResult]


def check_processes(count: int) -> None:
    """Refuse more processes than this deployment lets one run start (TRAINING_MAX_PROCESSES)."""
    most = settings.TRAINING_MAX_PROCESSES
    if count > most:
        raise RunError(
            f"must be at most {most} on this deployment (TRAINING_MAX_PROCESSES), not {count}", "processes"
        )


def threads_each(total: int, count: int) -> int:
    """CPU threads per process: the job's share (TRAINING_THREADS, else the machine's cores) divided among
    its processes, at least one (each process left at torch's default would use every core)."""
    return max(1, (total or os.cpu_count() or 1) // count)


def train(run: Any, config: Any, hooks: Hooks, here: Trainer | None = None) -> RunResult:
    """Train ``run`` with its prepared ``config`` here (one process: ``here``, by default the BC, RM and
    PRM trainers' ``train_here``; RL passes its own) or in ``config.processes``."""
    if run.resumes and resumable_step(run.pk) is None:
        run.append_log(
            f"No checkpoint of this run on this machine ({state_dir(run.pk)}): it starts again from step 0 "
            "(to continue on another machine, the model store must be on a shared file system)"
        )
    if config.processes == 1:
        return (here or train_here)(run, config, hooks, main=True)
    return launch(run, config)


def train_here(run: Any, config: Any, hooks: Hooks, *, main: bool) -> RunResult:
    """This process's part of a BC, RM or PRM run (all of it when it is the only one). ``main``: the first
    process, whose hooks report (the Trainer tells the processes apart itself)."""
    # torch: loaded in the worker only, not in every process that imports this module
    from training.runs.bc import train_bc
    from training.runs.prm import train_prm
    from training.runs.reward import train_reward_model

    trainer = {RunKind.BC: train_bc, RunKind.PRM: train_prm}.get(run.kind, train_reward_model)
    return trainer(config, hooks, store_dir())


def launch(run: Any, config: Any) -> RunResult:
    """Start ``config.processes`` processes for ``run`` under torchrun on this machine and wait for them;
    the first one's result. RunError with the end of their log when they fail."""
    count = config.processes
    folder = state_dir(run.pk)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (RESULT_FILE, *(ERROR_FILE.format(rank=rank) for rank in range(count))):
        (folder / stale).unlink(missing_ok=True)
    (folder / LAUNCH_FILE).write_text(json.dumps({"config": config.to_dict()}))
    command = [
        sys.executable, "-m", "training.runs.agent", "--standalone", f"--nproc-per-node={count}",
        "--max-restarts=0", str(MANAGE), "train_process", str(run.pk),
    ]  # fmt: skip
    threads = threads_each(config.threads or settings.TRAINING_THREADS, count)
    env = os.environ | {"OMP_NUM_THREADS": str(threads), "TRAINING_PARENT_PID": str(os.getpid())}
    run.keep_on_failure(dict)  # the first process writes the row's progress: nothing here to keep
    run.append_log(f"Training in {count} processes ({threads} CPU thread(s) each without a GPU)")
    log_path = folder / LOG_FILE
    with log_path.open("ab") as log:
        # The command is ours: this interpreter, torchrun's options and a run's id.
        code = subprocess.Popen(command, cwd=MANAGE.parent, env=env, stdout=log, stderr=log).wait()  # noqa: S603
    result = folder / RESULT_FILE
    if code or not result.is_file():
        stopped = f"the {count} training processes stopped (exit status {code})"
        errors = [folder / ERROR_FILE.format(rank=rank) for rank in range(count)]
        if found := [path for path in errors if path.is_file()]:
            raise RunError(f"{stopped}: process {found[0].stem.split('-')[1]}: {found[0].read_text()}")
        tail = log_path.read_text(errors="replace")[-LOG_TAIL:]
        raise RunError(f"{stopped}; their log ends:\n{tail}")
    return RunResult(**json.loads(result.read_text()))


def write_result(run_id: int, result: RunResult) -> None:
    """The first process's result, for the job that launched it."""
    (state_dir(run_id) / RESULT_FILE).write_text(json.dumps(asdict(result)))


def write_error(run_id: int, rank: int, exc: BaseException) -> None:
    """A process's failure in a line (the worker log and the processes' log have the traceback)."""
    reason = f"{type(exc).__name__}: {exc}"[:LOG_TAIL]
    (state_dir(run_id) / ERROR_FILE.format(rank=rank)).write_text(reason)
