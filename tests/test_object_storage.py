"""Exports (and corpus uploads) in object storage, against a real S3 API on 127.0.0.1 (moto's server:
tests/object_storage.py): a job on a real Celery worker publishes to the bucket, researchers download
through the permission check and a short-lived presigned URL with the recorded sha256, an upload cut after
some parts publishes nothing, a deleted object is a 404, a large file streams in constant memory, readers
get checked copies, and bad settings stop start-up."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import tracemalloc
import urllib.request
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError, EndpointConnectionError
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.exports import service as exports
from annotation.models import Export, ExportStatus
from browser.import_jobs import run_corpus_import_job, staging_dir
from browser.models import CorpusImport
from core.jobs.sweeper import sweep
from core.storage import EXPORTS, MODELS, check_reachable, get_storage
from core.storage_cache import MANIFEST
from core.storage_config import produced_file_storages
from tests.conftest import database_url_for_tests, running_worker
from tests.test_corpus_import_jobs import PAGES, a_zip, upload
from tests.test_exports import judged_pair

MB = 1024 * 1024


def fetch(url: str) -> tuple[bytes, dict[str, str]]:
    """What a browser gets from a presigned URL: the object's bytes and the response's headers."""
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (the test's own server)
        return response.read(), dict(response.headers)


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def download_urls(export: Export) -> list[str]:
    return [reverse("console:export_download", args=[export.pk]), f"/api/exports/{export.pk}/download"]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_publishes_the_export_to_the_bucket_and_researchers_download_it_by_presigned_url(
    settings, tmp_path, django_user_model, client_for, alice, charlie, bucket, broker_namespace
):
    judged_pair(django_user_model)
    for file_type in ("jsonl", "parquet"):
        body = {"format": "webgpt-comparisons", "file_type": file_type}
        assert api_for(alice).post("/api/exports", body, format="json").status_code == 202
    worker_machine = tmp_path / "worker"  # another machine: its own var/ and cache
    env = bucket.env | {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(worker_machine),
        "STORAGE_CACHE_DIR": str(worker_machine / "cache"),
        "SECRET_KEY": django_settings.SECRET_KEY,
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "PATH": "/usr/bin:/bin",
    }
    with running_worker(env, queues="exports"):
        deadline = time.monotonic() + 120
        waiting = Export.objects.filter(status__in=(ExportStatus.QUEUED, ExportStatus.RUNNING))
        while time.monotonic() < deadline and waiting.exists():
            time.sleep(0.2)
    done = list(Export.objects.order_by("pk"))
    assert [(e.status, e.error) for e in done] == [(ExportStatus.DONE, "")] * 2
    assert bucket.keys() == sorted(f"exports/{e.file_name}" for e in done)
    assert not (worker_machine / "media" / "exports").exists()  # nothing published on the worker's disk
    assert not any((worker_machine / "cache" / "scratch" / "exports").iterdir())  # its temporary files: gone

    for export in done:
        for url, client in zip(download_urls(export), (client_for(alice), api_for(alice)), strict=True):
            response = client.get(url)
            assert response.status_code == 302, url
            assert response["Cache-Control"] == "private, no-store"
            location = urlsplit(response["Location"])
            assert f"{location.scheme}://{location.netloc}" == bucket.url
            assert location.path == f"/{bucket.name}/webgpt/exports/{export.file_name}"
            query = parse_qs(location.query)
            assert query["X-Amz-Expires"] == ["300"] and query["X-Amz-Signature"]
            body, headers = fetch(response["Location"])
            assert hashlib.sha256(body).hexdigest() == export.sha256, url
            assert headers["Content-Disposition"] == f'attachment; filename="{export.file_name}"'
        # The permission check comes first: an outsider learns nothing, not even a URL.
        for url in download_urls(export):
            outsider = api_for(charlie) if url.startswith("/api") else client_for(charlie)
            assert outsider.get(url).status_code == 404


def big_rows(count: int):
    """Rows of about 4 KB: ``count`` of them make a file of ``count * 4 KB``."""
    return lambda filters: ({"n": n, "text": "x" * 4000} for n in range(count))


@pytest.mark.django_db
def test_an_upload_cut_after_some_parts_publishes_nothing_and_fails_the_row(alice, bucket, monkeypatch):
    monkeypatch.setitem(exports.ROWS, "webgpt-comparisons", big_rows(5000))  # ~20 MB: three parts
    real_call = BaseClient._make_api_call
    parts: list[int] = []

    def network_cut_after_the_first_part(client, operation, params):
        if operation == "UploadPart":
            parts.append(params["PartNumber"])
            if len(parts) > 1:
                raise EndpointConnectionError(endpoint_url=bucket.url)
        return real_call(client, operation, params)

    with monkeypatch.context() as patched, pytest.raises(EndpointConnectionError):
        patched.setattr(BaseClient, "_make_api_call", network_cut_after_the_first_part)
        exports.export_now(alice, "webgpt-comparisons", {})

    export = Export.objects.get()
    assert export.status == ExportStatus.FAILED and "Could not connect" in export.error
    assert not export.sha256 and not export.file_name
    assert len(parts) >= 2  # it failed mid-upload, after a part went through
    assert bucket.keys() == [] and bucket.unfinished_uploads() == []  # no object; the upload was aborted
    assert list(exports.export_dir().iterdir()) == []  # nor the temporary file on the worker


@pytest.mark.django_db
def test_the_sweep_aborts_the_unfinished_upload_of_an_export_whose_worker_died(alice, bucket, settings):
    """A worker killed mid-upload leaves an unfinished multipart upload (its parts stored, and billed,
    though nobody can read them): the sweep that fails the export aborts it, and only its."""
    long_ago = timezone.now() - timedelta(seconds=settings.JOB_HEARTBEAT_TIMEOUT + 60)
    export = Export.objects.create(
        owner=alice, export_format="rm_pairs", status=ExportStatus.RUNNING, started_at=long_ago,
        heartbeat_at=long_ago,
    )  # fmt: skip
    for export_id in (export.pk, int(f"{export.pk}1")):  # export 11's name starts with "export-1"
        bucket.client.create_multipart_upload(
            Bucket=bucket.name, Key=f"webgpt/exports/export-{export_id}-rm_pairs.jsonl"
        )
    assert sweep().failed == {"export": [export.pk]}
    assert bucket.unfinished_uploads() == [f"webgpt/exports/export-{export.pk}1-rm_pairs.jsonl"]
    with pytest.raises(ValueError, match="a prefix is required"):
        get_storage(EXPORTS).abort_uploads("/")


@pytest.mark.django_db
def test_an_object_deleted_from_the_bucket_is_a_404_that_says_so_on_the_page_and_the_api(
    django_user_model, client_for, alice, bucket
):
    judged_pair(django_user_model)
    export = exports.export_now(alice, "webgpt-comparisons", {})
    assert client_for(alice).get(download_urls(export)[0]).status_code == 302
    bucket.client.delete_object(Bucket=bucket.name, Key=f"webgpt/exports/{export.file_name}")
    page = client_for(alice).get(download_urls(export)[0])
    assert page.status_code == 404 and "no longer on the server" in page.content.decode()
    api = api_for(alice).get(download_urls(export)[1])
    assert api.status_code == 404 and "no longer on the server" in api.json()["detail"]


@pytest.mark.django_db
def test_a_large_file_goes_up_in_parts_and_comes_down_in_constant_memory(bucket):
    storage = get_storage(EXPORTS)
    size = 32 * MB  # above the 8 MB multipart threshold: four parts
    big = storage.scratch_dir() / "big.part"
    with big.open("wb") as out:
        for _ in range(size // MB):
            out.write(os.urandom(MB))
    digest = hashlib.sha256(big.read_bytes()).hexdigest()
    storage.client.list_buckets()  # the client is made before measuring: only the transfer counts

    tracemalloc.start()
    try:
        storage.publish_file("big.jsonl", big)
        uploaded = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        copy = storage.cached_file("big.jsonl", digest)
        downloaded = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert uploaded < size / 3 and downloaded < size / 3, (uploaded / MB, downloaded / MB)
    head = bucket.client.head_object(Bucket=bucket.name, Key="webgpt/exports/big.jsonl")
    assert head["ContentLength"] == size and head["ETag"].endswith('-4"')  # a multipart object of 4 parts
    assert not big.exists() and copy.name == f"{digest}.jsonl" and copy.stat().st_size == size


@pytest.mark.django_db
def test_a_reader_gets_a_copy_checked_against_the_sha256_and_downloads_it_once(
    django_user_model, alice, bucket, monkeypatch
):
    judged_pair(django_user_model)
    export = exports.export_now(alice, "rm-pairs", {})
    copy = exports.export_path(export)  # what a training worker reads
    assert copy.parent == bucket.cache / "exports" and copy.name == f"{export.sha256}.jsonl"
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == export.sha256
    with monkeypatch.context() as patched:
        patched.setattr(type(get_storage(EXPORTS)), "_fetch", lambda *args: pytest.fail("downloaded twice"))
        assert exports.export_path(export) == copy

    copy.unlink()  # a fresh cache, and an object someone replaced in the bucket since
    key = f"webgpt/exports/{export.file_name}"
    bucket.client.put_object(Bucket=bucket.name, Key=key, Body=b'{"tampered": true}\n')
    with pytest.raises(ValueError, match="recorded sha256"):
        exports.export_path(export)
    assert list((bucket.cache / "exports").iterdir()) == []  # nothing unchecked is kept


@pytest.mark.django_db
def test_two_workers_downloading_one_model_folder_at_once_both_get_the_complete_copy(bucket, tmp_path):
    storage = get_storage(MODELS)
    folder = tmp_path / "run-7"
    (folder / "tokenizer").mkdir(parents=True)
    (folder / "config.json").write_text('{"layers": 2}')
    (folder / "model.safetensors").write_bytes(os.urandom(MB))
    (folder / "tokenizer" / "vocab.txt").write_text("a\nb\n")
    expected = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert storage.publish_folder("run-7", folder) == f"s3://{bucket.name}/webgpt/models/run-7"
    assert not folder.exists()
    assert bucket.keys("models/") == sorted(f"models/run-7/{name}" for name in [*expected, MANIFEST])

    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(storage.local_folder("run-7"))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0] == results[1]
    copy = results[0]
    got = {p.relative_to(copy).as_posix(): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert {name: got[name] for name in expected} == expected
    assert [p.name for p in (bucket.cache / "models").iterdir()] == [copy.name]  # no temporary copy left

    storage.delete_folder("run-7")
    assert bucket.keys() == []
    with pytest.raises(FileNotFoundError, match="no complete folder"):
        storage.local_folder("run-8")


@pytest.mark.django_db
def test_a_folder_upload_that_fails_midway_leaves_no_object(bucket, tmp_path, monkeypatch):
    folder = tmp_path / "run-9"
    folder.mkdir()
    for name in ("a.json", "b.json", "c.json"):
        (folder / name).write_text(name)
    real_call = BaseClient._make_api_call
    puts: list[str] = []

    def failing_second_put(client, operation, params):
        if operation == "PutObject":
            puts.append(params["Key"])
            if len(puts) == 2:
                raise EndpointConnectionError(endpoint_url=bucket.url)
        return real_call(client, operation, params)

    with monkeypatch.context() as patched, pytest.raises(EndpointConnectionError):
        patched.setattr(BaseClient, "_make_api_call", failing_second_put)
        get_storage(MODELS).publish_folder("run-9", folder)
    assert len(puts) == 2 and bucket.keys() == []


def storages_from(monkeypatch, **env: str) -> dict:
    for name in [n for n in os.environ if n.startswith(("S3_", "STORAGE_"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return produced_file_storages()


def test_storage_settings_default_to_local_folders_and_reject_bad_values(monkeypatch, tmp_path):
    local = storages_from(monkeypatch)
    assert {alias: entry["BACKEND"] for alias, entry in local.items()} == dict.fromkeys(
        ("exports", "models", "imports"), "core.storage.LocalStorage"
    )
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    s3 = storages_from(
        monkeypatch,
        STORAGE_BACKEND="s3",
        S3_BUCKET="feedback-data",
        S3_PREFIX="/prod/webgpt/",
        S3_ACCESS_KEY_ID="AKIDEXAMPLE",
        S3_SECRET_ACCESS_KEY_FILE=str(secret),
    )
    options = s3["models"]["OPTIONS"]
    assert (options["location"], options["secret_key"], options["default_acl"]) == (
        "prod/webgpt/models",
        "from-a-file",
        None,
    )
    assert options["querystring_auth"] and options["querystring_expire"] == 300
    assert options["endpoint_url"] is None and options["addressing_style"] == "virtual"

    s3_env = {"STORAGE_BACKEND": "s3", "S3_BUCKET": "feedback-data"}
    for bad, named in [
        ({"STORAGE_BACKEND": "gcs"}, "STORAGE_BACKEND"),
        ({"STORAGE_BACKEND": "s3"}, "S3_BUCKET"),
        (s3_env | {"S3_BUCKET": "Feedback_Data"}, "S3_BUCKET"),
        (s3_env | {"S3_ENDPOINT_URL": "minio:9000"}, "S3_ENDPOINT_URL"),
        (s3_env | {"S3_ACCESS_KEY_ID": "AKIDEXAMPLE"}, "S3_SECRET_ACCESS_KEY"),
        (s3_env | {"S3_URL_EXPIRE_SECONDS": "604801"}, "S3_URL_EXPIRE_SECONDS"),
        (s3_env | {"S3_URL_EXPIRE_SECONDS": "soon"}, "S3_URL_EXPIRE_SECONDS"),
        (s3_env | {"S3_PREFIX": "a/../b"}, "S3_PREFIX"),
        (s3_env | {"S3_REGION": "EU West"}, "S3_REGION"),
        (s3_env | {"S3_SECRET_ACCESS_KEY_FILE": str(tmp_path / "missing")}, "S3_SECRET_ACCESS_KEY_FILE"),
    ]:
        with pytest.raises(ImproperlyConfigured, match=named):
            storages_from(monkeypatch, **bad)


def test_the_readiness_check_reaches_the_bucket(bucket, settings, monkeypatch):
    check_reachable()
    monkeypatch.setenv("S3_BUCKET", "no-such-bucket")
    settings.STORAGES = settings.STORAGES | produced_file_storages()
    with pytest.raises(ClientError):
        check_reachable()


@pytest.mark.django_db
def test_a_corpus_upload_waits_in_the_bucket_for_its_import_job_and_is_removed_after(
    settings, tmp_path, client_for, alice, bucket
):
    settings.MEDIA_ROOT = tmp_path / "media"
    web = client_for(alice)
    for name, data in (("pages.jsonl", PAGES), ("pages.zip", a_zip({"a.html": b"<p>alpha</p>"}))):
        fields = {"corpus": "mine", "file": upload(name, data), "base_url": "https://example.org/"}
        response = web.post(reverse("console:corpora"), fields)
        assert response.status_code == 302
        job = CorpusImport.objects.latest("pk")
        assert bucket.keys() == [f"corpus-imports/{job.upload}"]  # where a worker on another machine finds it
        job = run_corpus_import_job(job.pk)
        assert (job.status, job.error) == ("done", "")
        assert bucket.keys() == [] and list(staging_dir().iterdir()) == []  # the object and the copies: gone
    assert not (tmp_path / "media" / "corpus-imports").exists()


@pytest.mark.django_db
def test_a_model_trained_before_the_switch_to_a_bucket_is_read_where_it_is(bucket, tmp_path):
    from training.checkpoints import local_folder
    from training.models import ModelCheckpoint

    folder = tmp_path / "models" / "runs" / "run-5"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    earlier = ModelCheckpoint.objects.create(
        kind="rm", name="rm-run-5", path=str(folder), storage_name="run-5"
    )
    assert local_folder(earlier) == folder  # the bucket has no run-5: its folder on this machine
    earlier.path = str(tmp_path / "elsewhere")
    with pytest.raises(FileNotFoundError, match="no complete folder"):
        local_folder(earlier)
