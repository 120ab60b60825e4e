"""Platform tasks. Tasks stay thin: they take primary keys as keyword arguments and call a service."""

from celery import shared_task

from core.workers import PING_TASK, answer_ping


@shared_task(bind=True, name=PING_TASK, ignore_result=True)
def ping(self, *, ping_id: int) -> None:
    answer_ping(ping_id, hostname=self.request.hostname or "")
