"""What the pages of the jobs (training runs, sampling runs, proxy evaluations) do alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib import messages
from django.http import HttpRequest

from core.jobs.models import JobRow
from training.models import RunKind, TrainingRun

Job = TypeVar("Job", bound=JobRow)
PAGE_SIZE = 50  # rows of a job list page


def cancel_unless_finished(
    request: HttpRequest, job: Job, name: str, cancel: Callable[[Any, Job], None]
) -> None:
    """Asks ``cancel`` to cancel the job unless it has already ended; the next page says which (``name``:
    what the job is called there, e.g. "Sampling run")."""
    if job.is_finished:
        status = job.get_status_display().lower()
        messages.info(request, f"{name} {job.pk} had already finished ({status}).")
    else:
        cancel(request.user, job)
        messages.info(request, f"{name} {job.pk}: cancel requested.")


def announce_request(request: HttpRequest, job: JobRow, name: str) -> None:
    """The banner over a job's page after it was asked for, in words that stay true: the page polls only
    its status, so a banner saying "queued" stayed there beside "Done". Whether it waits for a worker,
    runs or has ended is the status's to say."""
    messages.success(request, f"{name} {job.pk} requested: its status below follows it to the end.")


def shown(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def key_metrics(run: TrainingRun) -> dict[str, Any]:
    """The numbers runs are compared by, named alike for training runs and evaluations."""
    found = run.metrics or {}
    if run.kind == RunKind.RM_EVAL:
        low, high = found.get("accuracy_ci95") or (None, None)
        return {
            "train_loss": None,
            "eval_loss": found.get("log_loss"),
            "accuracy": found.get("accuracy"),
            "low": low,
            "high": high,
        }
    return {
        "train_loss": found.get("train_loss"),
        "eval_loss": found.get("eval_loss"),
        "accuracy": found.get("eval_accuracy"),
        "low": found.get("eval_accuracy_low"),
        "high": found.get("eval_accuracy_high"),
    }
