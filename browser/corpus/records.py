"""What every corpus reader produces, the one error they all raise, and how they read a folder's files.

Readers validate a whole file before anything is written to an index, so a bad row can reject the
import with a message that names the file and the line, and the index is never half-updated.

A folder's files are read through a descriptor of the folder, one path component at a time, never
following a symbolic link (O_NOFOLLOW): a corpus folder may come from a third-party archive whose links
point anywhere (the instance's secret key file), so a link is refused rather than read, and a file or
folder swapped for a link after the folder was listed is refused too (no check-then-open race).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

CONTENT_TYPES = ("text/html", "text/plain")
# The most bytes one page file (a folder's file, a FreshWiki article, a ZIM entry) may hold: each is read
# whole into memory, so this bounds one record's memory. Real pages are far smaller (a long Wikipedia
# article's HTML is about 2 MB). CORPUS_IMPORT_MAX_FILE_BYTES holds a .zip's members to the same default.
MAX_FILE_BYTES = 64 * 1024 * 1024
LINK_REFUSED = "is a symbolic link (links are not followed: nothing outside the folder is read)"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO put in place of a page returns at once (and is then refused) instead of
# waiting for a writer; it changes nothing for regular files.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass(frozen=True)
class CorpusRecord:
    """One page of a corpus: served at ``url``; ``content`` is HTML or plain text per ``content_type``."""

    url: str
    title: str
    content: str
    content_type: str  # "text/html" or "text/plain"

    def __post_init__(self) -> None:
        if self.content_type not in CONTENT_TYPES:
            raise ValueError(f"content_type must be one of {CONTENT_TYPES}, not {self.content_type!r}")


class CorpusFileError(ValueError):
    """A corpus file is unreadable or invalid; ``line`` is 0 when the problem is not tied to a line."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}: line {line}" if line else self.path
        super().__init__(f"{where}: {reason}")


def is_http_url(url: str) -> bool:
    """True for an absolute http(s) URL with a host and no whitespace (what the browser can serve)."""
    if not url or any(ch.isspace() for ch in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an invalid IPv6 literal
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class LinkFreeFolder:
    """A folder opened once, whose files are read without following any link below it (the folder's own
    path may pass through links: the caller chose it). Use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise CorpusFileError(str(path), 0, f"cannot read ({e.strerror or e})") from None

    def __enter__(self) -> LinkFreeFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def read(self, file: Path, max_bytes: int) -> bytes:
        """The bytes of ``file`` (a path below the folder); CorpusFileError naming it when it, or a folder
        on the way, is a link, when it is no regular file, or when it holds more than ``max_bytes``."""
        parts = file.relative_to(self.path).parts
        fd = os.dup(self._fd)
        for i, part in enumerate(parts):
            flags = _FILE_FLAGS if i == len(parts) - 1 else _DIR_FLAGS
            fd = _open_in(fd, part, flags, self.path.joinpath(*parts[: i + 1]))
        try:
            return _read_regular(fd, file, max_bytes)
        finally:
            os.close(fd)


def _open_in(dir_fd: int, name: str, flags: int, shown: Path) -> int:
    """``name`` opened inside the open folder ``dir_fd``, which this closes (the walk needs it no more)."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, dir_fd):
            raise CorpusFileError(str(shown), 0, LINK_REFUSED) from None
        raise CorpusFileError(str(shown), 0, f"cannot read ({e.strerror or e})") from None
    finally:
        os.close(dir_fd)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _read_regular(fd: int, path: Path, max_bytes: int) -> bytes:
    """All of the open file ``fd``, refused unless it is a regular file of at most ``max_bytes`` (checked
    before reading, and again while reading in case it grew since)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise CorpusFileError(str(path), 0, "is not a regular file")
    too_large = f"is larger than {max_bytes} bytes, the most one file may hold"
    if info.st_size > max_bytes:
        raise CorpusFileError(str(path), 0, too_large)
    step = min(info.st_size, max_bytes) + 1  # a file that kept its size: one read, then the end
    chunks, size = [], 0
    try:
        while chunk := os.read(fd, min(step, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise CorpusFileError(str(path), 0, too_large)
    except OSError as e:
        raise CorpusFileError(str(path), 0, f"cannot read ({e.strerror or e})") from None
    return b"".join(chunks)  # one chunk is returned as it is, not copied
