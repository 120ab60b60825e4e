"""Training runs as jobs: checked and queued by the web app (or a command), run by a worker on the
``training`` queue, reporting progress into their row, registering the model they produce."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

from annotation.exports.service import export_path
from annotation.models import Answer, Export, Question
from core.jobs.queueing import enqueue
from core.jobs.runner import run_job
from core.models import log_action
from training import checkpoints
from training.checkpoints import output_dir, state_dir
from training.errors import RunError
from training.models import ModelCheckpoint, RunKind, SamplingRun, TrainingRun
from training.models import RunStatus as Status
from training.rl.config import RLConfig
from training.rl.job import execute_rl
from training.runs.config import PRM_FEW_LABELS, BCConfig, PRMConfig, RMConfig, StoredSettings
from training.runs.data import comparisons, question_ids, read_rows
from training.runs.inputs import check_run, config_for
from training.runs.processes import train
from training.runs.progress import Progress
from training.runs.register import register_model


def request_run(
    user: Any,
    kind: str,
    export: Export,
    settings_: dict[str, Any] | None = None,
    preset: str = "",
    base_checkpoint: ModelCheckpoint | None = None,
    queue: bool = True,
    local_paths: bool = False,
) -> TrainingRun:
    """Check everything that can be checked before a worker spends time on it (training.runs.inputs: the same
    checks for the page, the API and the commands), then create the row (and queue it once committed).
    Raises RunError with the reason. ``local_paths``: an operator's command may name a model folder."""
    preset, config = check_run(
        kind, export, preset, settings_ or {}, base_checkpoint, local_paths=local_paths
    )
    with transaction.atomic():
        run = TrainingRun.objects.create(
            kind=kind,
            owner=user if getattr(user, "is_authenticated", False) else None,
            export=export,
            base_checkpoint=base_checkpoint,
            preset=preset,
            config=config.to_dict(),
        )
        log_action(user, "training.request", run, kind=kind, export=export.pk, config=run.config)
        if queue:
            enqueue(run)
    return run


def cancel_run(user: Any, run: TrainingRun) -> None:
    """A queued run is cancelled at once; a running one stops after its current step."""
    run.request_cancel()
    log_action(user, "training.cancel", run)


def resume_run(user: Any, run: TrainingRun) -> int:
    """A failed run queued again to continue from its latest checkpoint on this machine (the model store's
    ``training-state`` folder); the checkpoint's step. RunError when it has none or is not failed."""
    step = checkpoints.resumable_step(run.pk)
    if run.status != Status.FAILED or step is None:
        raise RunError("only a failed run with a checkpoint can continue", "status")
    line = f"Resume asked for: queued again to continue from the checkpoint of step {step}"
    with transaction.atomic():
        failed = TrainingRun.objects.filter(pk=run.pk, status=Status.FAILED)
        if not failed.update(**TrainingRun.requeued_fields(line)):
            raise RunError("the run is no longer failed", "status")
        log_action(user, "training.resume", run, step=step)
        enqueue(run)
    return step


def checkpoint_users(checkpoint: ModelCheckpoint) -> QuerySet[TrainingRun]:
    """Queued or running runs that read the model: they start from it, or (RL) are rewarded by it."""
    uses = Q(base_checkpoint=checkpoint) | Q(reward_model=checkpoint)
    return TrainingRun.objects.filter(uses, status__in=(Status.QUEUED, Status.RUNNING))


def delete_checkpoint(user: Any, checkpoint: ModelCheckpoint) -> None:
    """The registry row and its files (its objects in the bucket, or its folder: only folders inside the
    model store are ever removed). Refused while a queued or running job starts from it, samples with it
    or scores with it: that job still has to read the files. Finished sampling runs keep the model's name.
    Copies in workers' caches are not removed (docs/deployment.md, "Object storage")."""
    active = (Status.QUEUED, Status.RUNNING)
    uses = Q(policy=checkpoint) | Q(reward_model=checkpoint)
    sampling = SamplingRun.objects.filter(uses, status__in=active)
    if checkpoint_users(checkpoint).exists() or sampling.exists():
        raise RunError(f"{checkpoint.name} is in use by a queued or running run: nothing deleted")
    checkpoints.delete_files(checkpoint)
    log_action(user, "training.delete_checkpoint", checkpoint, path=checkpoint.path)
    checkpoint.delete()


def check_splits(rows: list[dict[str, Any]]) -> None:
    """Training never sees evaluation questions: refuse data that holds any."""
    ids = question_ids(rows)
    leaked = Question.objects.filter(pk__in=ids, split="eval").count() if ids else 0
    if leaked:
        raise RunError(
            f"{leaked} question(s) of this export are in the eval split: training on them would leak the "
            "evaluation set; export with a split filter (bc or rm) or with eval-split questions left out"
        )


