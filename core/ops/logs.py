"""Log records that say which request (or Celery task) they belong to, as JSON lines or as text.

The middleware (``core.ops.middleware``) puts the request id in a context variable for the time of
the request, and Celery's signals put the task id there for the time of a task; ``ContextFilter``, on the
handler, copies both onto every record, whichever logger (ours, Django's, a library's) wrote it. A task
queued by a request carries that request's id in its message headers, and the worker's lines for the task
carry it too: so one ``grep`` for a request id finds every line of that request, including the export or
training job it started, on whichever machine it ran. ``LOG_FORMAT`` picks ``JsonFormatter`` (production:
one object per line, for a log shipper) or the text format (development: for people).

Imported by the logging configuration before Django's apps are ready: nothing here may import models.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import PermissionDenied

current_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
current_task_id: ContextVar[str | None] = ContextVar("task_id", default=None)

TEXT_FORMAT = "%(asctime)s %(levelname)s [%(context_id)s] %(name)s: %(message)s"

# Attributes every LogRecord has: the rest were passed with ``extra=`` and go into the JSON object.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "context_id"}
_SCALARS = (str, int, float, bool, type(None))


class ContextFilter(logging.Filter):
    """Adds ``request_id`` and ``task_id`` (None outside one) and ``context_id`` (those set, or "-")."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get()
        record.task_id = current_task_id.get()
        record.context_id = " ".join(filter(None, (record.request_id, record.task_id))) or "-"
        return True


class RefusalFilter(logging.Filter):
    """A refusal (403) is the permission check doing its job: Django logs it with the exception's
    traceback, which buried the log of ``make run`` in tracebacks of nothing wrong. The one line stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PermissionDenied):
            record.exc_info, record.exc_text = None, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, request_id, task_id, then
    the record's ``extra`` fields that are plain values (a request object passed by Django is left out),
    and the traceback of an exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
            "task_id": getattr(record, "task_id", None),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry and isinstance(value, _SCALARS):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def logging_config(log_format: str, level: str) -> dict[str, Any]:
    """The ``LOGGING`` setting: one console handler with the context filter and the chosen format."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": ContextFilter}, "refusals": {"()": RefusalFilter}},
        "formatters": {"json": {"()": JsonFormatter}, "text": {"format": TEXT_FORMAT}},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "filters": ["context"], "formatter": log_format}
        },
        "root": {"handlers": ["console"], "level": level},
        # django-axes logs every sign-in at INFO; lockouts (WARNING) still show.
        "loggers": {"axes": {"level": "WARNING"}, "django.request": {"filters": ["refusals"]}},
    }


# Celery workers ------------------------------------------------------------------------------------------


def connect_celery_signals() -> None:
    """In workers: our logging configuration instead of Celery's (so task logs are JSON lines too), and
    the task id (and the id of the request that queued it) on every record a task writes. In web processes:
    the request id into the headers of every task a request queues. Called by the Celery app's module."""
    from celery import signals

    signals.setup_logging.connect(_configure_worker_logging, weak=False)
    signals.before_task_publish.connect(_pass_request_id, weak=False)
    signals.task_prerun.connect(_task_started, weak=False)
    signals.task_postrun.connect(_task_ended, weak=False)


def _configure_worker_logging(loglevel: int | str | None = None, **kwargs: Any) -> None:
    """Replaces Celery's own set-up (connecting any receiver does); keeps the worker's ``--loglevel``."""
    import logging.config

    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


# The message header that carries the id of the request that queued a task. Task protocol 2 merges custom
# headers into the worker's request context, so the task reads it as ``task.request.request_id``.
REQUEST_ID_HEADER = "request_id"


def _pass_request_id(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    request_id = current_request_id.get()
    if request_id and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, request_id)


def _task_started(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    current_task_id.set(task_id)
    request_id = getattr(getattr(task, "request", None), REQUEST_ID_HEADER, None)
    current_request_id.set(request_id if isinstance(request_id, str) else None)


def _task_ended(**kwargs: Any) -> None:
    current_task_id.set(None)
    current_request_id.set(None)
