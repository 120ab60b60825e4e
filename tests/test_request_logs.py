"""Every request has an id: taken from a proxy's X-Request-ID when it is a short token, else made up; sent
back in the response, and on every log line of the request. Production logs are JSON lines; a Celery
worker's lines carry the task's id."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from core.models import WorkerPing
from core.ops.logs import TEXT_FORMAT, ContextFilter, JsonFormatter
from tests.conftest import ROOT, database_url_for_tests, delete_broker_keys
from tests.test_settings import PRODUCTION, manage


@pytest.fixture
def json_log():
    """The JSON lines every logger writes (through the root logger) during the test."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def test_a_proxys_request_id_comes_back_in_the_response(client):
    response = client.get("/healthz", HTTP_X_REQUEST_ID="lb-7f3a.42")
    assert response["X-Request-ID"] == "lb-7f3a.42"


@pytest.mark.parametrize("given", ["", "has space", "a" * 65, "line\nbreak", '"quoted"', "-leading", "é"])
def test_an_odd_request_id_is_replaced_by_a_fresh_one(client, given):
    response = client.get("/healthz", HTTP_X_REQUEST_ID=given)
    made = response["X-Request-ID"]
    assert made != given
    assert len(made) == 32 and int(made, 16) >= 0


def test_requests_without_an_id_get_different_ones(client):
    assert client.get("/healthz")["X-Request-ID"] != client.get("/healthz")["X-Request-ID"]


@pytest.mark.django_db
def test_every_log_line_of_a_request_carries_its_id_and_the_access_line_its_outcome(client, json_log):
    logging.getLogger("before").info("outside any request")
    client.get("/no-such-page/", HTTP_X_REQUEST_ID="trace-42")
    lines = json_log()
    outside = next(line for line in lines if line["logger"] == "before")
    assert outside["request_id"] is None
    assert {"time", "level", "logger", "message", "request_id", "task_id"} <= set(outside)
    not_found = next(line for line in lines if line["logger"] == "django.request")  # Django's own warning
    assert not_found["request_id"] == "trace-42"
    assert not_found["level"] == "WARNING"
    assert not_found["status_code"] == 404
    access = next(line for line in lines if line["logger"] == "webgpt_site.access")
    assert access["request_id"] == "trace-42"
    assert access["message"] == "GET /no-such-page/ 404"
    assert access["method"] == "GET"
    assert access["path"] == "/no-such-page/"
    assert access["status"] == 404
    assert access["duration_ms"] >= 0
    assert access["level"] == "INFO"


def test_probes_that_succeed_are_logged_at_debug_only(client, json_log):
    client.get("/healthz")
    access = [line for line in json_log() if line["logger"] == "webgpt_site.access"]
    assert [line["level"] for line in access] == ["DEBUG"]


def test_a_path_cannot_forge_a_text_log_line(client):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    access = logging.getLogger("webgpt_site.access")
    access.addHandler(handler)
    try:
        client.get("/healthz%0A2026-01-01 ERROR forged", HTTP_X_REQUEST_ID="abc")
    finally:
        access.removeHandler(handler)
    assert stream.getvalue().count("\n") == 1
    assert "[abc] webgpt_site.access: GET /healthz\\n2026-01-01 ERROR forged 404" in stream.getvalue()


def test_production_logs_are_json_and_development_logs_text(tmp_path):
    script = "import logging; logging.getLogger('webgpt_site.demo').warning('hello %s', 'there')"
    production = manage(tmp_path, "shell", "-c", script, **PRODUCTION, LOG_FORMAT="")  # the default
    assert production.returncode == 0, production.stderr
    line = json.loads(production.stderr.strip().splitlines()[-1])
    assert line["message"] == "hello there"
    assert line["logger"] == "webgpt_site.demo"
    assert line["level"] == "WARNING"
    development = manage(tmp_path, "shell", "-c", script, DEBUG="1", LOG_FORMAT="")
    assert development.stderr.strip().endswith("WARNING [-] webgpt_site.demo: hello there")
    chosen = manage(tmp_path, "shell", "-c", script, DEBUG="1", LOG_FORMAT="json")
    assert json.loads(chosen.stderr.strip().splitlines()[-1])["message"] == "hello there"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT: expected json or text"),
        ({"METRICS_TOKEN": "short"}, "METRICS_TOKEN: must be at least 32 characters"),
    ],
)
def test_bad_operations_settings_stop_start_up(tmp_path, env, message):
    result = manage(tmp_path, "check", DEBUG="1", **env)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_workers_log_lines_are_json_with_the_task_id_and_the_id_of_the_request_that_queued_it(
    broker_namespace, client_for, alice
):
    """A real worker, as deployed: JSON lines on its output, the task's own lines with its id and with the
    id of the request that queued it (a researcher's "check workers" on the console), so one grep for a
    request id follows it onto the worker."""
    env = {
        **os.environ,
        "DEBUG": "1",
        "LOG_FORMAT": "json",
        "DATABASE_URL": database_url_for_tests(),
        "CELERY_BROKER_KEY_PREFIX": django_settings.CELERY_BROKER_KEY_PREFIX,
    }
    command = [sys.executable, "-m", "celery", "-A", "webgpt_site", "worker", "-Q", "default",
               "--pool", "solo", "--without-gossip", "--without-mingle", "--loglevel", "INFO"]  # fmt: skip
    response = client_for(alice).post(reverse("console:check_workers"), HTTP_X_REQUEST_ID="trace-ping-7")
    assert response.status_code == 302
    ping = WorkerPing.objects.get(queue="default")
    worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not WorkerPing.objects.filter(
            pk=ping.pk, answered_at__isnull=False
        ):
            assert worker.poll() is None, worker.stdout.read().decode()
            time.sleep(0.2)
    finally:
        worker.terminate()
        output, _ = worker.communicate(timeout=30)
        delete_broker_keys(broker_namespace)  # the other queues' pings
    lines = [json.loads(line) for line in output.decode().splitlines() if line.startswith("{")]
    succeeded = [line for line in lines if "succeeded" in line["message"]]
    assert succeeded, output.decode()
    assert succeeded[0]["task_id"] and succeeded[0]["task_id"] in succeeded[0]["message"]
    assert succeeded[0]["logger"] == "celery.app.trace"
    assert succeeded[0]["request_id"] == "trace-ping-7"
    # Outside the task (the worker's own start-up lines) no request id is claimed.
    assert all(line["request_id"] is None for line in lines if line["task_id"] is None)


def test_a_task_queued_outside_a_request_carries_no_request_id_and_text_logs_show_both_ids():
    from core.ops.logs import _pass_request_id, current_request_id, current_task_id

    headers: dict = {}
    _pass_request_id(headers=headers)
    assert headers == {}
    token = current_request_id.set("trace-9")
    task_token = current_task_id.set("task-3")
    try:
        _pass_request_id(headers=headers)
        record = logging.LogRecord("x", logging.INFO, "", 0, "hello", None, None)
        ContextFilter().filter(record)
    finally:
        current_request_id.reset(token)
        current_task_id.reset(task_token)
    assert headers == {"request_id": "trace-9"}
    assert logging.Formatter(TEXT_FORMAT).format(record).endswith("INFO [trace-9 task-3] x: hello")
