"""Bytes of a text page -> str, choosing the encoding the way browsers do (WHATWG, simplified).

Order: a byte-order mark, then the charset in the Content-Type header, then (HTML only) a <meta> charset
in the first 4 KB, then UTF-8 if the bytes are valid UTF-8, else windows-1252. Like browsers, "latin-1"
and "ascii" labels mean windows-1252 (pages so labelled use its curly quotes in 0x80-0x9F). Bad bytes
become U+FFFD; decoding never fails.
"""

from __future__ import annotations

import codecs
import re

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_SNIFF_BYTES = 4096
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_AS_WINDOWS_1252 = frozenset({"latin_1", "ascii", "cp1252"})
# Text codecs that are not page encodings; utf-7 was a classic way to smuggle markup past filters.
_REFUSED = frozenset({"unicode_escape", "raw_unicode_escape", "idna", "punycode", "utf_7", "undefined"})


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name.replace("-", "_")
    except LookupError:
        return None
    if name in _REFUSED:
        return None
    if name in _AS_WINDOWS_1252 or name == "iso8859_1":
        return "cp1252"
    return name


def _meta_charset(body: bytes) -> str | None:
    match = _META_CHARSET.search(body[:_SNIFF_BYTES])
    if not match:
        return None
    name = _codec(match.group(1).decode("ascii"))
    # A <meta> that claims UTF-16 was itself read as ASCII bytes, so it cannot be true (WHATWG: UTF-8).
    return "utf-8" if name and name.startswith("utf_16") else name


def decode_text(body: bytes, declared: str | None, *, html: bool) -> tuple[str, str]:
    """(text, the encoding used) for a page whose Content-Type charset is ``declared``."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(name, errors="replace"), name
    name = _codec(declared) or (_meta_charset(body) if html else None)
    if name:
        try:
            return body.decode(name, errors="replace"), name
        except LookupError:  # a codec that exists but is not a text encoding (say, base64)
            pass
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace"), "cp1252"
