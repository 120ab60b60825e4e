"""``/metrics`` for Prometheus: django-prometheus' request counts and latencies per view, and ours.

Ours are read when Prometheus scrapes, from the places that hold the truth, so they are right whichever
machine ran the work and survive restarts: queue lengths from the broker; job durations, jobs by status
and labels in the last hour from the database (one aggregate query per job table and one count: about
five queries per scrape, whatever the number of rows' history); refusals of the live fetcher from this
process's counter. Requests and latencies are counted by the middleware in each web process; with several
gunicorn workers set ``PROMETHEUS_MULTIPROC_DIR`` (docs/deployment.md) so a scrape sums them all.

Who may read it: Prometheus with ``Authorization: Bearer <METRICS_TOKEN>``, or a signed-in researcher
(staff count as researchers). Everyone else gets 404, as if there were no such page.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from annotation.models import Assignment, AssignmentStatus, Export
from browser.fetch import refusal_counts
from browser.fetch.refusals import REASONS
from core.ops import broker
from core.permissions import Role, has_role
from training.models import ProxyEvaluation, SamplingRun, TrainingRun

logger = logging.getLogger(__name__)

# Job durations in seconds: a sampling smoke test takes seconds, a training run hours.
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
LABEL_WINDOW = timedelta(hours=1)


def job_tables() -> Iterator[tuple[QuerySet, str | None, str]]:
    """(rows, the field that splits the kind or None, kind label) for every kind of job row."""
    yield TrainingRun.objects.all(), "kind", "training_"
    yield SamplingRun.objects.all(), None, "sampling"
    yield ProxyEvaluation.objects.all(), None, "proxy_evaluation"
    yield Export.objects.all(), None, "export"


def _job_rows(rows: QuerySet, kind_field: str | None) -> QuerySet:
    """One row per (kind, status): how many jobs, and for those that started and finished (a job
    cancelled while queued never started) the counts of a duration histogram and the durations' sum."""
    timed = Q(finished_at__isnull=False, started_at__isnull=False)
    duration = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    buckets = {
        f"le_{i}": Count("pk", filter=timed & Q(duration__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(DURATION_BUCKETS)
    }
    grouping = [kind_field, "status"] if kind_field else ["status"]
    return (
        rows.annotate(duration=duration)
        .order_by()
        .values(*grouping)
        .annotate(
            jobs=Count("pk"),
            timed=Count("pk", filter=timed),
            seconds=Sum("duration", filter=timed),
            **buckets,
        )
    )


class PlatformCollector(Collector):
    """Our families, computed at each scrape. A source that fails (database, broker) leaves its families
    out and says so in ``webgpt_metrics_source_up``; the scrape itself still answers."""

    def collect(self) -> Iterator:
        up = GaugeMetricFamily(
            "webgpt_metrics_source_up", "Whether a source of these metrics answered.", labels=["source"]
        )
        for source, families in (("database", self._from_database), ("broker", self._from_broker)):
            try:
                collected = list(families())
            except Exception:
                logger.exception("metrics: the %s did not answer", source)
                up.add_metric([source], 0)
                continue
            up.add_metric([source], 1)
            yield from collected
        yield up
        refusals = CounterMetricFamily(
            "webgpt_fetch_refusals",
            "Pages the live fetcher refused, per reason, since this web process started.",
            labels=["reason"],
        )
        counts = refusal_counts()
        for reason in REASONS:
            refusals.add_metric([reason], counts.get(reason, 0))
        yield refusals

    def _from_broker(self) -> Iterator:
        queues = GaugeMetricFamily(
            "webgpt_celery_queue_length", "Messages waiting in a Celery queue.", labels=["queue"]
        )
        for queue, length in broker.queue_lengths().items():
            queues.add_metric([queue], length)
        yield queues

    def _from_database(self) -> Iterator:
        jobs = GaugeMetricFamily("webgpt_jobs", "Job rows by kind and status.", labels=["kind", "status"])
        durations = HistogramMetricFamily(
            "webgpt_job_duration_seconds",
            "Finished jobs, from start to finish, by kind and final status.",
            labels=["kind", "status"],
        )
        for rows, kind_field, kind_label in job_tables():
            for row in _job_rows(rows, kind_field):
                labels = [kind_label + (row[kind_field] if kind_field else ""), row["status"]]
                jobs.add_metric(labels, row["jobs"])
                if row["timed"]:
                    buckets = [
                        (str(float(bound)), row[f"le_{i}"]) for i, bound in enumerate(DURATION_BUCKETS)
                    ]
                    buckets.append(("+Inf", row["timed"]))
                    durations.add_metric(labels, buckets, row["seconds"].total_seconds())
        yield jobs
        yield durations
        since = timezone.now() - LABEL_WINDOW
        judged = Assignment.objects.filter(
            status__in=(AssignmentStatus.SUBMITTED, AssignmentStatus.LATE), submitted_at__gte=since
        )
        yield GaugeMetricFamily(
            "webgpt_labels_last_hour", "Feedback tasks submitted in the last hour.", value=judged.count()
        )


_platform = CollectorRegistry(auto_describe=False)
_platform.register(PlatformCollector())


def may_read(request: HttpRequest) -> bool:
    """Prometheus' bearer token (compared in constant time), or a signed-in researcher."""
    token = settings.METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return True
    return has_role(request.user, Role.RESEARCHER)


@login_not_required
@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not may_read(request):
        raise Http404
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    body = generate_latest(registry) + generate_latest(_platform)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
