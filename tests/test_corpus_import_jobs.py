"""Corpus imports from the console and the API as jobs: one check of what may be asked (form and API alike;
a refused request creates nothing), the job running the command's importer, progress a poller sees while
the job runs, a bad file leaving the index as it was, and a real worker on the exports queue."""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connections
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from browser import import_jobs
from browser.import_jobs import run_corpus_import_job, staging_dir
from browser.models import Corpus, CorpusImport, ImportStatus
from browser.services import backend_for, import_corpus
from core.jobs.heartbeat import WORKER_STOPPED
from core.models import AuditEntry
from tests.conftest import ROOT, database_url_for_tests, running_worker

pytestmark = pytest.mark.django_db

FRESHWIKI = ROOT / "data" / "corpus" / "freshwiki" / "json"
PAGES = (
    b'{"url": "https://example.org/alpha", "title": "Alpha", "text": "alpha bravo charlie"}\n'
    b'{"url": "https://example.org/delta", "title": "Delta", "html": "<p>delta echo foxtrot</p>"}\n'
)


@pytest.fixture(autouse=True)
def media_in_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def a_zip(members: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16  # a symbolic link, as `zip --symlinks` stores one
            archive.writestr(info, "/etc/passwd")
    return out.getvalue()


def upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def post_form(client, **fields):
    return client.post(reverse("console:corpora"), fields)


def post_api(alice, **fields):
    api = APIClient()
    api.force_authenticate(alice)
    return api.post("/api/corpora/imports", fields, format="multipart")


def nothing_was_created() -> bool:
    return (
        not Corpus.objects.exists() and not CorpusImport.objects.exists() and not any(staging_dir().iterdir())
    )


def test_an_upload_from_the_console_is_queued_then_run_by_the_commands_importer(alice, client_for):
    response = post_form(client_for(alice), corpus="mine", file=upload("pages.jsonl", PAGES))
    job = CorpusImport.objects.get()
    assert response.status_code == 302 and response.url == reverse("console:corpus_import", args=[job.pk])
    assert (job.status, job.source, job.source_format, job.owner) == (
        "queued",
        "pages.jsonl",
        "jsonl",
        alice,
    )
    assert (staging_dir() / job.upload).read_bytes() == PAGES  # where the worker finds it

    job = run_corpus_import_job(job.pk)
    assert (job.status, job.record_count, job.progress, job.total, job.error) == ("done", 2, 2, 2, "")
    assert job.started_at <= job.finished_at
    assert not (staging_dir() / job.upload).exists()
    assert Corpus.objects.get(name="mine").document_count == 2
    assert [r.title for r in backend_for("mine").search("echo")] == ["Delta"]
    assert AuditEntry.objects.filter(action="corpus.import", object_id=str(job.pk)).exists()
    assert AuditEntry.objects.filter(action="corpus.import_request", actor=alice).exists()
    # The command, on the same file, imports the same pages: the two share one importer.
    source = staging_dir() / "same.jsonl"
    source.write_bytes(PAGES)
    call_command("import_corpus", "theirs", str(source))
    for query in ("alpha", "echo foxtrot"):
        assert backend_for("theirs").search(query) == backend_for("mine").search(query)


def test_the_import_page_polls_with_a_progress_bar_until_the_job_is_done(alice, client_for):
    client = client_for(alice)
    post_form(client, corpus="mine", file=upload("pages.jsonl", PAGES))
    job = CorpusImport.objects.get()
    url = reverse("console:corpus_import", args=[job.pk])
    waiting = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="import-status"' in waiting and f'hx-get="{url}"' in waiting and "<progress" in waiting
    assert "Waiting for a worker." in waiting and "<html" not in waiting
    CorpusImport.objects.filter(pk=job.pk).update(status="running", progress=3, total=7)
    running = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert '<progress max="7" value="3"' in running and "Indexing: 3 of 7 records." in running
    # Issue 24: the time left at the rate so far (3 records in a minute: 4 more in 80 s), and what the
    # job does once every record is read (the index is written in one commit: the figure stands still).
    CorpusImport.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(minutes=1))
    running = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "Indexing: 3 of 7 records · about 2 min left." in running
    CorpusImport.objects.filter(pk=job.pk).update(progress=7)
    assert (
        "All 7 records read: writing the index." in client.get(url, HTTP_HX_REQUEST="true").content.decode()
    )
    CorpusImport.objects.filter(pk=job.pk).update(progress=3, total=None)  # streaming a ZIM: no total
    streaming = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert '<progress aria-labelledby="import-progress-text"></progress>' in streaming
    assert "Indexing: 3 records so far (total not known until the end)." in streaming
    CorpusImport.objects.filter(pk=job.pk).update(status="queued", progress=0, total=None)
    run_corpus_import_job(job.pk)
    done = client.get(url)
    assert "HX-Request" in done["Vary"]
    body = done.content.decode()
    assert "hx-get" not in body and '<progress max="2" value="2"' in body
    assert "Done: 2 pages imported; mine now has 2 pages." in body
    listing = client.get(reverse("console:corpora")).content.decode()
    assert '<th scope="row">mine</th>' in listing and "pages.jsonl</a>: done" in listing


