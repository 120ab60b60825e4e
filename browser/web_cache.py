"""A cache in front of a live provider, so that a query or page asked for again is not paid for twice.

Policies (``WEB_CACHE``): ``day`` (the default) reuses an answer on the UTC day it was fetched, so people
browsing the same question that day see the same results and pages, and tomorrow's run sees tomorrow's
web; ``forever`` reuses the newest answer of any day (a frozen web for reproducible runs); ``off`` asks the
provider every time. Failures are never cached. This is about cost and consistency across episodes;
within an episode, the engine already reuses what it opened, and every page shown is kept as a snapshot
for replay whatever the policy (browser/services.py).
"""

from __future__ import annotations

import hashlib

import orjson
from django.db import IntegrityError, transaction
from django.utils import timezone

from browser.engine.backend import Document, SearchResult
from browser.models import WebCacheEntry
from browser.search.web import WebSearch

POLICIES = ("day", "forever", "off")


def _key(*parts: object) -> str:
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()


class CachedWebSearch:
    """``inner`` behind the cache: the same interface (search, fetch), and the same errors."""

    def __init__(self, inner: WebSearch, policy: str) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown web cache policy {policy!r}; expected one of {', '.join(POLICIES)}")
        self.inner = inner
        self.policy = policy
        self.name = inner.name
        self.label = inner.label

    def _lookup(self, kind: str, key: str) -> WebCacheEntry | None:
        if self.policy == "off":
            return None
        entries = WebCacheEntry.objects.filter(provider=self.name, kind=kind, key=key)
        if self.policy == "day":
            entries = entries.filter(day=timezone.now().date())
        return entries.order_by("-day").first()

    def _store(self, kind: str, key: str, **fields: object) -> None:
        if self.policy == "off":
            return
        try:
            with transaction.atomic():  # a savepoint: a racing twin's row must not spoil the caller's
                WebCacheEntry.objects.create(
                    provider=self.name, kind=kind, key=key, day=timezone.now().date(), **fields
                )
        except IntegrityError:  # someone stored the same answer a moment ago: theirs stands
            pass

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        key = _key(query, k)
        entry = self._lookup("search", key)
        if entry is not None:
            return [SearchResult(*row) for row in orjson.loads(bytes(entry.body))]
        results = self.inner.search(query, k)
        rows = [(r.url, r.title, r.snippet) for r in results]
        self._store("search", key, body=orjson.dumps(rows), content_type="application/json")
        return results

    def fetch(self, url: str) -> Document:
        key = _key(url)
        entry = self._lookup("page", key)
        if entry is not None:
            body = bytes(entry.body)
            content = body.decode("utf-8") if entry.is_text else body
            return Document(url=entry.url, content_type=entry.content_type, content=content)
        document = self.inner.fetch(url)
        is_text = isinstance(document.content, str)
        body = document.content.encode("utf-8") if is_text else document.content
        self._store(
            "page", key, url=document.url, content_type=document.content_type, is_text=is_text, body=body
        )
        return document
