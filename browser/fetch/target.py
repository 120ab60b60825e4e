"""A URL checked for fetching: scheme, credentials, host and port parsed once, the name resolved once.

The same ``check_url`` runs for the first address and for every redirect, so a redirect cannot reach
anything the first hop could not (the bug where a fetcher checks the IP once and then follows redirects).
We parse the URL ourselves and connect to what we parsed, so there is no second parser (a browser, a
library) that could read "http://a.com\\@127.0.0.1/" differently; such ambiguous URLs are refused anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from browser.fetch.addresses import resolve
from browser.fetch.refusals import FetchRefused

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_CHARS = 4096
# Spaces, control characters and backslashes: parsers disagree about all of them.
_AMBIGUOUS = re.compile(r"[\x00-\x20\x7f\\]")
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"


@dataclass(frozen=True)
class Target:
    url: str  # normalised: ASCII host, quoted path, no fragment
    scheme: str
    host: str  # ASCII; an IPv6 literal without brackets
    port: int
    path: str  # path and query, as sent in the request line
    addresses: tuple[str, ...]  # checked; the only places we connect to

    @property
    def origin(self) -> str:
        """scheme://host[:port], the scope of a robots.txt."""
        return self.url.split("/", 3)[0] + "//" + self.url.split("/", 3)[2]


def _ascii_host(hostname: str) -> str:
    if ":" in hostname:  # an IPv6 literal, already plain ASCII
        return hostname
    try:
        return hostname.rstrip(".").encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise FetchRefused("bad_url", f"The host name {hostname!r} is not valid.") from exc


def check_url(
    url: str, *, allow_loopback: bool = False, internal_hosts: frozenset[str] = frozenset()
) -> Target:
    """Parse and check ``url`` and resolve its host; FetchRefused says what is wrong with it. A host in
    ``internal_hosts`` may be on a loopback or private address (``addresses.resolve``)."""
    if len(url) > MAX_URL_CHARS:
        raise FetchRefused("bad_url", f"The address is longer than {MAX_URL_CHARS} characters.")
    if _AMBIGUOUS.search(url):
        raise FetchRefused("bad_url", "The address contains spaces, control characters or backslashes.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchRefused("bad_url", "The address is not a valid URL.") from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise FetchRefused("scheme_not_allowed", "Only http:// and https:// addresses can be fetched.")
    if "@" in parts.netloc:
        raise FetchRefused(
            "credentials_in_url", "Addresses with a user name or password (user@host) are not fetched."
        )
    if not parts.hostname:
        raise FetchRefused("bad_url", "The address has no host name.")
    host = _ascii_host(parts.hostname)
    if not host:
        raise FetchRefused("bad_url", "The address has no host name.")
    port = port if port is not None else DEFAULT_PORTS[scheme]
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{port}"
    path = quote(parts.path or "/", safe=_PATH_SAFE)
    query = quote(parts.query, safe=_PATH_SAFE + "?")
    addresses = resolve(host, port, allow_loopback=allow_loopback, internal=host.lower() in internal_hosts)
    return Target(
        url=urlunsplit((scheme, netloc, path, query, "")),
        scheme=scheme,
        host=host,
        port=port,
        path=path + (f"?{query}" if query else ""),
        addresses=addresses,
    )
