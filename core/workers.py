"""Worker health: a ping through each Celery queue, answered by whichever worker consumes it."""

from __future__ import annotations

from datetime import datetime

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.jobs.heartbeat import stale_before
from core.jobs.models import JobStatus
from core.jobs.sweeper import job_models
from core.models import WorkerPing
from core.permissions import AnyUser

PING_TASK = "webgpt_site.ping"  # sent by name: webgpt_site.tasks answers it with ``answer_ping``


def request_pings(user: AnyUser) -> list[WorkerPing]:
    """One ping per queue, each sent to its queue once the rows are committed."""
    with transaction.atomic():
        requester = user if user.is_authenticated else None
        pings = [
            WorkerPing.objects.create(queue=queue, requested_by=requester) for queue in settings.CELERY_QUEUES
        ]
        for row in pings:
            transaction.on_commit(
                lambda row=row: current_app.send_task(PING_TASK, kwargs={"ping_id": row.pk}, queue=row.queue)
            )
    return pings


def answer_ping(ping_id: int, hostname: str) -> None:
    WorkerPing.objects.filter(pk=ping_id, answered_at__isnull=True).update(
        answered_at=timezone.now(), worker_hostname=hostname[:255]
    )


def latest_pings() -> list[WorkerPing]:
    """The most recent ping of each queue, those past their patience marked ``busy`` when their queue is;
    queues never pinged are left out."""
    firsts = (WorkerPing.objects.filter(queue=queue).first() for queue in settings.CELERY_QUEUES)
    latest = [row for row in firsts if row is not None]
    silent = [row for row in latest if row.state == "no worker"]
    if silent:  # asked only then: the console polls this every second while pings wait
        busy = busy_queues()
        for row in silent:
            row.busy = row.queue in busy
    return latest


def busy_queues(now: datetime | None = None) -> set[str]:
    """The queues with a job running whose heartbeat is live: a worker is there, busy with it, and a ping
    waits behind it, so its silence does not mean that the queue has no worker."""
    live = stale_before(now)
    return {
        model.queue
        for model in job_models()
        if model.objects.filter(status=JobStatus.RUNNING, heartbeat_at__gte=live).exists()
    }
