"""The Celery app. Queues: ``default`` (small jobs), ``exports`` (dataset files), ``training`` (models).

Workers: ``celery -A webgpt_site worker -Q default,exports,training`` (``make run`` starts one).
"""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webgpt_site.settings")

app = Celery("webgpt_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _declare_queues(sender: Celery, **kwargs: object) -> None:
    from django.conf import settings

    sender.conf.task_queues = [Queue(name) for name in settings.CELERY_QUEUES]
    if settings.CELERY_BROKER_URL == "filesystem://":
        # The embedded broker keeps messages as files: the web process and the worker both need the folder.
        Path(settings.CELERY_BROKER_FOLDER).mkdir(parents=True, exist_ok=True)
