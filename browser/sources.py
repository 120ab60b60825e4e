"""What an episode searches: a provider, and for the ``local`` provider a corpus. Chosen per
demonstration batch and per sampling run, stored on each episode, so an episode always reopens on the
source it began with.

``PROVIDERS`` is the one registry: the console forms, the API and the commands offer and check its
names (``source_error``), and ``open_source`` makes the backend. To add a provider, write a
``browser.search.web.WebSearch`` subclass, a ``Provider`` entry with its settings check, and its
settings in webgpt_site/settings.py (docs/search-providers.md walks through it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.template.defaultfilters import pluralize

from browser.engine.backend import Document, FetchError, SearchBackend, SearchResult
from browser.fetch import FetchSettings, SafeFetcher
from browser.models import Corpus
from browser.search.web import BraveSearch, SearxngSearch, WebSearch
from browser.services import backend_for
from browser.web_cache import CachedWebSearch

LOCAL = "local"
HEALTH_QUERY = "Wikipedia"


@dataclass(frozen=True)
class Provider:
    name: str
    label: str
    live: bool
    problem: Callable[[], str]  # why it cannot be used with the current settings; "" when it can
    # Live providers: the client, given the fetcher for pages.
    make: Callable[[SafeFetcher], WebSearch] | None = None


def _setting_problem(name: str, what: str) -> Callable[[], str]:
    return lambda: "" if getattr(settings, name, None) else f"set {name} to {what}"


PROVIDERS: dict[str, Provider] = {
    LOCAL: Provider(LOCAL, "Local index", live=False, problem=lambda: ""),
    "searxng": Provider(
        "searxng",
        "SearXNG (live web)",
        live=True,
        problem=_setting_problem("SEARXNG_URL", "your SearXNG instance's address"),
        make=lambda pages: SearxngSearch(settings.SEARXNG_URL, pages),
    ),
    "brave": Provider(
        "brave",
        "Brave Search (live web)",
        live=True,
        problem=_setting_problem("BRAVE_API_KEY", "a Brave Search API key (or BRAVE_API_KEY_FILE)"),
        make=lambda pages: BraveSearch(settings.BRAVE_API_KEY, settings.BRAVE_API_URL, pages),
    ),
}


def provider_choices() -> list[tuple[str, str]]:
    """The providers a form offers: local, and each live one the operator has configured."""
    return [(p.name, p.label) for p in PROVIDERS.values() if not p.problem()]


def corpus_error(name: str) -> str:
    """Why ``name`` cannot be searched, or "" when it can (blank: the site's default corpus): a source
    naming a corpus that does not exist would start episodes whose first search fails."""
    if name and not Corpus.objects.filter(name=name).exists():
        known = ", ".join(Corpus.objects.values_list("name", flat=True)) or "none yet"
        return f"There is no corpus {name!r} (corpora: {known})."
    return ""


def check_source(search: str, corpus: str = "") -> tuple[str, str] | None:
    """(the input it is about, why) when (``search``, ``corpus``) cannot be an episode's source, None when
    it can: the one check of the console forms, the API and the commands."""
    provider = PROVIDERS.get(search)
    if provider is None:
        return "search", f"There is no search provider {search!r} (providers: {', '.join(PROVIDERS)})."
    if problem := provider.problem():
        return "search", f"{provider.label} is not configured here: {problem}."
    if provider.live and corpus:
        return "corpus", "A corpus is searched by the local index only: leave it empty for a live provider."
    if problem := corpus_error(corpus):
        return "corpus", problem
    return None


def source_error(search: str, corpus: str = "") -> str:
    """``check_source``'s reason alone ("" when the source is fine)."""
    found = check_source(search, corpus)
    return found[1] if found else ""


_fetchers: dict[FetchSettings, SafeFetcher] = {}
_fetchers_lock = threading.Lock()


def page_fetcher() -> SafeFetcher:
    """The process's page fetcher (its rate limit and robots.txt cache are shared by every episode)."""
    fetch_settings = FetchSettings.from_django()
    with _fetchers_lock:
        if fetch_settings not in _fetchers:
            _fetchers[fetch_settings] = SafeFetcher(fetch_settings)
        return _fetchers[fetch_settings]


@lru_cache(maxsize=16)
def _live_client(name: str, configuration: tuple) -> WebSearch:
    # ``configuration`` only keys the cache: a changed setting (tests) makes a new client.
    make = PROVIDERS[name].make
    if make is None:
        raise ValueError(f"{name!r} is not a live search provider")
    return make(page_fetcher())


def _configuration() -> tuple:
    return (
        getattr(settings, "SEARXNG_URL", None),
        getattr(settings, "BRAVE_API_URL", None),
        hash(getattr(settings, "BRAVE_API_KEY", None)),
        FetchSettings.from_django(),
    )


def live_client(name: str) -> WebSearch:
    """The uncached client of live provider ``name``; ValueError when it is unknown or not configured."""
    provider = PROVIDERS.get(name)
    if provider is None or not provider.live:
        raise ValueError(f"{name!r} is not a live search provider")
    if problem := provider.problem():
        raise ValueError(f"{provider.label} is not configured here: {problem}")
    return _live_client(name, _configuration())


def open_source(search: str = LOCAL, corpus: str = "") -> SearchBackend:
    """The backend an episode with this source searches: the corpus's index, or the live provider
    behind the web cache (``WEB_CACHE``)."""
    if search == LOCAL:
        return backend_for(corpus or None)
    try:
        client = live_client(search)
    except ValueError as exc:  # unconfigured since the episode began: its page says so, no server error
        return Unavailable(search, str(exc))
    return CachedWebSearch(client, settings.WEB_CACHE)


class Unavailable:
    """A source that cannot be searched now: every search and fetch is an error page saying why."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        raise FetchError(f"{self.reason}.")

    def fetch(self, url: str) -> Document:
        raise FetchError(f"{self.reason}.")


def describe_source(search: str, corpus: str = "") -> str:
    """How the browsing page and the console name a source: "Searching freshwiki: 100 pages",
    "Searching the live web with SearXNG"."""
    if search != LOCAL:
        provider = PROVIDERS.get(search)
        label = provider.label.removesuffix(" (live web)") if provider else search
        return f"Searching the live web with {label}"
    name = corpus or settings.DEFAULT_CORPUS
    found = Corpus.objects.filter(name=name).only("document_count").first()
    if found is None:
        return f"Searching {name}"
    count = found.document_count
    return f"Searching {name}: {count:,} page{pluralize(count)}"


@dataclass(frozen=True)
class Health:
    name: str
    label: str
    ok: bool
    message: str
    seconds: float | None = None


def provider_health() -> list[Health]:
    """Each configured live provider asked a test query now (not cached), for the console's health box:
    whether it answers, how many results and how fast, or what went wrong."""
    found = []
    for provider in PROVIDERS.values():
        if not provider.live or provider.problem():
            continue
        started = time.monotonic()
        try:
            results = live_client(provider.name).search(HEALTH_QUERY, 3)
        except FetchError as exc:
            found.append(Health(provider.name, provider.label, False, str(exc)))
            continue
        seconds = time.monotonic() - started
        ok = bool(results)
        message = f"{len(results)} results for {HEALTH_QUERY!r}" if ok else "answered with no results"
        found.append(Health(provider.name, provider.label, ok, message, seconds))
    return found


def provider_status(health: list[Health] | None = None) -> list[dict[str, object]]:
    """One row per provider for the console: what it searches and its state ("ready", "not configured:
    set SEARXNG_URL ...", or the result of ``health`` when the providers were just checked)."""
    checked = {h.name: h for h in health or []}
    corpora = ", ".join(Corpus.objects.values_list("name", flat=True)) or "no corpus yet"
    rows = []
    for provider in PROVIDERS.values():
        problem = provider.problem()
        check = checked.get(provider.name)
        if problem:
            state, ok = f"not configured: {problem}", None
        elif check is not None:
            took = f" in {check.seconds:.2f} s" if check.seconds is not None else ""
            state, ok = f"{'answers' if check.ok else 'failed'}: {check.message}{took}", check.ok
        else:
            state, ok = ("configured; not checked yet" if provider.live else "ready"), None
        searches = "the live web" if provider.live else f"corpora: {corpora}"
        rows.append(
            {"name": provider.name, "label": provider.label, "searches": searches, "state": state, "ok": ok}
        )
    return rows
