"""``manage.py sweep_jobs``: one sweep now (every worker also sweeps on its own:
core/jobs/sweeper.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from core.jobs.sweeper import sweep


class Command(BaseCommand):
    help = (
        "Fail jobs whose worker stopped (no heartbeat; training runs whose settings allow it are queued "
        "again to continue from their checkpoint) and send again queued jobs whose message was lost."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = sweep()
        for kind, ids in report.failed.items():
            self.stdout.write(f"failed {len(ids)} {kind}(s) whose worker stopped: {ids}")
        for kind, ids in report.resumed.items():
            self.stdout.write(f"queued again {len(ids)} {kind}(s) to continue from their checkpoint: {ids}")
        for kind, ids in report.requeued.items():
            self.stdout.write(f"sent again {len(ids)} queued {kind}(s) whose message was lost: {ids}")
        if not report.failed and not report.requeued and not report.resumed:
            self.stdout.write("nothing to sweep")
