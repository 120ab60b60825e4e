"""Live-web search backends: a search API for results, the safe fetcher for pages.

Each provider turns its API's answer into the engine's ``SearchResult`` (title, URL, plain-text snippet),
so a results page from the live web looks exactly like one from the local index: same layout, same
``【id†title†domain】`` links, same blocklist and censoring (the engine applies both to every backend).

Two fetchers, two policies. The API call goes to an address the operator configured (a self-hosted
SearXNG often lives on 127.0.0.1 or the private network), so that host alone may be internal, and no
redirect is followed (a key header must not travel to another host). Pages come from addresses found on
the web, so they go through the page fetcher's full policy (browser/fetch, docs/fetching.md).

Adding a provider: subclass ``WebSearch``, implement ``search``, and register it in ``browser.sources``.
"""

from __future__ import annotations

import html
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson

from browser.engine.backend import AddressNotAllowed, Document, FetchError, SearchResult
from browser.fetch import FetchRefused, FetchSettings, SafeFetcher

# Refusals about the address itself: shown as "This address is not allowed", not as a failed load.
ADDRESS_REASONS = frozenset({"address_not_allowed", "scheme_not_allowed", "credentials_in_url", "bad_url"})
MAX_QUERY_CHARS = 400  # Brave's limit; SearXNG has none, but a pasted page is no query
_TAG = re.compile(r"<[^>]*>")


def api_fetcher(endpoint: str, *, total_timeout: float = 10.0) -> SafeFetcher:
    """A fetcher for one provider's API at ``endpoint``: JSON only, no redirects, no robots.txt, no
    spacing (the provider meters its own API), and the endpoint's host allowed to be internal."""
    host = urlsplit(endpoint).hostname or ""
    return SafeFetcher(
        FetchSettings(
            content_types=frozenset({"application/json"}),
            max_redirects=0,
            check_robots=False,
            min_interval=0,
            total_timeout=total_timeout,
            max_bytes=2 * 1024 * 1024,
            internal_hosts=frozenset({host}),
        )
    )


def plain(text: Any) -> str:
    """An API's title or snippet as plain text: tags dropped (Brave marks matches with <strong>),
    entities decoded, whitespace collapsed. Anything but a string is empty."""
    if not isinstance(text, str):
        return ""
    return " ".join(html.unescape(_TAG.sub("", text)).split())


def normalised(results: Iterable[tuple[Any, Any, Any]], k: int) -> list[SearchResult]:
    """(url, title, snippet) triples as SearchResults: http(s) URLs only, each URL once, at most ``k``."""
    found: dict[str, SearchResult] = {}
    for url, title, snippet in results:
        if not isinstance(url, str) or urlsplit(url).scheme.lower() not in ("http", "https"):
            continue
        if url not in found:
            found[url] = SearchResult(url=url, title=plain(title) or url, snippet=plain(snippet))
        if len(found) >= k:
            break
    return list(found.values())


class WebSearch(ABC):
    """What every live provider shares: pages through the page fetcher, JSON through the API fetcher.
    A provider implements ``search``."""

    name = "web"
    label = "the live web"

    def __init__(self, pages: SafeFetcher, api: SafeFetcher) -> None:
        self.pages = pages
        self.api = api

    @abstractmethod
    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        """The top ``k`` results for ``query`` from the provider's API; FetchError when it fails."""

    def fetch(self, url: str) -> Document:
        """The page at ``url`` as the fetcher got it; AddressNotAllowed or FetchError says why not."""
        try:
            result = self.pages.fetch(url)
        except FetchRefused as refusal:
            if refusal.reason in ADDRESS_REASONS:
                raise AddressNotAllowed(refusal.message) from refusal
            raise FetchError(refusal.message) from refusal
        if result.status >= 400:
            raise FetchError(f"the server answered {result.status}.")
        content = result.text if result.text is not None else result.body
        return Document(url=result.url, content_type=result.content_type, content=content)

    def _get_json(self, url: str, headers: dict[str, str] | None = None) -> Any:
        """The API's JSON answer; FetchError naming the provider when there is none."""
        try:
            result = self.api.fetch(url, headers={"Accept": "application/json", **(headers or {})})
        except FetchRefused as refusal:
            raise FetchError(f"{self.label}: {refusal.message}") from refusal
        if result.status == 429:
            raise FetchError(f"{self.label} is limiting requests; try again in a moment.")
        if result.status != 200:
            raise FetchError(f"{self.label} answered {result.status}.")
        try:
            return orjson.loads(result.body)
        except orjson.JSONDecodeError as exc:
            raise FetchError(f"{self.label} did not answer with JSON.") from exc


class SearxngSearch(WebSearch):
    """A SearXNG instance's JSON API (``/search?q=...&format=json``; the instance must list ``json``
    under ``search.formats`` in its settings.yml)."""

    name = "searxng"
    label = "SearXNG"

    def __init__(self, base_url: str, pages: SafeFetcher, api: SafeFetcher | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        super().__init__(pages, api or api_fetcher(self.base_url))

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        query = query.strip()[:MAX_QUERY_CHARS]
        if not query or k <= 0:
            return []
        params = urlencode({"q": query, "format": "json", "pageno": 1, "safesearch": 1})
        answer = self._get_json(f"{self.base_url}/search?{params}")
        rows = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            raise FetchError("SearXNG's answer has no results list.")
        rows = [row for row in rows if isinstance(row, dict)]
        return normalised(((r.get("url"), r.get("title"), r.get("content")) for r in rows), k)


class BraveSearch(WebSearch):
    """The Brave Search API (web results); the key goes in the X-Subscription-Token header."""

    name = "brave"
    label = "Brave Search"
    MAX_COUNT = 20  # the API's most results per request

    def __init__(
        self, api_key: str, endpoint: str, pages: SafeFetcher, api: SafeFetcher | None = None
    ) -> None:
        self.endpoint = endpoint
        self._api_key = api_key
        super().__init__(pages, api or api_fetcher(endpoint))

    def __repr__(self) -> str:  # never show the key
        return f"BraveSearch({self.endpoint!r})"

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        query = query.strip()[:MAX_QUERY_CHARS]
        if not query or k <= 0:
            return []
        params = urlencode({"q": query, "count": min(k, self.MAX_COUNT), "safesearch": "moderate"})
        answer = self._get_json(f"{self.endpoint}?{params}", {"X-Subscription-Token": self._api_key})
        web = answer.get("web") if isinstance(answer, dict) else None
        rows = web.get("results", []) if isinstance(web, dict) else []
        if not isinstance(rows, list):
            raise FetchError("Brave Search's answer has no results list.")
        rows = [row for row in rows if isinstance(row, dict)]
        return normalised(((r.get("url"), r.get("title"), r.get("description")) for r in rows), k)
