"""Annotation jobs. Tasks stay thin: keyword primary keys in, a service function does the work."""

from celery import shared_task

from annotation.exports.service import run_export_job
from annotation.models import Export


@shared_task(name=Export.task_name, ignore_result=True, acks_late=True)
def run_export(*, export_id: int) -> None:
    run_export_job(export_id)
