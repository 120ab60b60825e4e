"""A small web on 127.0.0.1 for the live-provider tests: a SearXNG-compatible JSON API, a Brave-compatible
one, and the pages their results point at, served by a real HTTP server in a thread.

    with FakeWeb() as web:
        web.url                      # "http://127.0.0.1:PORT"
        web.searxng_url              # what SEARXNG_URL names (the API lives at /searxng/search)
        web.brave_url                # what BRAVE_API_URL names; the key is web.BRAVE_KEY
        web.requests                 # every request's path, in order
        web.stop()                   # "the network is gone": nothing answers any more

Searches match words of the query against the pages' text (any word, ranked by how many match). Queries
containing a trigger word misbehave: "ratelimited" (429), "broken" (500), "garbled" (not JSON),
"sluggish" (answers after 3 s). Pages link to each other, to a blocklisted site, and to a cloud-metadata
address that the fetcher must refuse even with loopback allowed for tests.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PAGES = {
    "aurora": (
        "Aurora borealis",
        "<p>The aurora borealis is a natural light display seen in high-latitude regions. It is caused by "
        "charged particles from the solar wind striking the upper atmosphere, mostly oxygen and nitrogen.</p>"
        '<p>See also <a href="/wiki/solar-wind">the solar wind</a>, '
        '<a href="https://www.reddit.com/r/aurora">a forum thread</a> and '
        '<a href="http://169.254.169.254/latest/meta-data/">instance metadata</a>.</p>',
    ),
    "solar-wind": (
        "Solar wind",
        "<p>The solar wind is a stream of charged particles released from the upper atmosphere of the Sun, "
        'called the corona. It shapes the aurora. Back to <a href="/wiki/aurora">the aurora</a>.</p>',
    ),
    "wikipedia": (
        "Wikipedia",
        "<p>Wikipedia is a free online encyclopedia written and maintained by a community of volunteers.</p>",
    ),
    "tides": (
        "Tides",
        "<p>Tides are the rise and fall of sea levels caused by the gravitational forces exerted by the Moon "
        "and the Sun and the rotation of the Earth.</p>",
    ),
}
_WORD = re.compile(r"[a-z0-9]+")


def page_html(title: str, body: str) -> str:
    return f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>{body}</main></body></html>"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.web.requests.append(self.path)
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if url.path == "/searxng/search":
                self.searxng(query)
            elif url.path == "/brave/res/v1/web/search":
                self.brave(query)
            elif url.path.startswith("/wiki/") and url.path[6:] in PAGES:
                title, body = PAGES[url.path[6:]]
                self.send(200, page_html(title, body).encode(), "text/html; charset=utf-8")
            else:
                self.send(404, b"not found", "text/plain")

    def send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def misbehaves(self, text: str) -> bool:
        if "sluggish" in text:
            time.sleep(3)
        for word, status, body, kind in (
            ("ratelimited", 429, b'{"error": "slow down"}', "application/json"),
            ("broken", 500, b'{"error": "oops"}', "application/json"),
            ("garbled", 200, b"<html>not json</html>", "text/html"),
        ):
            if word in text:
                self.send(status, body, kind)
                return True
        return False

    def hits(self, text: str) -> list[tuple[str, str, str]]:
        words = set(_WORD.findall(text.lower()))
        scored = []
        for slug, (title, body) in PAGES.items():
            plain = re.sub(r"<[^>]+>", " ", body)
            score = len(words & set(_WORD.findall(f"{title} {plain}".lower())))
            if score:
                scored.append((-score, slug, title, plain.split(".")[0].strip()))
        return [
            (f"{self.server.web.url}/wiki/{slug}", title, lead) for _, slug, title, lead in sorted(scored)
        ]

    def searxng(self, query: dict[str, str]) -> None:
        text = query.get("q", "")
        if query.get("format") != "json":
            self.send(403, b"format not enabled", "text/plain")
            return
        if self.misbehaves(text):
            return
        results = [{"url": u, "title": t, "content": c, "engine": "fake"} for u, t, c in self.hits(text)]
        results.append({"url": "ftp://files.example/readme", "title": "Not a web page", "content": "ftp"})
        results.append(
            {"url": "https://old.reddit.com/r/x/1", "title": "A forum thread", "content": "thread"}
        )
        answer = {"query": text, "number_of_results": len(results), "results": results}
        self.send(200, json.dumps(answer).encode(), "application/json")

    def brave(self, query: dict[str, str]) -> None:
        if self.headers.get("X-Subscription-Token") != FakeWeb.BRAVE_KEY:
            self.send(401, b'{"error": "bad key"}', "application/json")
            return
        text = query.get("q", "")
        if self.misbehaves(text):
            return
        count = int(query.get("count", 20))
        results = [
            {"url": u, "title": f"<strong>{t}</strong>", "description": f"{c} &amp; more"}
            for u, t, c in self.hits(text)[:count]
        ]
        self.send(
            200, json.dumps({"type": "search", "web": {"results": results}}).encode(), "application/json"
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    web: FakeWeb


class FakeWeb:
    BRAVE_KEY = "test-brave-key-not-a-secret"

    def __init__(self) -> None:
        self.requests: list[str] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.web = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.searxng_url = f"{self.url}/searxng"
        self.brave_url = f"{self.url}/brave/res/v1/web/search"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeWeb:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.stop()

    def count(self, prefix: str) -> int:
        return sum(1 for path in self.requests if path.startswith(prefix))