ZIP = "a.zip"
BAD_REQUESTS = [  # the fields besides corpus="mine", the field the error is under, what it says
    ({"corpus": "../escape", "file": ("a.jsonl", PAGES)}, "corpus", "letters, digits, - and _ only"),
    ({}, "file", "Upload a corpus file or give a server path."),
    ({"file": ("a.csv", PAGES)}, "file", "Expected .jsonl, .zim, or .zip"),
    (
        {"file": ("a.jsonl", PAGES), "source_format": "freshwiki"},
        "source_format",
        "holds jsonl, not freshwiki",
    ),
    ({"file": (ZIP, b"not a zip")}, "file", "Not a readable .zip file."),
    ({"file": (ZIP, a_zip({"../up.html": b"x"}))}, "file", "names a file outside its folder"),
    ({"file": (ZIP, a_zip({"a.html": b"x"}, links=("b.html",)))}, "file", "links are refused"),
    ({"file": (ZIP, a_zip({"notes.md": b"x"}))}, "file", "no .html, .htm or .txt pages"),
    ({"file": (ZIP, a_zip({"site/a.html": b"x"}))}, "base_url", "needs a base URL"),
    ({"file": (ZIP, a_zip({"a.html": b"x"})), "base_url": "ftp://x/"}, "base_url", "absolute http(s) URL"),
    ({"path": "pages.jsonl"}, "path", "Importing from a server path is off"),
    ({"path": "pages.jsonl", "file": ("a.jsonl", PAGES)}, "file", "not both"),
]


def request_fields(fields: dict, api: bool) -> dict:
    out = {"corpus": "mine"} | {k: upload(*v) if k == "file" else v for k, v in fields.items()}
    if api and "source_format" in out:
        out["format"] = out.pop("source_format")
    return out


@pytest.mark.parametrize(("fields", "field", "message"), BAD_REQUESTS)
def test_the_form_and_the_api_refuse_the_same_bad_requests_and_create_nothing(
    alice, client_for, fields, field, message
):
    page = post_form(client_for(alice), **request_fields(fields, api=False))
    assert page.status_code == 400
    assert message in page.content.decode().replace("&#x27;", "'")
    answer = post_api(alice, **request_fields(fields, api=True))
    assert answer.status_code == 400
    api_field = "format" if field == "source_format" else field
    assert any(message in text for text in answer.json()[api_field]), answer.json()
    assert nothing_was_created()


def test_an_upload_over_the_limit_is_refused_before_it_is_read(alice, client_for, settings):
    settings.CORPUS_IMPORT_MAX_BYTES = 10
    page = post_form(client_for(alice), corpus="mine", file=upload("a.jsonl", PAGES))
    assert page.status_code == 400 and "larger than 10 bytes" in page.content.decode()
    settings.CORPUS_IMPORT_MAX_BYTES = 10**6
    settings.CORPUS_IMPORT_MAX_UNZIPPED_BYTES = 10
    answer = post_api(alice, corpus="mine", file=upload("a.zip", a_zip({"a.html": PAGES})))
    assert answer.status_code == 400 and "unpacks to more than 10 bytes" in answer.json()["file"][0]
    assert nothing_was_created()


