"""Project package: settings, URLs, the Celery app and the pages shared by every role."""

from webgpt_site.celery import app as celery_app

__all__ = ("celery_app",)
