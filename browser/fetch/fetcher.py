"""``SafeFetcher``: GET a page from the live web without letting the address point back at us.

Each hop (the first address and every redirect, at most ``max_redirects``) is checked the same way by
``check_url``: http/https only, no user@host, every address of the name allowed by the address policy; the
connection then goes to a checked address. One deadline covers the whole fetch, the body is read in
chunks and refused past ``max_bytes``, and only the allowed content types are read at all. Everything
that goes wrong is a ``FetchRefused`` with a reason code, counted in ``refusal_counts()``.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from urllib.parse import urljoin

from browser.fetch.connection import REDIRECT_STATUSES, Deadline, Reply, exchange
from browser.fetch.decoding import decode_text
from browser.fetch.refusals import FetchRefused, record_refusal
from browser.fetch.robots import RobotsRules
from browser.fetch.target import Target, check_url

USER_AGENT = "WebGPT-platform-fetcher/0.1 (text-only research browser; one page at a time, for a person)"
DEFAULT_CONTENT_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain", "application/pdf"})
ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309 asks parsers to read at least 500 KiB
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True)
class FetchSettings:
    """How the fetcher behaves; ``from_django()`` reads the same names with a FETCH_ prefix."""

    allow_loopback: bool = False  # tests only: lets the fetcher reach servers on 127.0.0.1 / ::1
    connect_timeout: float = 5.0  # seconds per connection attempt
    total_timeout: float = 20.0  # seconds for the whole fetch, redirects and robots.txt included
    max_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    content_types: frozenset[str] = DEFAULT_CONTENT_TYPES
    user_agent: str = USER_AGENT
    check_robots: bool = True
    min_interval: float = 1.0  # seconds between two fetches from one host name
    ca_file: str | None = None  # PEM certificates to trust instead of the system's (tests, a company CA)
    # Host names the operator configured for their own services (a self-hosted SearXNG): these may resolve
    # to loopback or private addresses. Only for a fetcher that calls those services, never for pages.
    internal_hosts: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "content_types", frozenset(t.lower() for t in self.content_types))
        object.__setattr__(self, "internal_hosts", frozenset(h.lower() for h in self.internal_hosts))
        for name in ("connect_timeout", "total_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"FetchSettings.{name} must be a positive number of seconds.")
        if self.max_bytes < 1 or self.max_redirects < 0 or self.min_interval < 0:
            raise ValueError("FetchSettings: max_bytes must be > 0, max_redirects and min_interval >= 0.")
        if not self.content_types or not self.user_agent.strip():
            raise ValueError("FetchSettings: content_types and user_agent must not be empty.")
        if not self.user_agent.isprintable() or not self.user_agent.isascii():
            raise ValueError("FetchSettings.user_agent must be printable ASCII (it is sent as a header).")

    @classmethod
    def from_django(cls) -> FetchSettings:
        """Settings from django.conf.settings (FETCH_MAX_BYTES, ...), defaults for names not set there."""
        from django.conf import settings

        if not settings.configured:
            return cls()
        values = {}
        for field in fields(cls):
            name = f"FETCH_{field.name.upper()}"
            if hasattr(settings, name):
                values[field.name] = getattr(settings, name)
        return cls(**values)


@dataclass(frozen=True)
class FetchResult:
    url: str  # after redirects
    status: int
    content_type: str  # e.g. "text/html", without parameters
    charset: str | None  # the encoding ``text`` was decoded with; None for PDF
    text: str | None  # None for PDF: read ``body``
    body: bytes
    redirects: tuple[str, ...]  # every address redirected to, in order


class _HostSpacing:
    """At most one fetch per ``min_interval`` seconds per host name; the next one is refused, not queued
    (a worker that waits could be parked for as long as a caller likes)."""

    def __init__(self, min_interval: float) -> None:
        self._min_interval = min_interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}

    def take(self, host: str) -> None:
        if self._min_interval <= 0:
            return
        now = time.monotonic()
        with self._lock:
            last = self._last.get(host)
            if last is not None and now - last < self._min_interval:
                wait = self._min_interval - (now - last)
                message = f"Too many fetches from {host}; try again in {wait:.1f} s."
                raise FetchRefused("rate_limited", message)
            if len(self._last) > 10_000:  # forget hosts whose interval has passed
                self._last = {h: t for h, t in self._last.items() if now - t < self._min_interval}
            self._last[host] = now


class SafeFetcher:
    """Thread-safe; keep one per process so the rate limit and the robots.txt cache are shared."""

    def __init__(self, settings: FetchSettings | None = None) -> None:
        self.settings = settings or FetchSettings.from_django()
        self._spacing = _HostSpacing(self.settings.min_interval)
        self._tls = ssl.create_default_context(cafile=self.settings.ca_file)
        self._robots = RobotsRules(self._load_robots)
        self._local = threading.local()  # the deadline of the fetch running on this thread

    def fetch(self, url: str, headers: Mapping[str, str] | None = None) -> FetchResult:
        """GET ``url``; FetchRefused(reason, message) if it is not allowed or does not work out.
        ``headers`` are added to the request (an API's Accept or key header): with redirects allowed they
        would follow the request to another host, so a fetcher that sends secrets sets max_redirects=0."""
        try:
            self._local.deadline = Deadline(self.settings.total_timeout)
            target, reply, redirects = self._follow(
                url,
                headers=dict(headers or {}),
                robots=self.settings.check_robots,
                spaced=True,
                max_bytes=self.settings.max_bytes,
                content_types=self.settings.content_types,
            )
        except FetchRefused as refusal:
            record_refusal(refusal.reason)
            raise
        content_type = reply.headers.get_content_type()
        if content_type == "application/pdf":
            return FetchResult(target.url, reply.status, content_type, None, None, reply.body, redirects)
        text, charset = decode_text(
            reply.body, reply.headers.get_content_charset(), html=content_type in _HTML_TYPES
        )
        return FetchResult(target.url, reply.status, content_type, charset, text, reply.body, redirects)

    def _follow(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        robots: bool,
        spaced: bool,
        max_bytes: int,
        content_types: frozenset[str] | None,
    ) -> tuple[Target, Reply, tuple[str, ...]]:
        settings = self.settings
        redirects: list[str] = []
        hosts_seen: set[str] = set()
        while True:
            target = check_url(
                url, allow_loopback=settings.allow_loopback, internal_hosts=settings.internal_hosts
            )
            if spaced and target.host not in hosts_seen:  # a redirect within one host is the same fetch
                self._spacing.take(target.host)
                hosts_seen.add(target.host)
            if robots and not self._robots.allowed(target.origin, target.url, settings.user_agent):
                raise FetchRefused("robots_disallowed", f"{target.host} asks robots not to fetch this page.")
            reply = exchange(
                target,
                headers={
                    "User-Agent": settings.user_agent,
                    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8",
                    "Connection": "close",
                }
                | (headers or {}),
                connect_timeout=settings.connect_timeout,
                deadline=self._local.deadline,
                max_bytes=max_bytes,
                content_types=content_types,
                tls=self._tls,
            )
            if reply.status not in REDIRECT_STATUSES:
                return target, reply, tuple(redirects)
            location = (reply.headers.get("Location") or "").strip()
            if not location:
                raise FetchRefused("bad_redirect", f"{target.host} redirected without saying where to.")
            if len(redirects) >= settings.max_redirects:
                raise FetchRefused(
                    "too_many_redirects", f"The page redirected more than {settings.max_redirects} times."
                )
            url = urljoin(target.url, location)
            redirects.append(url)

    def _load_robots(self, origin: str) -> tuple[int, str]:
        # Not spaced (it belongs to the fetch that asked) and any content type: robots.txt is often
        # served as text/html or application/octet-stream.
        _target, reply, _redirects = self._follow(
            f"{origin}/robots.txt", robots=False, spaced=False, max_bytes=ROBOTS_MAX_BYTES, content_types=None
        )
        return reply.status, decode_text(reply.body, reply.headers.get_content_charset(), html=False)[0]
