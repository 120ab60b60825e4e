"""Training jobs on the ``training`` queue (run its worker with concurrency 1: a job uses every core)."""

from celery import shared_task

from training.jobs import run_training_job


@shared_task(name="training.run_training", ignore_result=True, acks_late=True)
def run_training(*, run_id: int) -> None:
    run_training_job(run_id)
