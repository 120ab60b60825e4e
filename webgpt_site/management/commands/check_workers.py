"""``manage.py check_workers``: ping every Celery queue and wait for the answers (a deploy health check)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webgpt_site.models import WorkerPing
from webgpt_site.workers import request_pings


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
        for row in WorkerPing.objects.filter(pk__in=[p.pk for p in pings]).order_by("id"):
            status = f"answered by {row.worker_hostname}" if row.answered_at else "no answer"
            self.stdout.write(f"{row.queue}: {status}")
        if pending:
            raise CommandError(
                f"{len(pending)} queue(s) got no answer within {options['timeout']:g} s: is a worker running?"
            )
