"""What every corpus reader produces, and the one error they all raise.

Readers validate a whole file before anything is written to an index, so a bad row can reject the
import with a message that names the file and the line, and the index is never half-updated.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

CONTENT_TYPES = ("text/html", "text/plain")


@dataclass(frozen=True)
class CorpusRecord:
    """One page of a corpus: served at ``url``; ``content`` is HTML or plain text per ``content_type``."""

    url: str
    title: str
    content: str
    content_type: str  # "text/html" or "text/plain"

    def __post_init__(self) -> None:
        if self.content_type not in CONTENT_TYPES:
            raise ValueError(f"content_type must be one of {CONTENT_TYPES}, not {self.content_type!r}")


class CorpusFileError(ValueError):
    """A corpus file is unreadable or invalid; ``line`` is 0 when the problem is not tied to a line."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}: line {line}" if line else self.path
        super().__init__(f"{where}: {reason}")


def is_http_url(url: str) -> bool:
    """True for an absolute http(s) URL with a host and no whitespace (what the browser can serve)."""
    if not url or any(ch.isspace() for ch in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an invalid IPv6 literal
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
