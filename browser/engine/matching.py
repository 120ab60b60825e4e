"""Find and Quote against a page's running text (link markup reduced to the link text).

Find ignores case. Quote ignores case and whitespace, and ``start━end`` quotes everything from the
first match of ``start`` to the first match of ``end`` after it. Extracts keep the page's own spelling.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

QUOTE_RANGE = "━"


def find(text: str, needle: str, start: int = 0) -> int | None:
    """Offset of the first case-insensitive match at or after ``start``, wrapping around; None if absent."""
    haystack, target = text.casefold(), needle.casefold()
    if len(haystack) != len(text) or not target:
        return _find_slow(text, needle, start)
    position = haystack.find(target, start)
    if position < 0:
        position = haystack.find(target)
    return position if position >= 0 else None


def _find_slow(text: str, needle: str, start: int) -> int | None:
    # casefold() may change lengths (ß -> ss); fall back to matching on the whitespace-free index.
    span = _match(text, needle, start) or _match(text, needle, 0)
    return span[0] if span else None


def quote_span(text: str, quote: str) -> tuple[int, int] | None:
    """The [start, end) of ``quote`` in ``text``, or None when it is not on the page."""
    if QUOTE_RANGE in quote:
        head, _, tail = quote.partition(QUOTE_RANGE)
        first = _match(text, head, 0)
        if first is None:
            return None
        last = _match(text, tail, first[1])
        return (first[0], last[1]) if last else None
    return _match(text, quote, 0)


# str.isspace's characters: none lies above U+3000 (tests/test_browser_matching.py checks every code point).
SPACES = np.array([code for code in range(0x3001) if chr(code).isspace()], dtype=np.uint32)


@lru_cache(maxsize=16)  # the same page is matched again and again within an episode
def _compact(text: str) -> tuple[str, np.ndarray]:
    """``text`` without whitespace and case-folded, with each compact character's offset in ``text``."""
    folded = text.casefold()
    if len(folded) == len(text):
        # Every character folds to one (casefold never drops one): the offsets come from an array of code
        # points, not a Python loop over the page (6-15 ms a Quote on a long article).
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        return "".join(folded.split()), np.flatnonzero(~np.isin(codes, SPACES))
    chars: list[str] = []
    positions: list[int] = []
    for offset, char in enumerate(text):
        if char.isspace():
            continue
        for one in char.casefold():
            chars.append(one)
            positions.append(offset)
    return "".join(chars), np.array(positions, dtype=np.int64)


def _match(text: str, needle: str, start: int) -> tuple[int, int] | None:
    compact_text, offsets = _compact(text)
    compact_needle, _ = _compact(needle)
    if not compact_needle:
        return None
    begin = int(np.searchsorted(offsets, start))  # the first compact character at or after ``start``
    position = compact_text.find(compact_needle, begin)
    if position < 0:
        return None
    return int(offsets[position]), int(offsets[position + len(compact_needle) - 1]) + 1