def test_the_api_refuses_unknown_keys_and_other_roles(alice, bob):
    answer = post_api(alice, corpus="mine", file=upload("a.jsonl", PAGES), fromat="jsonl")
    assert answer.status_code == 400 and "unknown" in answer.json()["fromat"][0]
    assert post_api(bob, corpus="mine", file=upload("a.jsonl", PAGES)).status_code == 403
    assert nothing_was_created()


def test_the_api_queues_an_import_and_reports_its_progress(alice, charlie):
    answer = post_api(alice, corpus="mine", file=upload("pages.jsonl", PAGES))
    assert answer.status_code == 202
    body = answer.json()
    assert (body["corpus"], body["source"], body["format"], body["status"]) == (
        "mine",
        "pages.jsonl",
        "jsonl",
        "queued",
    )
    run_corpus_import_job(body["id"])
    api = APIClient()
    api.force_authenticate(alice)
    done = api.get(f"/api/corpora/imports/{body['id']}").json()
    assert (done["status"], done["record_count"], done["progress"], done["total"]) == ("done", 2, 2, 2)
    api.force_authenticate(charlie)
    assert api.get(f"/api/corpora/imports/{body['id']}").status_code == 404


def test_a_bad_record_mid_file_fails_the_job_and_leaves_the_index_as_it_was(alice, client_for):
    import_corpus("mine", write(staging_dir() / "first.jsonl", PAGES))
    bad = (
        PAGES.replace(b"example.org/", b"example.org/new-")
        + b'{"url": "ftp://x", "title": "C", "text": "golf"}\n'
    )
    post_form(client_for(alice), corpus="mine", file=upload("more.jsonl", bad))
    job = run_corpus_import_job(CorpusImport.objects.get(status="queued").pk)
    assert job.status == ImportStatus.FAILED and job.record_count is None
    assert job.error.startswith("more.jsonl: line 3: 'url' must be an absolute http(s) URL")
    assert job.error.endswith("The corpus is unchanged.")
    assert str(staging_dir()) not in job.error  # the researcher's file name, not the worker's copy
    assert backend_for("mine").count() == 2 and backend_for("mine").search("golf") == []
    assert Corpus.objects.get(name="mine").document_count == 2
    assert not (staging_dir() / job.upload).exists()
    page = client_for(alice).get(reverse("console:corpus_import", args=[job.pk])).content.decode()
    assert "Failed: more.jsonl: line 3:" in page and "hx-get" not in page


