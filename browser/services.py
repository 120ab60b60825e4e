"""Corpora and snapshots on the Django side: importing into an index, opening a backend, storing pages."""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.core.validators import validate_slug
from django.db import transaction
from django.utils import timezone

from browser.corpus.readers import count_records, detect_format, read_corpus
from browser.engine.backend import SearchBackend
from browser.engine.browser import Browser
from browser.engine.page import Page
from browser.engine.settings import BrowserSettings
from browser.models import Corpus, CorpusImport, ImportStatus, PageSnapshot
from browser.search.local import LocalIndex
from core.models import log_action
from core.permissions import AnyUser

PROGRESS_EVERY = 100  # records between progress reports of an import
Progress = Callable[[int, int | None], None]  # (done, total): see import_corpus

_indexes: dict[str, LocalIndex] = {}
_indexes_lock = threading.Lock()


def _no_progress(done: int, total: int | None) -> None:
    pass


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


def _every(n: int, call: Callable[[int], None]) -> Callable[[int], None]:
    """``call(count)`` for every ``n``-th count only (a database write per record would cost more than it)."""
    return lambda count: call(count) if count % n == 0 else None


@contextmanager
def _writer_lock(name: str) -> Iterator[None]:
    """One import per corpus at a time, across processes: a lock file next to the index orders writers
    before tantivy's own writer lock (which refuses a second writer instead of waiting). A file lock, not
    a database row lock: holding a transaction while indexing would hide the job's progress from pages."""
    folder = Path(settings.CORPUS_INDEX_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f".{name}.import-lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def import_corpus(
    name: str,
    path: Path,
    *,
    source_format: str | None = None,
    base_url: str | None = None,
    user: AnyUser | None = None,
    job: CorpusImport | None = None,
    on_progress: Progress = _no_progress,
) -> CorpusImport:
    """Stream the source's records into the index, checked one by one (CorpusFileError names file and
    line), in one index commit after the last: memory stays bounded however large the source is.

    A bad record anywhere leaves the corpus as it was (the writer rolls back); re-importing a URL replaces
    its page, so an interrupted import is restarted by running it again. The command gets a new row once
    the import is done (a failed command leaves none); the console's job passes its row as ``job``,
    finished here. ``on_progress(done, total)`` hears 0 first, then every PROGRESS_EVERY records:
    records indexed out of ``total``, the source's record count where that is cheap to know
    (readers.count_records), else None.
    """
    validate_slug(name)  # ValidationError: the name is also a folder name
    source_format = source_format or detect_format(path)
    max_file = settings.CORPUS_IMPORT_MAX_FILE_BYTES
    records = read_corpus(path, source_format, base_url, max_file)  # whole-source problems raise here
    total = count_records(path, source_format)
    on_progress(0, total)
    with _writer_lock(name):
        corpus, _ = Corpus.objects.get_or_create(name=name)
        index = open_index(corpus)
        progress = _every(PROGRESS_EVERY, lambda n: on_progress(n, total))
        count = index.add(records, on_record=progress, urls_unique=True)  # the readers refuse duplicates
        with transaction.atomic():
            corpus = Corpus.objects.select_for_update().get(pk=corpus.pk)
            corpus.document_count = index.count()
            corpus.save(update_fields=["document_count", "updated_at"])
            now = timezone.now()
            done = {"status": ImportStatus.DONE, "progress": count, "total": count, "record_count": count}
            done |= {"source_format": source_format, "finished_at": now}
            if job is None:
                report = CorpusImport.objects.create(
                    corpus=corpus,
                    source=str(path)[:500],
                    base_url=(base_url or "")[:500],
                    owner=user if getattr(user, "is_authenticated", False) else None,
                    started_at=now,
                    **done,
                )
            else:
                CorpusImport.objects.filter(pk=job.pk).update(**done)
                report = CorpusImport.objects.select_related("corpus").get(pk=job.pk)
            log_action(user, "corpus.import", report, records=count)
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
