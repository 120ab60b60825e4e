"""A real S3 API on 127.0.0.1 for tests: moto's server (``ThreadedMotoServer``) on a free port, in a process
of its own, so that what it keeps in memory (every object) never counts in a test's tracemalloc, and
workers in other processes reach it as they would reach MinIO. Each test gets its own bucket; the site is
switched to it through the same variables an operator sets (``storage_config.produced_file_storages``)."""

from __future__ import annotations

import http.client
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import boto3

SERVER = (
    "import sys\n"
    "from moto.server import ThreadedMotoServer\n"
    "server = ThreadedMotoServer('127.0.0.1', 0, verbose=False)\n"
    "server.start()\n"
    "print(server.get_host_and_port()[1], flush=True)\n"
    "sys.stdin.read()\n"  # until the test run closes our stdin
    "server.stop()\n"
)
KEYS = {"S3_ACCESS_KEY_ID": "test-key-id", "S3_SECRET_ACCESS_KEY": "test-secret"}


class S3Server:
    """``with S3Server() as server: server.url``; stopped when the block ends."""

    def __enter__(self) -> S3Server:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # its request log
            text=True,
        )
        port = self.process.stdout.readline().strip()
        if not port.isdigit():
            self.process.kill()
            raise RuntimeError("moto's server did not start")
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass
class Bucket:
    """One test's bucket on the server, and the variables that point the site (or a worker) at it."""

    url: str
    name: str
    cache: Path
    prefix: str = "webgpt"
    client: object = field(init=False)

    def __post_init__(self) -> None:
        self.client = boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=KEYS["S3_ACCESS_KEY_ID"],
            aws_secret_access_key=KEYS["S3_SECRET_ACCESS_KEY"],
        )
        self.client.create_bucket(Bucket=self.name)

    @property
    def env(self) -> dict[str, str]:
        return {
            "STORAGE_BACKEND": "s3",
            "S3_BUCKET": self.name,
            "S3_ENDPOINT_URL": self.url,
            "S3_REGION": "us-east-1",
            "S3_PREFIX": self.prefix,
            "STORAGE_CACHE_DIR": str(self.cache),
            **KEYS,
        }

    def keys(self, under: str = "") -> list[str]:
        """The keys of every object in the bucket under S3_PREFIX/``under``, without the S3_PREFIX."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=f"{self.prefix}/{under}"
        )
        found = [entry["Key"] for page in pages for entry in page.get("Contents", ())]
        return sorted(key.removeprefix(f"{self.prefix}/") for key in found)

    def unfinished_uploads(self) -> list[str]:
        return [u["Key"] for u in self.client.list_multipart_uploads(Bucket=self.name).get("Uploads", ())]


def new_bucket(url: str, cache: Path) -> Bucket:
    return Bucket(url, f"webgpt-test-{secrets.token_hex(4)}", cache)


class StallingProxy:
    """An HTTP proxy in front of the S3 server, for a worker's S3_ENDPOINT_URL: it forwards every request
    as it is, except those for which ``hold(method, target)`` is true, which it never answers, as a network
    that stopped mid-transfer would (``held`` is set when the first one arrives). So a test can kill a
    worker at a known point of an upload. ``with StallingProxy(url, hold) as proxy: proxy.url``."""

    def __init__(self, upstream: str, hold: Callable[[str, str], bool]) -> None:
        self.upstream = urlsplit(upstream)
        self.hold = hold
        self.held = threading.Event()
        self.release = threading.Event()

    def __enter__(self) -> StallingProxy:
        proxy = self

        class Forward(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                if proxy.hold(self.command, self.path):
                    proxy.held.set()
                    proxy.release.wait()
                    self.close_connection = True
                    return
                body = self._body()
                upstream = http.client.HTTPConnection(proxy.upstream.netloc, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "transfer-encoding"}
                headers["Content-Length"] = str(len(body))
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                content = answer.read()
                self.send_response(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(content)
                upstream.close()

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while size := int(self.rfile.readline().split(b";")[0], 16):
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
