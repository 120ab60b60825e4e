"""Annotation jobs. Tasks stay thin: keyword primary keys in, a service function does the work."""

from celery import shared_task

from annotation.exports.service import run_export_job


@shared_task(name="annotation.run_export", ignore_result=True, acks_late=True)
def run_export(*, export_id: int) -> None:
    run_export_job(export_id)
