"""Jobs of the browser app. Tasks stay thin: keyword primary keys in, a service function does the work."""

from celery import shared_task

from browser.import_jobs import run_corpus_import_job
from browser.models import CorpusImport


@shared_task(name=CorpusImport.task_name, ignore_result=True, acks_late=True)
def run_corpus_import(*, import_id: int) -> None:
    run_corpus_import_job(import_id)
