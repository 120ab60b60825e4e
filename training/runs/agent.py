"""torchrun (``torch.distributed.run``, the launcher ``accelerate launch`` runs) for a training run's
processes (training/runs/processes.py), dying with the worker that started it: ``python -m
training.runs.agent [torchrun's options] manage.py train_process RUN_ID``. No Django here."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to kill this process when the one that started it dies (a worker killed with SIGKILL
    must not leave its training processes running), and stop now if it already has died (the parent's
    pid, in TRAINING_PARENT_PID, is no longer this process's parent)."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    expected = os.environ.get("TRAINING_PARENT_PID")
    if expected and os.getppid() != int(expected):
        os._exit(1)


if __name__ == "__main__":
    die_with_parent()
    os.environ["TRAINING_PARENT_PID"] = str(os.getpid())  # what the processes it starts check
    from torch.distributed.run import main

    main()
