"""Corpora and snapshots on the Django side: importing into an index, opening a backend, storing pages."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.core.validators import validate_slug
from django.db import transaction

from browser.corpus.readers import detect_format, read_corpus
from browser.engine.backend import SearchBackend
from browser.engine.browser import Browser
from browser.engine.page import Page
from browser.engine.settings import BrowserSettings
from browser.models import Corpus, CorpusImport, PageSnapshot
from browser.search.local import LocalIndex
from webgpt_site.models import log_action
from webgpt_site.permissions import AnyUser

_indexes: dict[str, LocalIndex] = {}
_indexes_lock = threading.Lock()


def browser_settings() -> BrowserSettings:
    """The environment's settings from Django settings (``BROWSER_*`` environment variables)."""
    return BrowserSettings(**settings.BROWSER)


def open_index(corpus: Corpus) -> LocalIndex:
    """The corpus's index, opened once per process (searchers reload after each import)."""
    with _indexes_lock:
        index = _indexes.get(corpus.name)
        if index is None:
            index = _indexes[corpus.name] = LocalIndex.open(corpus.index_path)
        return index


def backend_for(name: str | None = None) -> LocalIndex:
    """The search backend for a corpus name (default ``DEFAULT_CORPUS``); Corpus.DoesNotExist if unknown."""
    name = name or settings.DEFAULT_CORPUS
    index = _indexes.get(name)  # an index already open needs no query (this runs on every browsing action)
    return index if index is not None else open_index(Corpus.objects.get(name=name))


def import_corpus(
    name: str,
    path: Path,
    *,
    source_format: str | None = None,
    base_url: str | None = None,
    user: AnyUser | None = None,
) -> CorpusImport:
    """Read every record first (CorpusFileError names file and line), then add them in one index commit.

    A bad record leaves the corpus as it was; re-importing a URL replaces its page.
    """
    validate_slug(name)  # ValidationError: the name is also a folder name
    records = read_corpus(path, source_format, base_url)
    with transaction.atomic():
        corpus, _ = Corpus.objects.get_or_create(name=name)
        # One import per corpus at a time: the row lock orders writers before tantivy's own writer lock.
        corpus = Corpus.objects.select_for_update().get(pk=corpus.pk)
        index = open_index(corpus)
        index.add(records)
        corpus.document_count = index.count()
        corpus.save(update_fields=["document_count", "updated_at"])
        report = CorpusImport.objects.create(
            corpus=corpus,
            source=str(path)[:500],
            source_format=source_format or detect_format(path),
            record_count=len(records),
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        log_action(user, "corpus.import", report, records=len(records))
    return report


def store_snapshots(pages: Iterable[Page]) -> int:
    """Save pages not stored yet (content-addressed, so a page seen twice is stored once)."""
    pages = list(pages)
    if not pages:
        return 0
    rows = [
        PageSnapshot(digest=page.digest, url=page.url, title=page.title, kind=page.kind, page=page.to_dict())
        for page in {page.digest: page for page in pages}.values()
    ]
    existing = set(
        PageSnapshot.objects.filter(digest__in=[row.digest for row in rows]).values_list("digest", flat=True)
    )
    new = [row for row in rows if row.digest not in existing]
    PageSnapshot.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)


@lru_cache(maxsize=512)
def load_snapshot(digest: str) -> Page:
    """A stored page. Snapshots never change (the digest is their content), so each process keeps the
    recently used ones parsed: most browsing actions then read no page from the database."""
    return Page.from_dict(PageSnapshot.objects.get(digest=digest).page)


def save_browser(browser: Browser, known_digests: Iterable[str] = ()) -> dict:
    """The browser's state for the database: pages go to snapshots, the state keeps their digests.

    Only pages not among ``known_digests`` (the episode's pages so far) are checked and stored."""
    known = set(known_digests)
    store_snapshots(page for digest, page in browser.pages.items() if digest not in known)
    state = browser.state()
    state["pages"] = sorted(known | set(state["pages"]))
    return state


def restore_browser(backend: SearchBackend, state: dict, *, with_all_pages: bool = False) -> Browser:
    """A browser from a saved state: the current page is loaded now, pages in the Back history when the
    engine needs them; ``with_all_pages`` loads every page the episode opened (for replays)."""
    if not with_all_pages:
        current = state["cursor"]["digest"]
        return Browser.from_state(
            backend, {**state, "pages": {}}, page_loader=load_snapshot, preload=[current]
        )
    pages = dict(PageSnapshot.objects.filter(digest__in=state["pages"]).values_list("digest", "page"))
    missing = set(state["pages"]) - set(pages)
    if missing:
        raise PageSnapshot.DoesNotExist(f"missing page snapshots: {sorted(missing)[:3]}")
    return Browser.from_state(backend, {**state, "pages": pages})
