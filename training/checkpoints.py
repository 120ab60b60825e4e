"""Where a registered model's files are. A run's model is published to the ``models`` storage as
``run-N`` (``core/storage.py``): with local storage it stays in MODEL_STORE_DIR/runs/run-N and is
read there; with object storage it is uploaded to the bucket and every worker that loads it (a BC base
model, a sampling policy, a reward model, a proxy evaluation) reads a complete copy in its own cache,
downloaded once. A model registered by path (``storage_name`` empty) is read where it is. No torch here."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol

from django.conf import settings

from core.storage import MODELS, get_storage


class StoredModel(Protocol):
    """What this module reads of a registered model (``training.models.ModelCheckpoint``, which imports
    this module: the registry's row is described here, not imported)."""

    path: str
    storage_name: str


def store_dir() -> Path:
    return Path(settings.MODEL_STORE_DIR)


def output_dir(run_id: int) -> Path:
    """Where run ``run_id`` writes its model; removed whole unless the run ends done."""
    return store_dir() / "runs" / f"run-{run_id}"


def state_dir(run_id: int) -> Path:
    """Where run ``run_id`` keeps the checkpoints it resumes from (training/runs/processes.py): beside the
    models, kept while the run may still continue (it failed, or its worker died), removed when it ends
    done or cancelled. Resuming on another machine needs the model store on a shared file system."""
    return store_dir() / "training-state" / f"run-{run_id}"


def resumable_step(run_id: int) -> int | None:
    """The step of run ``run_id``'s latest checkpoint on this machine (the trainers name them
    checkpoint-STEP), or None when there is none to continue from."""
    folder = state_dir(run_id)
    steps = [int(p.name.split("-", 1)[1]) for p in folder.glob("checkpoint-*") if p.name[11:].isdigit()]
    return max(steps, default=None)


def discard_state(run_id: int) -> None:
    """Run ``run_id``'s checkpoints: it ended done or cancelled, nothing is left to resume."""
    shutil.rmtree(state_dir(run_id), ignore_errors=True)


def discard_output(run_id: int) -> None:
    """The model folder run ``run_id`` was writing (when this machine ran it) and whatever of it was being
    published (objects in the bucket, and a file's unfinished upload: a model is registered only once all
    of it is there)."""
    shutil.rmtree(output_dir(run_id), ignore_errors=True)
    get_storage(MODELS).delete_folder(storage_name(run_id))  # unfinished uploads to it included


def storage_name(run_id: int) -> str:
    return f"run-{run_id}"


def publish(run_id: int, folder: Path) -> str:
    """Run ``run_id``'s finished model folder, published whole (nothing is registered before this
    returns); where it now is, for ``ModelCheckpoint.path``."""
    return get_storage(MODELS).publish_folder(storage_name(run_id), folder)


def local_folder(checkpoint: StoredModel) -> Path:
    """A folder on this machine holding the checkpoint's files, ready for ``from_pretrained``."""
    if not checkpoint.storage_name:
        return Path(checkpoint.path)
    try:
        return get_storage(MODELS).local_folder(checkpoint.storage_name)
    except FileNotFoundError:
        if Path(checkpoint.path).is_dir():  # trained here before the switch to object storage
            return Path(checkpoint.path)
        raise


def delete_files(checkpoint: StoredModel) -> None:
    """The checkpoint's files: its stored folder (objects in the bucket, or the folder), and its folder on
    this machine (registered by path, or trained here before a switch to a bucket) when that is inside the
    model store: no other folder is ever removed."""
    if checkpoint.storage_name:
        get_storage(MODELS).delete_folder(checkpoint.storage_name)
    folder = Path(checkpoint.path)  # s3://... is no folder here
    if folder.is_absolute() and Path(settings.MODEL_STORE_DIR).resolve() in folder.resolve().parents:
        shutil.rmtree(folder, ignore_errors=True)
