"""One HTTP(S) exchange with an address that was already checked, within a deadline and a size limit.

The connection goes to the checked address; the name is used only for the Host header and TLS (SNI and
certificate check), so nothing resolves it a second time. The total time limit is a watchdog that shuts
the socket at the deadline: per-read timeouts alone let a server that trickles a byte a second run forever.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from email.message import Message

from browser.fetch.refusals import FetchRefused
from browser.fetch.target import DEFAULT_PORTS, Target

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


class Deadline:
    """The moment a whole fetch (every redirect and the robots.txt check included) must be done by."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expires = time.monotonic() + seconds

    def passed(self) -> FetchRefused:
        return FetchRefused("timeout", f"The page did not arrive within {self.seconds:g} seconds.")

    def remaining(self) -> float:
        left = self.expires - time.monotonic()
        if left <= 0:
            raise self.passed()
        return left


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Message
    body: bytes  # empty for redirects, which are never read


class _PinnedConnection(http.client.HTTPConnection):
    """HTTP or HTTPS to one fixed address; ``host`` only names the site (Host header, SNI)."""

    def __init__(self, target: Target, address: str, connect_timeout: float, tls: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=connect_timeout)
        self.default_port = DEFAULT_PORTS[target.scheme]  # the Host header leaves the default port out
        self._address = address
        self._tls = tls if target.scheme == "https" else None

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), timeout=self.timeout)
        try:
            # server_hostname: SNI and the certificate check are for the name, not the address.
            self.sock = self._tls.wrap_socket(sock, server_hostname=self.host) if self._tls else sock
        except BaseException:
            sock.close()
            raise


def _connect(
    target: Target, connect_timeout: float, deadline: Deadline, tls: ssl.SSLContext
) -> _PinnedConnection:
    for address in target.addresses:
        conn = _PinnedConnection(target, address, min(connect_timeout, deadline.remaining()), tls)
        try:
            conn.connect()
            return conn
        except ssl.SSLError as exc:  # the site answered but is not who it says: no other address helps
            conn.close()
            message = f"A secure connection to {target.host} could not be made ({exc.reason or 'TLS error'})."
            raise FetchRefused("connection_failed", message) from exc
        except OSError:  # refused, unreachable or timed out: try the next checked address
            conn.close()
    deadline.remaining()
    raise FetchRefused("connection_failed", f"Could not connect to {target.host}.")


def _read_body(response: http.client.HTTPResponse, max_bytes: int, limit_text: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read1(_CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise FetchRefused("too_large", f"The page is larger than {limit_text}; it was not read further.")
        chunks.append(chunk)
    if response.length:  # a Content-Length that the server did not honour before closing
        raise FetchRefused("bad_response", "The server closed the connection before the page was complete.")
    return b"".join(chunks)


def exchange(
    target: Target,
    *,
    headers: dict[str, str],
    connect_timeout: float,
    deadline: Deadline,
    max_bytes: int,
    content_types: frozenset[str] | None,
    tls: ssl.SSLContext,
) -> Reply:
    """GET ``target``; the body is read only if it is not a redirect and its content type is allowed."""
    conn = _connect(target, connect_timeout, deadline, tls)
    sock = conn.sock  # kept: http.client drops conn.sock once a "Connection: close" reply has begun
    fired = threading.Event()

    def cut() -> None:
        fired.set()
        with contextlib.suppress(OSError):  # already closed: nothing left to cut
            sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(max(deadline.expires - time.monotonic(), 0), cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        sock.settimeout(deadline.remaining())
        conn.request("GET", target.path, headers=headers)
        response = conn.getresponse()
        if response.status in REDIRECT_STATUSES:
            return Reply(response.status, response.headers, b"")
        _check_head(response, max_bytes, content_types)
        body = _read_body(response, max_bytes, _size_text(max_bytes))
        if fired.is_set():  # a body cut short by the watchdog is a timeout, not a short page
            raise deadline.passed()
        return Reply(response.status, response.headers, body)
    except FetchRefused as refusal:
        if fired.is_set() and refusal.reason != "timeout":
            raise deadline.passed() from refusal
        raise
    except (OSError, http.client.HTTPException) as exc:
        if fired.is_set() or isinstance(exc, TimeoutError):
            raise deadline.passed() from exc
        raise FetchRefused("bad_response", f"The server at {target.host} did not answer properly.") from exc
    finally:
        watchdog.cancel()
        conn.close()


def _check_head(
    response: http.client.HTTPResponse, max_bytes: int, content_types: frozenset[str] | None
) -> None:
    encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
    if encoding != "identity":
        # We ask for identity; decompressing what we did not ask for invites zip bombs.
        message = f"The page came compressed ({encoding}), which we do not read."
        raise FetchRefused("encoding_not_allowed", message)
    if content_types is not None:
        if response.getheader("Content-Type") is None:
            message = "The page does not say what kind of content it is."
            raise FetchRefused("content_type_not_allowed", message)
        content_type = response.headers.get_content_type()
        if content_type not in content_types:
            raise FetchRefused(
                "content_type_not_allowed",
                f"Pages of type {content_type} are not fetched (only {', '.join(sorted(content_types))}).",
            )
    declared = response.getheader("Content-Length")
    if declared and declared.strip().isdigit() and int(declared) > max_bytes:
        raise FetchRefused("too_large", f"The page is larger than {_size_text(max_bytes)}.")


def _size_text(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):g} MB"
    if size >= 1024:
        return f"{size / 1024:g} KB"
    return f"{size} bytes"
