"""A researcher, in the real browser, uploads a small corpus from the console: the import page shows a
progress bar, polled by htmx, until a real worker of the exports queue has indexed the pages."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import Page, expect

from browser.models import Corpus, CorpusImport
from tests.conftest import database_url_for_tests, running_worker

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PAGES = (
    b'{"url": "https://example.org/alpha", "title": "Alpha", "text": "alpha bravo charlie"}\n'
    b'{"url": "https://example.org/delta", "title": "Delta", "html": "<p>delta echo foxtrot</p>"}\n'
    b'{"url": "https://example.org/golf", "title": "Golf", "text": "golf hotel india"}\n'
)


def test_a_researcher_uploads_a_corpus_and_watches_the_import_finish(
    page: Page, alice, settings, tmp_path, broker_namespace
):
    settings.MEDIA_ROOT = tmp_path / "media"  # the worker's, from VAR_DIR
    corpus_file = tmp_path / "pages.jsonl"
    corpus_file.write_bytes(PAGES)
    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "CORPUS_INDEX_DIR": str(settings.CORPUS_INDEX_DIR),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "PATH": "/usr/bin:/bin",
    }
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pw")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Corpora").click()
    expect(page.get_by_text("No corpora yet")).to_be_visible()
    page.get_by_label("Corpus:", exact=True).fill("mine")
    page.get_by_label("Corpus file:", exact=True).set_input_files(str(corpus_file))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_role("heading", name="Corpus import")).to_contain_text("mine")
    expect(page.get_by_role("status")).to_have_text("Waiting for a worker.")  # no worker yet: queued
    expect(page.locator("progress")).to_be_visible()
    with running_worker(env, queues="exports"):
        expect(page.get_by_role("status")).to_contain_text("Done: 3 pages imported", timeout=120_000)
    bar = page.locator("progress")
    expect(bar).to_have_attribute("max", "3")
    expect(bar).to_have_attribute("value", "3")
    assert CorpusImport.objects.get().status == "done"
    assert Corpus.objects.get(name="mine").document_count == 3
    page.get_by_role("link", name="All corpora").click()
    corpus_row = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name="mine"))
    expect(corpus_row).to_contain_text("3")
    expect(corpus_row).to_contain_text("pages.jsonl: done")
