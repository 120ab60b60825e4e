"""The Celery app. Queues: ``default`` (small jobs), ``exports`` (dataset files and corpus imports),
``training`` (models), ``sampling`` (a policy browsing). Every worker also sweeps for jobs whose worker died
(``core.jobs.sweeper``).

Workers: ``celery -A webgpt_site worker -Q default,exports,training,sampling`` (``make run`` starts three).
"""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from celery.signals import worker_ready
from kombu import Queue

from core.ops.logs import connect_celery_signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webgpt_site.settings")

app = Celery("webgpt_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Workers log through Django's LOGGING (JSON lines in production), each record with its task's id.
connect_celery_signals()


@app.on_after_configure.connect
def _declare_queues(sender: Celery, **kwargs: object) -> None:
    from django.conf import settings

    sender.conf.task_queues = [Queue(name) for name in settings.CELERY_QUEUES]
    if settings.CELERY_BROKER_URL == "filesystem://":
        # The embedded broker keeps messages as files: the web process and the worker both need the folder.
        Path(settings.CELERY_BROKER_FOLDER).mkdir(parents=True, exist_ok=True)


@worker_ready.connect
def _sweep_jobs(**kwargs: object) -> None:
    """Each worker sweeps for orphaned and lost jobs when it starts and then periodically (no beat needed)."""
    from core.jobs.sweeper import start_sweeping

    start_sweeping()