def run_training_job(run_id: int, echo: Callable[[int, int, dict], None] | None = None) -> TrainingRun:
    """The worker's job (core.jobs.runner: whatever happens, the row ends done, cancelled or failed
    with the reason; bad data or settings fail it without a traceback in the log)."""
    return run_job(
        TrainingRun,
        run_id,
        lambda run: _execute(run, Progress(run, echo)),
        related=("export", "base_checkpoint", "reward_model"),
        expected=(RunError, ValueError),
    )


def job_config_class(kind: str) -> type[StoredSettings]:
    """The settings dataclass a run of ``kind`` trains with."""
    return {RunKind.BC: BCConfig, RunKind.PRM: PRMConfig, RunKind.RL: RLConfig}.get(kind, RMConfig)


def _execute(run: TrainingRun, progress: Progress) -> TrainingRun:
    if run.kind == RunKind.RL:  # no export: questions and a reward model (training.rl.job)
        return execute_rl(run, progress.hooks(), progress.timeline)
    run.keep_on_failure(lambda: {"timeline": progress.timeline})
    output = output_dir(run.pk)
    data = export_path(run.export)  # with object storage, a checked copy in this worker's cache
    rows = read_rows(data)
    run.append_log(f"{len(rows)} rows from export {run.export.pk} ({run.export.export_format})")
    if run.kind == RunKind.RM_EVAL:
        return _evaluate(run, rows)
    check_splits(rows)
    config = replace(
        config_for(run.kind, run.preset, run.config),
        data=str(data),
        output_dir=str(output),
        state_dir=str(state_dir(run.pk)),
    )
    if run.base_checkpoint is not None:  # the registered model on this worker (downloaded if need be)
        config.base_model = str(checkpoints.local_folder(run.base_checkpoint))
    config.threads = config.threads or settings.TRAINING_THREADS
    shutil.rmtree(output, ignore_errors=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(config, PRMConfig) and len(rows) < PRM_FEW_LABELS:
        run.append_log(
            f"Warning: {len(rows)} step labels. PRM800K trained on about 800,000 and Web-Shepherd on "
            f"40,000 preference pairs; under {PRM_FEW_LABELS} this run checks the pipeline, its model "
            "is no verifier to rely on"
        )
    elif isinstance(config, RMConfig) and not isinstance(config, PRMConfig):
        answer_ids = {i for row in rows for i in _answer_ids(row)}
        config.demonstration_answer_ids = list(
            Answer.objects.filter(pk__in=answer_ids, episode__isnull=False).values_list("pk", flat=True)
        )
    result = train(run, config, progress.hooks())
    if result.cancelled:
        shutil.rmtree(output, ignore_errors=True)
        run.append_log(
            f"Cancelled after step {result.steps}: the partly trained model was discarded (a model is "
            "registered only when its training ends); the loss curve and metrics so far are kept"
        )
        return _finish(
            run, Status.CANCELLED, metrics=result.metrics, timeline=result.history, step=result.steps
        )
    base = run.base_checkpoint.name if run.base_checkpoint else config.base_model
    register_model(run, output, base, result.metrics)
    metrics = result.metrics | {"train_examples": result.train_examples}
    metrics["validation_examples"] = result.validation_examples
    return _finish(run, Status.DONE, metrics=metrics, timeline=result.history, step=result.steps)


def _evaluate(run: TrainingRun, rows: list[dict[str, Any]]) -> TrainingRun:
    # torch: loaded in the worker only, not in every process that imports this module
    from training.runs.reward import comparison_metrics, load_reward_model

    folder = checkpoints.local_folder(run.base_checkpoint)
    model, tokenizer = load_reward_model(folder)
    trained_with = json.loads((folder / "training.json").read_text())["config"]
    max_length = int(trained_with["max_length"])  # score as it was trained
    metrics = comparison_metrics(model, tokenizer, comparisons(rows), max_length)
    return _finish(run, Status.DONE, metrics=metrics, step=1, total_steps=1)


def _answer_ids(row: dict[str, Any]) -> list[int]:
    ids = row.get("answer_ids") or [row.get("answer_chosen"), row.get("answer_rejected")]
    return [i for i in ids if isinstance(i, int)]


def _finish(run: TrainingRun, status: str, **fields: Any) -> TrainingRun:
    if status == Status.DONE:
        fields.setdefault("step", run.total_steps)
    checkpoints.discard_state(run.pk)
    return run.finish(status, **fields)
