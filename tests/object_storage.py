"""A real S3 API on 127.0.0.1 for tests: moto's server (``ThreadedMotoServer``) on a free port, in a process
of its own, so that what it keeps in memory (every object) never counts in a test's tracemalloc, and
workers in other processes reach it as they would reach MinIO. Each test gets its own bucket; the site is
switched to it through the same variables an operator sets (``storage_config.produced_file_storages``)."""

from __future__ import annotations

import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

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
