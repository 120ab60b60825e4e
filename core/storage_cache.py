"""Local copies of stored files on the machine that reads them (a worker), kept in a cache folder: an
export by its sha256, a model folder by its manifest. No Django here: the object storage backend
(``core/storage.py``) passes the function that downloads one object.

Each copy is downloaded once into a temporary name beside its place, checked (sizes and sha256), then
renamed into place: a reader sees a whole, verified copy or none. Two workers downloading at once each
finish their own temporary copy; the first rename wins and the other copy is thrown away. A crash leaves
only a ``.tmp-*`` entry, which the next download into that cache removes once it is a day old.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

MANIFEST = "storage-manifest.json"  # uploaded last: a folder without one is incomplete
TMP = ".tmp-"


def file_sha256(path: Path) -> str:
    """The file's sha256, read in blocks (constant memory)."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def manifest_of(folder: Path) -> dict:
    """Every file under ``folder`` (POSIX path relative to it) with its size and sha256."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST):
        relative = path.relative_to(folder).as_posix()
        files[relative] = {"size": path.stat().st_size, "sha256": file_sha256(path)}
    return {"version": 1, "files": files}


def manifest_files(manifest: dict) -> dict[str, dict]:
    """The manifest's files, each name checked to stay inside its folder (a manifest is read from a bucket
    that others may write to)."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise ValueError("the stored folder's manifest lists no files")
    for name in files:
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or ".." in parts or name == MANIFEST:
            raise ValueError(f"the stored folder's manifest names {name!r}, outside its folder")
    return files


def cached_file(cache: Path, key: str, sha256: str, download: Callable[[Path], None]) -> Path:
    """The cached copy named ``key`` in ``cache``, downloaded (``download(target)``) when missing and checked
    against ``sha256`` (a mismatch raises ValueError, nothing is kept). Without a sha256 nothing tells a
    stale copy from a good one: it is downloaded again each time."""
    target = cache / key
    if sha256 and target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    clear_stale(cache)
    handle, temp_name = tempfile.mkstemp(dir=cache, prefix=TMP)
    os.close(handle)
    temp = Path(temp_name)
    try:
        download(temp)
        if sha256 and file_sha256(temp) != sha256:
            raise ValueError(f"{key}: the downloaded copy does not have the recorded sha256 {sha256}")
        os.replace(temp, target)  # a file: whoever renames last wins, both copies are the same bytes
    finally:
        temp.unlink(missing_ok=True)
    return target


def cached_folder(cache: Path, key: str, manifest: dict, download: Callable[[str, Path], None]) -> Path:
    """The cached copy of a stored folder, named ``key`` in ``cache``; downloaded first when missing
    (``download(relative_name, target)`` for each file of the manifest), every file checked against it."""
    target = cache / key
    if (target / MANIFEST).is_file():
        return target
    files = manifest_files(manifest)
    cache.mkdir(parents=True, exist_ok=True)
    clear_stale(cache)
    temp = Path(tempfile.mkdtemp(dir=cache, prefix=TMP))
    try:
        for name, expected in files.items():
            path = temp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            download(name, path)
            if path.stat().st_size != expected["size"] or file_sha256(path) != expected["sha256"]:
                raise ValueError(f"{key}/{name}: the downloaded copy does not match the stored manifest")
        (temp / MANIFEST).write_text(json.dumps(manifest))  # written last: the copy is complete
        try:
            os.replace(temp, target)
        except OSError:  # another worker renamed its complete copy first (or a crash left a partial one)
            if not (target / MANIFEST).is_file():
                raise
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return target


def clear_stale(cache: Path, older_than_s: float = 24 * 3600) -> None:
    """Remove temporary copies a crashed download left in ``cache`` (a day old: none is still written)."""
    cutoff = time.time() - older_than_s
    for entry in cache.glob(f"{TMP}*"):
        try:
            if entry.stat().st_mtime >= cutoff:
                continue
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        except FileNotFoundError:  # another worker cleared it first
            pass
