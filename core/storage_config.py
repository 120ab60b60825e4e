"""The ``STORAGES`` entries for the files the app produces, read from the environment (settings.py calls
``produced_file_storages``; the backends are in ``core/storage.py``).

Three named storages: ``exports`` (finished export files), ``models`` (trained model folders, one per run)
and ``imports`` (corpus uploads waiting for their import job). ``STORAGE_BACKEND=local`` (the default) keeps
them in folders of this machine, as ``make run`` always has; ``s3`` puts them in a private bucket of any
S3-compatible service (AWS S3, MinIO, ...), under ``S3_PREFIX``. Every bad value stops start-up with
``ImproperlyConfigured`` naming the variable.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from core.env import env_int, env_str

LOCAL_BACKEND = "core.storage.LocalStorage"
OBJECT_BACKEND = "core.storage.ObjectStorage"
# alias: (the setting naming its local root, the folder under it; also the folder under S3_PREFIX)
FOLDERS = {
    "exports": ("MEDIA_ROOT", "exports"),
    "models": ("MODEL_STORE_DIR", "runs"),
    "imports": ("MEDIA_ROOT", "corpus-imports"),
}
OBJECT_FOLDERS = {"exports": "exports", "models": "models", "imports": "corpus-imports"}
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")  # S3's rules for new buckets
_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
MAX_URL_SECONDS = 7 * 24 * 3600  # the longest a SigV4 presigned URL may live


def storage_backend() -> str:
    backend = (env_str("STORAGE_BACKEND") or "local").strip().lower()
    if backend not in ("local", "s3"):
        raise ImproperlyConfigured(f"STORAGE_BACKEND: expected local or s3, got {backend!r}")
    return backend


def produced_file_storages() -> dict[str, dict]:
    """``{"exports": {...}, "models": {...}, "imports": {...}}`` for settings.STORAGES."""
    if storage_backend() == "local":
        return {
            alias: {"BACKEND": LOCAL_BACKEND, "OPTIONS": {"setting": setting, "folder": folder}}
            for alias, (setting, folder) in FOLDERS.items()
        }
    options = _bucket_options()
    prefix = _prefix()
    locations = {
        alias: f"{prefix}/{folder}" if prefix else folder for alias, folder in OBJECT_FOLDERS.items()
    }
    return {
        alias: {"BACKEND": OBJECT_BACKEND, "OPTIONS": options | {"location": where, "cache_folder": alias}}
        for alias, where in locations.items()
    }


def _bucket_options() -> dict:
    """django-storages' S3Storage options: a private bucket (no ACL on any object: they inherit the
    bucket's, which must not be public), downloads only through presigned URLs."""
    bucket = (env_str("S3_BUCKET") or "").strip()
    if not _BUCKET.match(bucket):
        raise ImproperlyConfigured(
            f"S3_BUCKET: required with STORAGE_BACKEND=s3; expected a bucket name (3-63 lower-case letters, "
            f"digits, dots, hyphens), got {bucket!r}"
        )
    endpoint = (env_str("S3_ENDPOINT_URL") or "").strip() or None
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ImproperlyConfigured(
                f"S3_ENDPOINT_URL: expected http(s)://HOST[:PORT] (MinIO and other S3-compatible servers; "
                f"unset for AWS), got {endpoint!r}"
            )
    key_id = (env_str("S3_ACCESS_KEY_ID") or "").strip() or None  # or S3_ACCESS_KEY_ID_FILE
    secret = (env_str("S3_SECRET_ACCESS_KEY") or "").strip() or None  # or S3_SECRET_ACCESS_KEY_FILE
    if bool(key_id) != bool(secret):
        raise ImproperlyConfigured(
            "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY: give both, or neither (then boto3's own chain: "
            "an instance role, AWS_* variables, ~/.aws)"
        )
    region = (env_str("S3_REGION") or "us-east-1").strip()
    if not re.fullmatch(r"[a-z0-9-]+", region):
        raise ImproperlyConfigured(f"S3_REGION: expected a region name like eu-west-1, got {region!r}")
    expire = env_int("S3_URL_EXPIRE_SECONDS", 300, minimum=10)
    if expire > MAX_URL_SECONDS:
        raise ImproperlyConfigured(f"S3_URL_EXPIRE_SECONDS: at most {MAX_URL_SECONDS} (7 days), got {expire}")
    return {
        "bucket_name": bucket,
        "endpoint_url": endpoint,
        "region_name": region,
        "access_key": key_id,
        "secret_key": secret,
        "default_acl": None,
        "querystring_auth": True,
        "querystring_expire": expire,
        "file_overwrite": True,
        "signature_version": "s3v4",
        # MinIO and other self-hosted servers answer on one host name: the bucket goes in the path.
        "addressing_style": "path" if endpoint else "virtual",
    }


def _prefix() -> str:
    prefix = (env_str("S3_PREFIX") or "").strip().strip("/")
    if prefix and (not _PREFIX.match(prefix) or {".", ".."} & set(prefix.split("/"))):
        raise ImproperlyConfigured(
            f"S3_PREFIX: expected folder names (letters, digits, '.', '_', '-') joined by '/', got {prefix!r}"
        )
    return prefix
