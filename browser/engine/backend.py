"""What the engine needs from a search backend: search and fetch. Backends live in ``browser.search``.

A backend returns raw documents; the engine does all rendering (links, markers, viewport), so every
backend yields exactly the same observation format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class SearchResult:
    url: str
    title: str
    snippet: str  # plain text, no markup


@dataclass(frozen=True)
class Document:
    """A fetched document, before rendering. ``content`` is text for text/* types, bytes otherwise."""

    url: str
    content_type: str  # "text/html", "text/plain", "application/pdf", ...
    content: str | bytes
    title: str = ""  # used when the content has no title of its own (plain text, PDF)


class PageNotFound(LookupError):
    """The URL is not served by this backend (for the local corpus: not in the corpus)."""


class FetchError(RuntimeError):
    """The document could not be fetched (network error, time-out, an error status...)."""


class AddressNotAllowed(FetchError):
    """The fetcher refused the address itself (a private or loopback address, a non-http scheme...)."""


class SearchBackend(Protocol):
    name: str

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        """The top ``k`` results for ``query`` (may be fewer; never raises on odd query text)."""
        ...

    def fetch(self, url: str) -> Document:
        """The document at ``url``; raises PageNotFound or FetchError."""
        ...


class ReplayOnly:
    """A backend for replays: every page must come from the recording, so any request is a bug."""

    name = "replay"

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        raise LookupError(f"replay: no recorded results for search {query!r}")

    def fetch(self, url: str) -> Document:
        raise LookupError(f"replay: no recorded page for {url}")
