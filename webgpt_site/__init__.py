"""The project package, the top floor: settings, URLs and the API's route table, the Celery app, the
console and queues pages that gather every app, health and metrics, the demo loader. No app imports it."""

from webgpt_site.celery import app as celery_app

__all__ = ("celery_app",)
