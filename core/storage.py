"""Where produced files live: finished exports, trained model folders and corpus uploads, each in a named
Django storage (``exports``, ``models``, ``imports``; settings.STORAGES, built by ``storage_config``).

The one place that knows local from object storage. Both backends offer the same few operations beyond
Django's storage API, so callers (the export job, the training job, the model loaders, the corpus
import) never ask which one they have:

- ``publish_file`` / ``publish_folder``: a finished file or folder written on this machine becomes the
  stored one, whole or not at all;
- ``cached_file`` / ``local_folder`` / ``local_copy``: a path on this machine to read it from;
- ``download_response``: what a permitted download answers; ``delete_folder``; ``describe`` (for people).

``LocalStorage`` is a folder (``make run``, one machine, or a shared file system): files are renamed into
place and read where they are, no copies. ``ObjectStorage`` is a private S3 bucket (AWS S3, MinIO, ...):
uploads stream from disk in parts, readers download once into this machine's ``STORAGE_CACHE_DIR``, and
browsers download through a short-lived presigned URL that the web app hands out after its permission
check (docs/deployment.md, "Object storage").
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError
from django.conf import settings
from django.core.files.storage import FileSystemStorage, storages
from django.http import FileResponse, HttpResponse, HttpResponseRedirect
from django.utils.functional import cached_property
from django.utils.http import content_disposition_header
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

from core import storage_cache
from core.storage_cache import MANIFEST

EXPORTS, MODELS, IMPORTS = "exports", "models", "imports"
MB = 1024 * 1024
# Transfers in 8 MB parts, 4 at a time (a file up to 80 GB in S3's 10,000 parts), and at most 16 chunks of
# 256 KB waiting to be written to disk on a download: a transfer's memory stays around 10 MB whatever the
# file's size (tests/test_object_storage.py measures it).
TRANSFERS = TransferConfig(
    multipart_threshold=8 * MB, multipart_chunksize=8 * MB, max_concurrency=4, max_io_queue=16
)


def get_storage(alias: str) -> LocalStorage | ObjectStorage:
    """The storage named ``alias`` (EXPORTS, MODELS or IMPORTS)."""
    return storages[alias]


def check_reachable() -> None:
    """Raise unless every storage can be written (a folder) or reached (the bucket): for ``/readyz``."""
    for alias in (EXPORTS, MODELS, IMPORTS):
        get_storage(alias).check()


class LocalStorage(FileSystemStorage):
    """A folder of this machine: ``folder`` under the path in setting ``setting`` (MEDIA_ROOT or
    MODEL_STORE_DIR), read when first used, so a changed setting (a test's) moves it."""

    def __init__(self, setting: str = "MEDIA_ROOT", folder: str = "", **options) -> None:
        super().__init__(**options)
        self.setting, self.folder = setting, folder

    @cached_property
    def base_location(self) -> str:
        return os.path.join(getattr(settings, self.setting), self.folder)

    def _clear_cached_properties(self, setting: str, **kwargs) -> None:
        super()._clear_cached_properties(setting, **kwargs)
        if setting == self.setting:
            self.__dict__.pop("base_location", None)
            self.__dict__.pop("location", None)

    def scratch_dir(self) -> Path:
        """Where a job writes a file before publishing it: the folder itself, so publishing is a rename."""
        path = Path(self.location)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def check(self) -> None:
        with tempfile.NamedTemporaryFile(dir=self.scratch_dir(), prefix=".readyz-"):
            pass

    def publish_file(self, name: str, path: Path) -> None:
        """``path`` (in ``scratch_dir``) becomes ``name`` in one atomic rename."""
        os.replace(path, self.path(name))

    def publish_folder(self, name: str, folder: Path) -> str:
        """``folder`` becomes ``name`` (a rename, or nothing when the job wrote it in place); where it is."""
        target = Path(self.path(name))
        if Path(folder).resolve() != target.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(folder, target)
        return str(target)

    def cached_file(self, name: str, sha256: str = "") -> Path:
        """The file where it is (its folder created on first use, as publishing would)."""
        self.scratch_dir()
        return Path(self.path(name))

    @contextmanager
    def local_copy(self, name: str) -> Iterator[Path]:
        yield Path(self.path(name))

    def local_folder(self, name: str) -> Path:
        return Path(self.path(name))

    def download_response(self, name: str, filename: str) -> HttpResponse:
        """The file itself; FileNotFoundError when it is gone."""
        return FileResponse(self.open(name, "rb"), as_attachment=True, filename=filename)

    def delete_folder(self, name: str) -> None:
        shutil.rmtree(self.path(_folder_name(name)), ignore_errors=True)  # path() refuses ../

    def abort_uploads(self, prefix: str) -> None:
        """Nothing to do: publishing into a folder is a rename, never left half done."""

    def describe(self, name: str) -> str:
        return self.path(name)


class ObjectStorage(S3Storage):
    """A folder (``location``: S3_PREFIX/exports, ...) of a private S3 bucket. ``cache_folder`` names this
    storage's part of STORAGE_CACHE_DIR on the machines that read from it."""

    def get_default_settings(self) -> dict:
        return super().get_default_settings() | {"cache_folder": "", "transfer_config": TRANSFERS}

    @property
    def client(self) -> Any:  # botocore's S3 client (a generated class)
        return self.connection.meta.client

    def key(self, name: str) -> str:
        return self._normalize_name(clean_name(name))

    def cache_dir(self) -> Path:
        return Path(settings.STORAGE_CACHE_DIR) / self.cache_folder

    def scratch_dir(self) -> Path:
        """Where a job writes a file before uploading it: local to this machine, beside the caches."""
        path = Path(settings.STORAGE_CACHE_DIR) / "scratch" / self.cache_folder
        path.mkdir(parents=True, exist_ok=True)
        return path

    def check(self) -> None:
        self.client.head_bucket(Bucket=self.bucket_name)

    def publish_file(self, name: str, path: Path) -> None:
        """Upload ``path`` as ``name``, then remove it. boto3's managed transfer reads the file from disk a
        part at a time (constant memory; multipart above 8 MB); a multipart object appears only on
        CompleteMultipartUpload, and a failed upload is aborted, so an interrupted one publishes nothing
        (a killed process leaves an invisible incomplete upload: the sweeper aborts it, ``abort_uploads``)."""
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self.client.upload_file(
            str(path),
            self.bucket_name,
            self.key(name),
            ExtraArgs={"ContentType": content_type},
            Config=self.transfer_config,
        )
        Path(path).unlink()

    def publish_folder(self, name: str, folder: Path) -> str:
        """Upload every file of ``folder`` under ``name/``, then its manifest (each file's size and sha256)
        last, then remove ``folder``; where it is. A folder without its manifest is incomplete and never
        read; a failed upload removes what it had sent."""
        manifest = storage_cache.manifest_of(Path(folder))
        try:
            for relative in manifest["files"]:
                self.publish_file(f"{name}/{relative}", Path(folder) / relative)
            body = json.dumps(manifest).encode()
            self.client.put_object(Bucket=self.bucket_name, Key=self.key(f"{name}/{MANIFEST}"), Body=body)
        except BaseException:
            self.delete_folder(name)
            raise
        shutil.rmtree(folder, ignore_errors=True)
        return self.describe(name)

    def cached_file(self, name: str, sha256: str = "") -> Path:
        """A copy on this machine, downloaded once per content (the file named by its sha256) and checked."""
        key = f"{sha256}{Path(name).suffix}" if sha256 else name
        return storage_cache.cached_file(
            self.cache_dir(), key, sha256, lambda target: self._fetch(name, target)
        )

    @contextmanager
    def local_copy(self, name: str) -> Iterator[Path]:
        """A temporary copy on this machine, removed when the block ends."""
        folder = Path(tempfile.mkdtemp(dir=self.scratch_dir(), prefix=storage_cache.TMP))
        try:
            target = folder / Path(name).name
            self._fetch(name, target)
            yield target
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def local_folder(self, name: str) -> Path:
        """A complete copy of the stored folder on this machine, downloaded once (keyed by its manifest, so a
        folder stored again under the same name is downloaded again)."""
        try:
            body = self.client.get_object(Bucket=self.bucket_name, Key=self.key(f"{name}/{MANIFEST}"))["Body"]
            raw = body.read()
        except ClientError as exc:
            if _not_found(exc):
                raise FileNotFoundError(f"{self.describe(name)}: no complete folder in the bucket") from None
            raise
        key = f"{Path(name).name}-{hashlib.sha256(raw).hexdigest()[:16]}"
        manifest = json.loads(raw)
        return storage_cache.cached_folder(
            self.cache_dir(),
            key,
            manifest,
            lambda relative, target: self._fetch(f"{name}/{relative}", target),
        )

    def download_response(self, name: str, filename: str) -> HttpResponse:
        """A redirect to a presigned URL for this one object, valid S3_URL_EXPIRE_SECONDS, that makes the
        browser save it as ``filename``; FileNotFoundError when the object is gone."""
        if not self.exists(name):
            raise FileNotFoundError(self.describe(name))
        disposition = content_disposition_header(as_attachment=True, filename=filename)
        response = HttpResponseRedirect(
            self.url(name, parameters={"ResponseContentDisposition": disposition})
        )
        response["Cache-Control"] = "private, no-store"  # the URL is a credential while it lives
        return response

    def delete_folder(self, name: str) -> None:
        """Every object under ``name/``, and every upload to it left unfinished by a killed process."""
        prefix = _folder_name(name) + "/"
        self.abort_uploads(prefix)
        self.bucket.objects.filter(Prefix=self.key(prefix)).delete()

    def abort_uploads(self, prefix: str) -> None:
        """Abort the unfinished multipart uploads of names starting with ``prefix`` (never empty): what a
        process killed mid-upload leaves, readable by nobody but stored (and billed) until aborted."""
        if not prefix.strip("/"):
            raise ValueError("abort_uploads: a prefix is required")
        pages = self.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket_name, Prefix=self.key(prefix)
        )
        for upload in (upload for page in pages for upload in page.get("Uploads", ())):
            self.client.abort_multipart_upload(
                Bucket=self.bucket_name, Key=upload["Key"], UploadId=upload["UploadId"]
            )

    def describe(self, name: str) -> str:
        return f"s3://{self.bucket_name}/{self.key(name)}"

    def _fetch(self, name: str, target: Path) -> None:
        """Download ``name`` to ``target`` (streamed to disk); FileNotFoundError when it is not stored."""
        try:
            self.client.download_file(
                self.bucket_name, self.key(name), str(target), Config=self.transfer_config
            )
        except ClientError as exc:
            if _not_found(exc):
                raise FileNotFoundError(f"{self.describe(name)}: not in the bucket") from None
            raise


def _folder_name(name: str) -> str:
    """A folder's name, never empty: deleting "" would delete every folder of the storage."""
    name = name.strip("/")
    if not name:
        raise ValueError("delete_folder: a folder name is required")
    return name


def _not_found(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    return error.get("Code") in ("404", "NoSuchKey", "NotFound") or (
        exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404
    )
