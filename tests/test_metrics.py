"""Prometheus reads /metrics: request counts and latencies per view, queue lengths, job durations, labels in
the last hour and the fetcher's refusals. Researchers and the holder of METRICS_TOKEN may read it; to anyone
else the page does not exist."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
import redis
import requests
from django.conf import settings as django_settings
from django.utils import timezone
from kombu import Connection
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import Assignment, AssignmentStatus, Export
from annotation.questions.service import import_questions
from browser.fetch import refusal_counts
from browser.fetch.refusals import record_refusal
from core.embedded_broker import Transport
from tests.conftest import database_url_for_tests, delete_broker_keys, start_gunicorn
from tests.test_embedded_broker import broker_folder
from training.models import SamplingRun, TrainingRun
from webgpt_site.celery import app

pytestmark = pytest.mark.django_db

TOKEN = "prometheus-" + "x" * 40


@pytest.fixture
def prometheus(settings, client):
    """A client that sends the bearer token, as Prometheus does with ``authorization: credentials``."""
    settings.METRICS_TOKEN = TOKEN
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {TOKEN}"
    return client


def samples(response) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of an exposition."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_outsiders_labelers_and_wrong_tokens_get_404(client_for, settings, bob, charlie):
    settings.METRICS_TOKEN = TOKEN
    for user in (None, charlie, bob):
        assert client_for(user).get("/metrics").status_code == 404
    anonymous = client_for(None)
    for header in (f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer "):
        assert anonymous.get("/metrics", HTTP_AUTHORIZATION=header).status_code == 404


def test_without_a_configured_token_no_bearer_is_accepted(client, settings):
    settings.METRICS_TOKEN = None
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer None").status_code == 404


def test_researchers_and_prometheus_read_every_family(client_for, alice, prometheus):
    client_for(None).get("/healthz")  # a request to count
    for reader in (prometheus, client_for(alice)):
        response = reader.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain")
        assert "no-store" in response["Cache-Control"]
        text = response.content.decode()
        for name in (
            "django_http_requests_total_by_view_transport_method_total",
            "django_http_requests_latency_seconds_by_view_method_bucket",
            "webgpt_celery_queue_length",
            "webgpt_job_duration_seconds",
            "webgpt_jobs",
            "webgpt_labels_last_hour",
            "webgpt_fetch_refusals_total",
            "webgpt_metrics_source_up",
        ):
            assert name in text, name
        assert 'view="healthz"' in text


def test_job_durations_are_a_histogram_by_kind_and_final_status(prometheus, alice):
    now = timezone.now()
    export = Export.objects.create(
        export_format="rm-pairs", status="done", started_at=now - timedelta(seconds=20), finished_at=now
    )
    for seconds in (90, 4000):
        TrainingRun.objects.create(
            kind="rm",
            export=export,
            owner=alice,
            status="done",
            started_at=now - timedelta(seconds=seconds),
            finished_at=now,
        )
    TrainingRun.objects.create(kind="bc", export=export, owner=alice)  # queued: counted, not timed
    SamplingRun.objects.create(owner=alice, policy_name="tiny", n=1, episodes_total=1, status="running")
    got = samples(prometheus.get("/metrics"))
    rm = (("kind", "training_rm"), ("status", "done"))
    assert got[("webgpt_job_duration_seconds_bucket", (*rm[:1], ("le", "60.0"), rm[1]))] == 0
    assert got[("webgpt_job_duration_seconds_bucket", (*rm[:1], ("le", "120.0"), rm[1]))] == 1
    assert got[("webgpt_job_duration_seconds_bucket", (*rm[:1], ("le", "7200.0"), rm[1]))] == 2
    assert got[("webgpt_job_duration_seconds_bucket", (*rm[:1], ("le", "+Inf"), rm[1]))] == 2
    assert got[("webgpt_job_duration_seconds_count", rm)] == 2
    assert got[("webgpt_job_duration_seconds_sum", rm)] == pytest.approx(4090)
    assert got[("webgpt_job_duration_seconds_count", (("kind", "export"), ("status", "done")))] == 1
    assert got[("webgpt_jobs", rm)] == 2
    assert got[("webgpt_jobs", (("kind", "training_bc"), ("status", "queued")))] == 1
    assert got[("webgpt_jobs", (("kind", "sampling"), ("status", "running")))] == 1
    assert ("webgpt_job_duration_seconds_count", (("kind", "training_bc"), ("status", "queued"))) not in got


def test_labels_last_hour_counts_submitted_judgements_of_the_last_hour(prometheus, alice, bob):
    rows = [
        {"question": f"Question {n}?", "answer": f"Answer {n}.", "quotes": [], "source": {"model": "m"}}
        for n in range(4)
    ]
    import_questions(
        "\n".join(json.dumps({"question": row["question"]}) for row in rows).encode(), filename="q.jsonl"
    )
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    batch = create_feedback_batch(
        alice, BatchSettings("rated", "rating", "gophercite"), group_answers(answers, "rating")
    )
    now = timezone.now()
    for item, (status, minutes_ago) in zip(
        batch.items.order_by("id"),
        [("submitted", 5), ("late", 50), ("submitted", 90), ("skipped", 5)],
        strict=True,
    ):
        Assignment.objects.create(
            item=item,
            labeler=bob,
            order=list(item.answers.values_list("id", flat=True)),
            status=status,
            submitted_at=now - timedelta(minutes=minutes_ago) if status != "skipped" else None,
            leased_until=now,
        )
    assert Assignment.objects.filter(status=AssignmentStatus.SUBMITTED).count() == 2
    assert samples(prometheus.get("/metrics"))[("webgpt_labels_last_hour", ())] == 2


def test_queue_lengths_are_read_under_the_brokers_key_prefix(prometheus, broker_namespace):
    assert django_settings.CELERY_BROKER_URL.startswith("redis://"), "make test runs against Redis"
    try:
        for _ in range(3):
            app.send_task("webgpt_site.ping", kwargs={"ping_id": 0}, queue="exports")
        raw = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
        assert raw.llen(f"{broker_namespace}exports") == 3  # the prefix is really there, in Redis
        got = samples(prometheus.get("/metrics"))
        assert got[("webgpt_celery_queue_length", (("queue", "exports"),))] == 3
        assert got[("webgpt_celery_queue_length", (("queue", "training"),))] == 0
        assert got[("webgpt_metrics_source_up", (("source", "broker"),))] == 1
    finally:
        delete_broker_keys(broker_namespace)


def test_queue_lengths_on_the_embedded_broker_count_its_message_files(prometheus, settings, tmp_path):
    options = broker_folder(tmp_path)
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = options
    with Connection("filesystem://", transport=Transport, transport_options=options) as conn:
        queue = conn.SimpleQueue("sampling")
        queue.put({"n": 1})
        queue.put({"n": 2})
        queue.close()
    got = samples(prometheus.get("/metrics"))
    assert got[("webgpt_celery_queue_length", (("queue", "sampling"),))] == 2
    assert got[("webgpt_celery_queue_length", (("queue", "default"),))] == 0


def test_a_broker_that_is_down_leaves_its_family_out_and_the_rest_answers(prometheus, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = prometheus.get("/metrics")
    assert response.status_code == 200
    got = samples(response)
    assert got[("webgpt_metrics_source_up", (("source", "broker"),))] == 0
    assert got[("webgpt_metrics_source_up", (("source", "database"),))] == 1
    assert "webgpt_celery_queue_length" not in response.content.decode()


def test_fetcher_refusals_are_counted_per_reason(prometheus):
    record_refusal("address_not_allowed")
    got = samples(prometheus.get("/metrics"))
    expected = refusal_counts()["address_not_allowed"]
    assert got[("webgpt_fetch_refusals_total", (("reason", "address_not_allowed"),))] == expected >= 1
    assert ("webgpt_fetch_refusals_total", (("reason", "robots_disallowed"),)) in got


def test_a_scrape_costs_five_queries_however_many_jobs_there_are(
    prometheus, alice, django_assert_num_queries
):
    export = Export.objects.create(export_format="rm-pairs")
    now = timezone.now()
    TrainingRun.objects.bulk_create(
        TrainingRun(kind="rm", export=export, status="done", started_at=now, finished_at=now)
        for _ in range(50)
    )
    with django_assert_num_queries(5):  # four job tables, one count of judgements
        assert prometheus.get("/metrics").status_code == 200


def test_odd_request_methods_do_not_add_series(client, prometheus):
    assert client.generic("BREW", "/healthz").status_code == 405
    text = prometheus.get("/metrics").content.decode()
    assert 'method="BREW"' not in text
    assert 'method="<invalid method>"' in text


@pytest.mark.worker  # a server of its own: with the other tests that start processes (tests/conftest.py)
def test_with_several_gunicorn_workers_a_scrape_sums_them_all(tmp_path):
    """docs/deployment.md: gunicorn with two workers and PROMETHEUS_MULTIPROC_DIR (an empty folder): each
    worker writes its counts to its own file there, and a scrape, whichever worker answers it, reports the
    requests both served. Requests are sent eight at a time until each worker has served some."""
    folder = tmp_path / "prometheus"
    folder.mkdir()
    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "CELERY_BROKER_KEY_PREFIX": django_settings.CELERY_BROKER_KEY_PREFIX,
        "VAR_DIR": str(tmp_path),
        "METRICS_TOKEN": TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "PATH": os.environ["PATH"],
    }
    server, base = start_gunicorn("-w", "2", env=env)
    answered = 0  # /healthz requests that reached a worker
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answered += requests.get(base + "/healthz", timeout=10).status_code == 200
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
        children = Path("/proc") / str(server.pid) / "task" / str(server.pid) / "children"
        while len(workers := children.read_text().split()) < 2:
            assert time.monotonic() < deadline, f"gunicorn started {len(workers)} worker(s)"
            time.sleep(0.1)
        scrape = {"Authorization": f"Bearer {TOKEN}"}
        with ThreadPoolExecutor(8) as pool:
            while not all(_served(folder, pid, "healthz") for pid in workers):
                assert time.monotonic() < deadline, {pid: _served(folder, pid, "healthz") for pid in workers}
                sent = pool.map(lambda _: requests.get(base + "/healthz", timeout=10).status_code, range(16))
                answered += sum(status == 200 for status in sent)
            scrapes = list(
                pool.map(lambda _: requests.get(base + "/metrics", headers=scrape, timeout=10), range(8))
            )
        by_worker = {pid: _served(folder, pid, "healthz") for pid in workers}
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert all(by_worker.values()) and sum(by_worker.values()) == answered, (by_worker, answered)
    family = "django_http_requests_total_by_view_transport_method_total"
    labels = (("method", "GET"), ("transport", "http"), ("view", "healthz"))
    latency = "django_http_requests_latency_seconds_by_view_method_count"
    for scrape in scrapes:  # each one counts both workers' requests, not its own worker's share
        assert scrape.status_code == 200
        got = samples(scrape)
        assert got[(family, labels)] == answered, (got[(family, labels)], by_worker)
        assert got[(latency, (("method", "GET"), ("view", "healthz")))] == answered
        assert got[("webgpt_metrics_source_up", (("source", "database"),))] == 1
    assert all(_served(folder, pid, "metrics") for pid in workers), "both workers answered scrapes"


def _served(folder: Path, pid: str, view: str) -> float:
    """How many GET requests to ``view`` one worker counted, read from its own file in the shared folder."""
    files = [str(path) for path in folder.glob(f"counter_{pid}.db")]
    family = "django_http_requests_total_by_view_transport_method"
    return sum(
        sample.value
        for metric in MultiProcessCollector.merge(files, accumulate=True)
        if metric.name == family
        for sample in metric.samples
        if sample.labels.get("view") == view and sample.labels.get("method") == "GET"
    )
