"""Load balancers ask /healthz whether the process answers and /readyz whether it can work: database, broker
and storage. Both are anonymous, never cached, never a 500, and a failure names the part and no secret."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.utils import ConnectionHandler

from tests.test_settings import PRODUCTION, manage
from webgpt_site.ops import health

SECRET = "s3cret-pw"


def test_healthz_answers_anyone_without_touching_the_database(client):
    # No django_db mark: pytest-django makes any database access in this test an error.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-store" in response["Cache-Control"]
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code == 405


@pytest.mark.django_db
def test_readyz_is_ready_with_each_checks_result_and_time(client, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.MODEL_STORE_DIR = tmp_path / "models"
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    assert body["failed"] == []
    assert list(body["checks"]) == ["database", "broker", "storage"]
    assert all(check["ok"] and check["ms"] >= 0 for check in body["checks"].values())
    assert "no-store" in response["Cache-Control"]
    left = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert not left, "the storage probe leaves no file behind (the storages' folders it may create)"


@pytest.mark.django_db
def test_readyz_is_503_naming_the_broker_when_redis_is_unreachable(client, settings):
    settings.CELERY_BROKER_URL = f"redis://:{SECRET}@127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["failed"] == ["broker"]
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is False
    text = response.content.decode()
    assert SECRET not in text
    assert "127.0.0.1" not in text
    assert "redis://" not in text


@pytest.mark.django_db
def test_readyz_is_503_naming_the_database_when_it_is_unreachable(client, monkeypatch):
    """A connection like the app's, to a port where no PostgreSQL listens, stands in for the real one."""
    if connection.vendor != "postgresql":
        pytest.skip("needs a database server to be away from")
    handler = ConnectionHandler({"default": {**connection.settings_dict, "PORT": "1", "PASSWORD": SECRET}})
    monkeypatch.setattr(health, "connection", handler["default"])
    try:
        response = client.get("/readyz")
    finally:
        handler.close_all()
    assert response.status_code == 503
    body = response.json()
    assert body["failed"] == ["database"]
    assert body["checks"]["database"]["error"] == "OperationalError"
    assert SECRET not in response.content.decode()


@pytest.mark.django_db
def test_readyz_checks_the_embedded_brokers_folder(client, settings, tmp_path):
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    settings.CELERY_BROKER_FOLDER = tmp_path / "celery-broker"
    assert client.get("/readyz").json()["failed"] == ["broker"]
    (tmp_path / "celery-broker").mkdir()
    assert client.get("/readyz").status_code == 200


@pytest.mark.django_db
def test_readyz_is_503_naming_storage_when_the_model_store_cannot_be_written(client, settings, tmp_path):
    in_the_way = tmp_path / "models"
    in_the_way.write_text("a file where the model store's folder should be")
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.MODEL_STORE_DIR = in_the_way
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failed"] == ["storage"]
    assert str(tmp_path) not in response.content.decode()


@pytest.mark.django_db
def test_readyz_answers_503_not_500_whatever_a_check_raises(client, monkeypatch):
    def broken() -> None:
        raise RuntimeError("something nobody planned for")

    monkeypatch.setitem(health.CHECKS, "storage", broken)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["storage"] == {
        "ok": False,
        "error": "RuntimeError",
        "ms": response.json()["checks"]["storage"]["ms"],
    }


def test_in_production_the_probes_answer_plain_http_while_pages_redirect_to_https(tmp_path):
    """Load balancers call the web process over plain HTTP on the private network."""
    script = (
        "from django.test import Client; c = Client(HTTP_HOST='feedback.example.org'); "
        "print(c.get('/healthz').status_code, c.get('/accounts/login/').status_code)"
    )
    result = manage(tmp_path, "shell", "-c", script, **PRODUCTION, LOG_FORMAT="")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == ["200", "301"]
    # Production logs are JSON lines: the access line of each request, with its id.
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "webgpt_site.access"]
    assert [line["path"] for line in access] == ["/accounts/login/"]  # a probe's 200 is logged at DEBUG
    assert access[0]["status"] == 301
    assert access[0]["request_id"]
