"""``manage.py check_workers``: ping every Celery queue and wait for the answers (a deploy health check). A
queue whose worker is busy with a job (its heartbeat live) passes: the ping only waits behind the job."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.models import WorkerPing
from core.workers import busy_queues, request_pings


class Command(BaseCommand):
    help = "Send a ping through each queue (default, exports, training); fail if one gets no answer in time."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.contrib.auth.models import AnonymousUser

        pings = request_pings(AnonymousUser())
        deadline = time.monotonic() + options["timeout"]
        pending = {row.pk for row in pings}
        while pending and time.monotonic() < deadline:
            time.sleep(0.2)
            pending -= set(
                WorkerPing.objects.filter(pk__in=pending, answered_at__isnull=False).values_list(
                    "pk", flat=True
                )
            )
        busy = busy_queues() if pending else set()
        silent = 0
        for row in WorkerPing.objects.filter(pk__in=[p.pk for p in pings]).order_by("id"):
            if row.answered_at:
                status = f"answered by {row.worker_hostname}"
            elif row.queue in busy:
                status = "no answer yet, but a job of this queue is running with a live heartbeat (busy)"
            else:
                status, silent = "no answer", silent + 1
            self.stdout.write(f"{row.queue}: {status}")
        if silent:
            raise CommandError(
                f"{silent} queue(s) got no answer within {options['timeout']:g} s: is a worker running?"
            )
