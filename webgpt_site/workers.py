"""Worker health: a ping through each Celery queue, answered by whichever worker consumes it."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webgpt_site.models import WorkerPing
from webgpt_site.permissions import AnyUser


def request_pings(user: AnyUser) -> list[WorkerPing]:
    """One ping per queue, each sent to its queue once the rows are committed."""
    from webgpt_site.tasks import ping

    with transaction.atomic():
        requester = user if user.is_authenticated else None
        pings = [
            WorkerPing.objects.create(queue=queue, requested_by=requester) for queue in settings.CELERY_QUEUES
        ]
        for row in pings:
            transaction.on_commit(
                lambda row=row: ping.apply_async(kwargs={"ping_id": row.pk}, queue=row.queue)
            )
    return pings


def answer_ping(ping_id: int, hostname: str) -> None:
    WorkerPing.objects.filter(pk=ping_id, answered_at__isnull=True).update(
        answered_at=timezone.now(), worker_hostname=hostname[:255]
    )


def latest_pings() -> list[WorkerPing]:
    """The most recent ping of each queue; queues never pinged are left out."""
    latest = []
    for queue in settings.CELERY_QUEUES:
        row = WorkerPing.objects.filter(queue=queue).first()
        if row is not None:
            latest.append(row)
    return latest
