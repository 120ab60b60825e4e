"""The safe fetcher against real HTTP servers on 127.0.0.1: what it fetches, and everything it refuses.

Tests that fetch from the page server allow loopback explicitly (``served()``); the tests under "default
settings" use ``FetchSettings()`` and prove that loopback, private and metadata addresses are refused
however they are spelled, before any connection is made (the page server sees no request).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import shlex
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from pypdf import PdfReader, PdfWriter

from browser.fetch import FetchRefused, FetchSettings, SafeFetcher, refusal_counts
from browser.fetch.addresses import address_problem

HTML = "<html><head><title>Café</title></head><body><p>Crème brûlée</p></body></html>"
# "café “quoted”" in windows-1252: 0x93/0x94 are curly quotes there, control characters in real latin-1.
LEGACY = b"caf\xe9 \x93quoted\x94"


def _pdf_bytes() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(width=72, height=72)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


PDF = _pdf_bytes()


class PageHandler(BaseHTTPRequestHandler):
    """Pages with redirects, slow and huge bodies, odd encodings and a PDF; every request is logged."""

    server: PageServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self.server.log.append((self.path, self.headers["Host"], self.headers["User-Agent"]))
        url = urlsplit(self.path)
        route = url.path.strip("/").split("/")
        page = getattr(self, "page_" + route[0].replace("-", "_").replace(".", "_"), self.page_missing)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the fetcher hung up, as it should
            page(*route[1:], **{k: v[0] for k, v in parse_qs(url.query).items()})

    def send(
        self, body: bytes, content_type: str | None = "text/html; charset=utf-8", **headers: str
    ) -> None:
        self.send_response(200)
        if content_type:
            self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def redirect(self, location: str | None, status: int = 302) -> None:
        self.send_response(status)
        if location is not None:
            self.send_header("Location", location)
        self.end_headers()

    def page_missing(self, *args: str, **kwargs: str) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()

    def page_page(self) -> None:
        self.send(HTML.encode())

    def page_private(self) -> None:
        self.send(b"<p>not for robots</p>")

    def page_robots_txt(self) -> None:
        self.send(b"User-agent: *\nDisallow: /private\n", "text/plain")

    def page_redirect(self, hops: str) -> None:
        self.redirect(f"/redirect/{int(hops) - 1}" if int(hops) > 1 else "/page", 301)

    def page_to(self, url: str) -> None:
        self.redirect(url)

    def page_nowhere(self) -> None:
        self.redirect(None)

    def page_slow(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        for _ in range(1000):
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(0.05)

    def page_stall(self) -> None:
        time.sleep(3)

    def page_huge(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        for _ in range(320):  # 20 MB, without a Content-Length
            self.wfile.write(b"x" * 65536)

    def page_huge_declared(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(10**9))
        self.end_headers()

    def page_short(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(b"only ten b")

    def page_image(self) -> None:
        self.send(b"\x89PNG\r\n", "image/png")

    def page_untyped(self) -> None:
        self.send(b"what am I", None)

    def page_gzip(self) -> None:
        self.send(b"\x1f\x8b", "text/html", Content_Encoding="gzip")

    def page_latin1_header(self) -> None:
        self.send(LEGACY, "text/html; charset=ISO-8859-1")

    def page_latin1_meta(self) -> None:
        self.send(b'<html><head><meta charset="iso-8859-1"></head><body>' + LEGACY, "text/html")

    def page_utf8_undeclared(self) -> None:
        self.send("café “quoted”".encode(), "text/plain")

    def page_legacy_undeclared(self) -> None:
        self.send(LEGACY, "text/plain")

    def page_doc_pdf(self) -> None:
        self.send(PDF, "application/pdf")


class PageServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), PageHandler)
        self.log: list[tuple[str, str, str]] = []  # (path, Host, User-Agent) of every request

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # TLS handshakes the fetcher rightly aborts


def _serve(httpd: PageServer) -> Iterator[PageServer]:
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def server() -> Iterator[PageServer]:
    yield from _serve(PageServer())


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for the name "localhost" only (no IP address in it)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    command = (
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
        f" -addext subjectAltName=DNS:localhost -keyout {shlex.quote(str(key))} -out {shlex.quote(str(cert))}"
    )
    subprocess.run(shlex.split(command), check=True, capture_output=True)
    return cert, key


@pytest.fixture(scope="module")
def tls_server(certificate: tuple[Path, Path]) -> Iterator[PageServer]:
    httpd = PageServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    yield from _serve(httpd)


@pytest.fixture
def base(server: PageServer) -> str:
    server.log.clear()
    return f"http://127.0.0.1:{server.server_port}"


def served(**overrides: object) -> SafeFetcher:
    """A fetcher that may reach the page server: loopback allowed, robots and spacing off unless asked."""
    options: dict[str, object] = {"allow_loopback": True, "check_robots": False, "min_interval": 0}
    options.update(overrides)
    return SafeFetcher(FetchSettings(**options))  # type: ignore[arg-type]


def refused(fetcher: SafeFetcher, url: str) -> FetchRefused:
    with pytest.raises(FetchRefused) as info:
        fetcher.fetch(url)
    return info.value


def paths(server: PageServer) -> list[str]:
    return [path for path, _host, _agent in server.log]


# --- Pages the fetcher reads --------------------------------------------------------------------------


def test_a_page_arrives_decoded_with_our_user_agent(server, base):
    result = served().fetch(f"{base}/page")

    assert (result.status, result.content_type, result.charset) == (200, "text/html", "utf_8")
    assert result.text == HTML
    assert result.url == f"{base}/page"
    assert result.redirects == ()
    [(path, host, agent)] = server.log
    assert (path, host) == ("/page", f"127.0.0.1:{server.server_port}")
    assert agent.startswith("WebGPT-platform-fetcher/")


def test_a_missing_page_is_a_result_with_its_status(base):
    assert served().fetch(f"{base}/nothing-here").status == 404


def test_redirects_are_followed_and_listed(base):
    result = served().fetch(f"{base}/redirect/3")

    assert result.text == HTML
    assert result.url == f"{base}/page"
    assert result.redirects == (f"{base}/redirect/2", f"{base}/redirect/1", f"{base}/page")


def test_five_redirects_are_followed_and_a_sixth_is_refused(server, base):
    assert len(served().fetch(f"{base}/redirect/5").redirects) == 5

    server.log.clear()
    refusal = refused(served(), f"{base}/redirect/6")

    assert refusal.reason == "too_many_redirects"
    assert "/page" not in paths(server)


def test_a_redirect_that_names_no_place_is_refused(base):
    assert refused(served(), f"{base}/nowhere").reason == "bad_redirect"


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("http://10.0.0.1/", "address_not_allowed"),
        ("http://169.254.169.254/latest/meta-data/", "address_not_allowed"),
        ("http://[::ffff:10.0.0.1]/", "address_not_allowed"),
        ("http://[fd00:ec2::254]/", "address_not_allowed"),
        # 0.0.0.0 reaches this host on Linux: refused even though loopback is allowed here.
        ("http://0.0.0.0:{port}/page", "address_not_allowed"),
        ("http://me@127.0.0.1:{port}/page", "credentials_in_url"),
        ("ftp://127.0.0.1/file", "scheme_not_allowed"),
        ("file:///etc/passwd", "scheme_not_allowed"),
    ],
)
def test_every_redirect_is_checked_like_the_first_address(server, base, location, reason):
    location = location.format(port=server.server_port)

    refusal = refused(served(), f"{base}/to?url={quote(location, safe='')}")

    assert refusal.reason == reason
    assert paths(server) == [f"/to?url={quote(location, safe='')}"]  # nothing after the redirect


def test_the_name_is_looked_up_once_and_the_connection_goes_to_that_address(server, base, monkeypatch):
    # DNS rebinding: a second lookup of the name would answer 10.0.0.1.
    real_getaddrinfo = socket.getaddrinfo
    answers = iter(["127.0.0.1", "10.0.0.1"])
    lookups = []

    def rebinding_dns(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real_getaddrinfo(host, port, *args, **kwargs)
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_dns)

    result = served().fetch(f"http://rebind.test:{server.server_port}/page")

    assert result.text == HTML
    assert lookups == ["rebind.test"]
    assert server.log[0][1] == f"rebind.test:{server.server_port}"


def test_https_checks_the_certificate_against_the_name_in_the_url(tls_server, certificate):
    port = tls_server.server_port
    fetcher = served(ca_file=str(certificate[0]))

    assert fetcher.fetch(f"https://localhost:{port}/page").text == HTML
    # Same server and address, but the certificate does not name 127.0.0.1.
    assert refused(fetcher, f"https://127.0.0.1:{port}/page").reason == "connection_failed"
    # A certificate nobody we trust signed.
    refusal = refused(served(), f"https://localhost:{port}/page")
    assert refusal.reason == "connection_failed"
    assert "CERTIFICATE_VERIFY_FAILED" in refusal.message


def test_a_slow_body_runs_into_the_total_time_limit(base):
    assert refused(served(total_timeout=0.5), f"{base}/slow").reason == "timeout"


def test_a_server_that_never_answers_runs_into_the_total_time_limit(base):
    assert refused(served(total_timeout=0.5), f"{base}/stall").reason == "timeout"


def test_a_huge_body_is_cut_at_the_size_limit(base):
    refusal = refused(served(max_bytes=100_000), f"{base}/huge")

    assert refusal.reason == "too_large"
    assert "97.6562 KB" in refusal.message


def test_a_declared_huge_body_is_refused_before_reading(base):
    assert refused(served(), f"{base}/huge-declared").reason == "too_large"


def test_a_body_shorter_than_declared_is_refused(base):
    assert refused(served(), f"{base}/short").reason == "bad_response"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("image", "content_type_not_allowed"),
        ("untyped", "content_type_not_allowed"),
        ("gzip", "encoding_not_allowed"),
    ],
)
def test_content_we_do_not_read_is_refused(base, path, reason):
    assert refused(served(), f"{base}/{path}").reason == reason


def test_allowed_content_types_are_a_setting(base):
    fetcher = served(content_types=frozenset({"application/pdf"}))

    assert refused(fetcher, f"{base}/page").reason == "content_type_not_allowed"
    assert fetcher.fetch(f"{base}/doc.pdf").status == 200


@pytest.mark.parametrize(
    ("path", "text", "charset"),
    [
        ("latin1-header", "café “quoted”", "cp1252"),
        ("latin1-meta", "café “quoted”", "cp1252"),
        ("utf8-undeclared", "café “quoted”", "utf-8"),
        ("legacy-undeclared", "café “quoted”", "cp1252"),
    ],
)
def test_text_is_decoded_from_the_header_the_meta_tag_or_the_bytes(base, path, text, charset):
    result = served().fetch(f"{base}/{path}")

    assert result.text.endswith(text)
    assert result.charset == charset


def test_a_pdf_comes_back_as_bytes(base):
    result = served().fetch(f"{base}/doc.pdf")

    assert (result.content_type, result.text, result.charset) == ("application/pdf", None, None)
    assert len(PdfReader(io.BytesIO(result.body)).pages) == 1


def test_robots_txt_is_obeyed_when_checked_and_read_once(server, base):
    fetcher = served(check_robots=True)

    assert refused(fetcher, f"{base}/private").reason == "robots_disallowed"
    assert fetcher.fetch(f"{base}/page").text == HTML
    assert paths(server) == ["/robots.txt", "/page"]


def test_without_the_robots_check_robots_txt_is_not_read(server, base):
    assert served().fetch(f"{base}/private").status == 200
    assert paths(server) == ["/private"]


def test_one_host_is_fetched_at_most_once_per_interval(server, base):
    fetcher = served(min_interval=60)

    assert fetcher.fetch(f"{base}/redirect/2").text == HTML  # redirects within one fetch are not spaced
    refusal = refused(fetcher, f"{base}/page")
    assert refusal.reason == "rate_limited"
    assert "127.0.0.1" in refusal.message
    assert fetcher.fetch(f"http://localhost:{server.server_port}/page").text == HTML  # another host


def test_refusals_are_counted_per_reason(base):
    before = refusal_counts()

    refused(served(), f"{base}/image")
    refused(served(), f"{base}/image")
    refused(served(), "ftp://127.0.0.1/")

    after = refusal_counts()
    assert after["content_type_not_allowed"] - before.get("content_type_not_allowed", 0) == 2
    assert after["scheme_not_allowed"] - before.get("scheme_not_allowed", 0) == 1


# --- Default settings: nothing local, however it is spelled ---------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://localhost:{port}/page", "address_not_allowed"),
        ("http://127.0.0.1:{port}/page", "address_not_allowed"),
        ("http://2130706433:{port}/page", "address_not_allowed"),  # 127.0.0.1 as one decimal number
        ("http://0x7f.1:{port}/page", "address_not_allowed"),
        ("http://0177.0.0.1:{port}/page", "address_not_allowed"),
        ("http://[::ffff:127.0.0.1]:{port}/page", "address_not_allowed"),
        ("http://[::1]:{port}/page", "address_not_allowed"),
        ("http://0.0.0.0:{port}/page", "address_not_allowed"),
        ("http://10.0.0.1/", "address_not_allowed"),
        ("http://192.168.1.1/", "address_not_allowed"),
        ("http://169.254.169.254/latest/meta-data/", "address_not_allowed"),
        ("http://[fd00:ec2::254]/", "address_not_allowed"),
        ("http://example.com@127.0.0.1:{port}/page", "credentials_in_url"),
        ("http://127.0.0.1:{port}\\@example.com/page", "bad_url"),
        ("ftp://127.0.0.1/", "scheme_not_allowed"),
        ("file:///etc/passwd", "scheme_not_allowed"),
        ("gopher://127.0.0.1:6379/_FLUSHALL", "scheme_not_allowed"),
        ("http://:{port}/page", "bad_url"),
        ("http://./", "bad_url"),
        ("http://127.0.0.1:99999/", "bad_url"),
    ],
)
def test_default_settings_refuse_local_addresses_however_spelled(server, base, url, reason):
    refusal = refused(SafeFetcher(FetchSettings()), url.format(port=server.server_port))

    assert refusal.reason == reason
    assert server.log == []  # refused before connecting


def test_default_settings_refuse_a_name_that_resolves_to_loopback(server, base, monkeypatch):
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, port, *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))],
    )

    refusal = refused(SafeFetcher(FetchSettings()), f"http://intranet.example:{server.server_port}/page")

    assert refusal.reason == "address_not_allowed"
    assert refusal.message == "This address is not allowed (intranet.example: loopback address)."
    assert server.log == []


def test_a_name_with_one_public_and_one_loopback_address_is_refused(server, base, monkeypatch):
    def mixed(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", mixed)

    assert refused(SafeFetcher(FetchSettings()), "http://split.example/").reason == "address_not_allowed"


def test_an_unknown_name_is_refused():
    assert refused(SafeFetcher(FetchSettings()), "http://no-such-host.invalid/").reason == "name_not_resolved"


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),  # NAT64 of a public address
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "reserved"),  # carrier-grade NAT
        ("240.0.0.1", "private"),
        ("::", "unspecified"),
        ("168.63.129.16", "cloud metadata"),  # Azure's wireserver is a public address
    ],
)
def test_the_address_policy(address, problem):
    assert address_problem(ipaddress.ip_address(address)) == problem


def test_metadata_addresses_stay_refused_when_loopback_is_allowed():
    assert address_problem(ipaddress.ip_address("169.254.169.254"), allow_loopback=True) == "cloud metadata"
    assert address_problem(ipaddress.ip_address("::ffff:127.0.0.1"), allow_loopback=True) is None


# --- Settings ---------------------------------------------------------------------------------------------


def test_settings_come_from_django_with_a_fetch_prefix(settings):
    settings.FETCH_MAX_BYTES = 1234
    settings.FETCH_CHECK_ROBOTS = False

    read = FetchSettings.from_django()

    assert (read.max_bytes, read.check_robots, read.allow_loopback) == (1234, False, False)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_bytes": 0},
        {"total_timeout": 0},
        {"max_redirects": -1},
        {"content_types": frozenset()},
        {"user_agent": "bot\r\nX-Injected: 1"},
    ],
)
def test_nonsense_settings_are_rejected(bad):
    with pytest.raises(ValueError, match="FetchSettings"):
        FetchSettings(**bad)
