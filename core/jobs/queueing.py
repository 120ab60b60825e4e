"""Sending a job's task: by its name, to its queue, once the row is committed (a worker must find the row,
and a rolled-back request must send nothing). Producers never import the task, so queueing a job imports
nothing of the worker's code (Zulip's workers by queue name)."""

from __future__ import annotations

from celery import current_app
from django.db import transaction

from core.jobs.models import JobRow


def send(model: type[JobRow], pk: int) -> None:
    """The task of ``model``'s row ``pk`` sent now."""
    current_app.send_task(model.task_name, kwargs={model.task_key: pk}, queue=model.queue)


def enqueue(row: JobRow) -> None:
    """The task of ``row`` sent when the current transaction commits (at once outside one)."""
    model, pk = type(row), row.pk
    transaction.on_commit(lambda: send(model, pk))
