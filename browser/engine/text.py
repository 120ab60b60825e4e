"""Small text helpers shared by rendering, matching and censoring."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# 【 and 】 delimit links in the observation; the same characters in page text become look-alikes,
# and † (the field separator inside a link) in link text becomes ‡.
_LOOKALIKES = str.maketrans({"【": "〖", "】": "〗"})
_WORD = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")


def replace_lookalikes(text: str) -> str:
    return text.translate(_LOOKALIKES)


def link_text(text: str) -> str:
    return replace_lookalikes(text).replace("†", "‡")


def collapse_spaces(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def domain_of(url: str) -> str:
    """The host name of a URL, lower-cased ("" when there is none)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def is_blocked(domain: str, blocklist: tuple[str, ...]) -> bool:
    return any(domain == blocked or domain.endswith("." + blocked) for blocked in blocklist)


def words(text: str) -> list[str]:
    return [word.casefold() for word in _WORD.findall(text)]


def shares_ngram(text: str, others: list[str], n: int) -> bool:
    """True when ``text`` has ``n`` consecutive words that also occur consecutively in one of ``others``."""
    targets: set[tuple[str, ...]] = set()
    for other in others:
        tokens = words(other)
        targets.update(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    if not targets:
        return False
    tokens = words(text)
    return any(tuple(tokens[i : i + n]) in targets for i in range(len(tokens) - n + 1))