def write(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_zip_of_pages_and_a_zip_of_freshwiki_articles_are_imported(alice, client_for):
    client = client_for(alice)
    pages = a_zip(
        {"site/index.html": b"<title>Home</title><p>hotel india</p>", "site/notes/b.txt": b"juliet"}
    )
    post_form(client, corpus="pages", file=upload("site.zip", pages), base_url="https://pages.example/")
    articles = sorted(FRESHWIKI.glob("*.json"))[:3]
    wiki = a_zip({f"json/{path.name}": path.read_bytes() for path in articles})
    post_form(client, corpus="wiki", file=upload("wiki.zip", wiki))
    for job in CorpusImport.objects.order_by("id"):
        assert run_corpus_import_job(job.pk).status == ImportStatus.DONE, job.error
    assert CorpusImport.objects.get(corpus__name="pages").source_format == "folder"
    assert backend_for("pages").fetch("https://pages.example/notes/b.txt").content == "juliet"
    assert CorpusImport.objects.get(corpus__name="wiki").source_format == "freshwiki"
    assert backend_for("wiki").count() == 3
    assert [p.name for p in staging_dir().iterdir()] == []  # uploads and unpacked folders are gone


def test_a_server_path_is_taken_only_inside_the_import_folder(alice, client_for, settings, tmp_path):
    root = tmp_path / "imports"
    write(root / "corpora" / "pages.jsonl", PAGES)
    write(tmp_path / "secret.jsonl", PAGES)
    os.symlink(tmp_path / "secret.jsonl", root / "link.jsonl")
    settings.CORPUS_IMPORT_ROOT = root
    client = client_for(alice)
    for path in ("../secret.jsonl", str(tmp_path / "secret.jsonl"), "link.jsonl"):
        refused = post_form(client, corpus="mine", path=path)
        assert refused.status_code == 400 and "inside the import folder" in refused.content.decode(), path
    assert "no such file" in post_form(client, corpus="mine", path="nope.jsonl").content.decode()
    assert nothing_was_created()
    assert post_form(client, corpus="mine", path=str(root / "corpora" / "pages.jsonl")).status_code == 302
    job = CorpusImport.objects.get()
    assert (job.source, job.upload) == ("corpora/pages.jsonl", "")
    assert run_corpus_import_job(job.pk).record_count == 2
    assert (root / "corpora" / "pages.jsonl").exists()  # the server's file is read, never removed


def test_a_redelivered_job_is_failed_or_left_alone(alice, client_for):
    post_form(client_for(alice), corpus="mine", file=upload("pages.jsonl", PAGES))
    job = CorpusImport.objects.get()
    CorpusImport.objects.filter(pk=job.pk).update(status=ImportStatus.RUNNING)  # its worker died
    failed = run_corpus_import_job(job.pk)
    assert (failed.status, failed.error) == (ImportStatus.FAILED, WORKER_STOPPED)
    assert not (staging_dir() / job.upload).exists()
    assert run_corpus_import_job(job.pk).error == WORKER_STOPPED  # finished rows are not run again


def test_progress_is_written_at_most_once_a_second_and_at_once_when_the_total_changes(alice, client_for):
    post_form(client_for(alice), corpus="mine", file=upload("pages.jsonl", PAGES))
    job = CorpusImport.objects.get()
    now = [100.0]
    record = import_jobs._Recorder(job.pk, clock=lambda: now[0])

    def stored() -> tuple:
        return tuple(CorpusImport.objects.filter(pk=job.pk).values_list("progress", "total").get())

    record(100, None)
    record(200, None)  # within the second: not written
    assert stored() == (100, None)
    now[0] += 1.0
    record(300, None)
    assert stored() == (300, None)
    record(0, 300)  # a new total: written at once, within the second
    assert stored() == (0, 300)


@pytest.mark.django_db(transaction=True)
def test_a_poller_sees_the_progress_while_the_job_runs(alice, client_for, monkeypatch):
    """The importer holds no transaction while it indexes, so each progress write is visible to the pages
    at once (here every record: no batching, no throttle); a JSONL file's total is known from the start."""
    monkeypatch.setattr("browser.services.PROGRESS_EVERY", 1)
    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    rows = b"".join(
        json.dumps({"url": f"https://example.org/{i}", "title": f"P{i}", "text": "kilo"}).encode() + b"\n"
        for i in range(5)
    )
    post_form(client_for(alice), corpus="mine", file=upload("five.jsonl", rows))
    job = CorpusImport.objects.get()
    page = connections.create_connection("default")  # another process's view of the job row
    seen = []
    real_write = import_jobs._Recorder.__call__

    def write_and_look(self, done, total):
        real_write(self, done, total)
        with page.cursor() as cursor:
            cursor.execute("SELECT progress, total FROM browser_corpusimport WHERE id = %s", [job.pk])
            seen.append(cursor.fetchone())

    monkeypatch.setattr(import_jobs._Recorder, "__call__", write_and_look)
    run_corpus_import_job(job.pk)
    page.close()
    assert seen == [(i, 5) for i in range(6)]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_import_queued_over_the_api_runs_on_a_real_worker_of_the_exports_queue(
    alice, settings, tmp_path, broker_namespace
):
    settings.MEDIA_ROOT = tmp_path / "media"  # the worker's, from VAR_DIR
    answer = post_api(alice, corpus="mine", file=upload("pages.jsonl", PAGES))
    assert answer.status_code == 202
    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "CORPUS_INDEX_DIR": str(settings.CORPUS_INDEX_DIR),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "PATH": "/usr/bin:/bin",
    }
    with running_worker(env, queues="exports"):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not CorpusImport.objects.get().is_finished:
            time.sleep(0.2)
    job = CorpusImport.objects.get()
    assert (job.status, job.record_count, job.error) == (ImportStatus.DONE, 2, "")
    assert [r.title for r in backend_for("mine").search("bravo")] == ["Alpha"]  # the worker's index
