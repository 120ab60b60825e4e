"""A finished run's model into the registry: published whole first (uploaded, with a bucket), then its row
(name ``<kind>-run-<id>``), so a registered model's files are always all there. Every training kind's job
ends here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training import checkpoints
from training.models import ModelCheckpoint, TrainingRun


def register_model(run: TrainingRun, output: Path, base: str, metrics: dict[str, Any]) -> ModelCheckpoint:
    location = checkpoints.publish(run.pk, output)
    return ModelCheckpoint.objects.create(
        kind=run.kind,
        name=f"{run.kind}-run-{run.pk}",
        base_model=base,
        path=location,
        storage_name=checkpoints.storage_name(run.pk),
        metrics=metrics,
        run=run,
        created_by=run.owner,
    )
