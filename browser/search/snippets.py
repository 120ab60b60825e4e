"""Plain-text result snippets: tantivy's SnippetGenerator picks the best ~200-character fragment.

The generator tokenises (and stems) the whole text it is given: ~0.5 ms for a 40 kB article, ten times
per results page. For long bodies we first cut windows around the first few occurrences of each query
word and of its stem (stems are mostly prefixes of the words they come from) and let the generator
choose among those; if that finds nothing we fall back to the whole body, then to the body's start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import islice

import tantivy

from browser.corpus.html_text import collapse_spaces
from browser.search.query import SEARCH_FIELD

SNIPPET_CHARS = 200
WINDOW = 300  # characters kept on each side of a token occurrence
OCCURRENCES = 3  # per token
SHORT_BODY = 5000  # below this, handing the generator the whole body is cheaper


def start_of(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The first ``limit`` characters of ``text`` on one line, cut at a word boundary."""
    text = collapse_spaces(text[: limit * 4])
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit + 1)
    return text[: cut if cut > limit // 2 else limit]


def _positions(body: str, tokens: Iterable[str]) -> list[int]:
    """Where the first OCCURRENCES of each lowercase token start in ``body``, case-insensitively."""
    lower = body.lower()
    found = []
    for token in dict.fromkeys(tokens):
        if len(lower) == len(body):  # str.find is far faster than re.I, when offsets agree
            pos = lower.find(token)
            for _ in range(OCCURRENCES):
                if pos < 0:
                    break
                found.append(pos)
                pos = lower.find(token, pos + len(token))
        else:  # lowercasing changed the length (a few rare letters do)
            matches = islice(re.finditer(re.escape(token), body, re.IGNORECASE), OCCURRENCES)
            found.extend(m.start() for m in matches)
    return sorted(found)


def windows(body: str, tokens: Iterable[str]) -> str | None:
    """The parts of ``body`` around the tokens, cut at spaces, one per line; None when none occurs."""
    spans: list[list[int]] = []
    for pos in _positions(body, tokens):
        start, end = max(0, pos - WINDOW), min(len(body), pos + WINDOW)
        if spans and start <= spans[-1][1]:
            spans[-1][1] = end
        else:
            spans.append([start, end])
    parts = []
    for start, end in spans:
        if start > 0:  # drop the partial words at the edges
            start = body.find(" ", start, end) + 1 or start
        if end < len(body):
            space = body.rfind(" ", start, end)
            end = space if space > start else end
        parts.append(body[start:end])
    return "\n".join(parts) if parts else None


def without_title(text: str, title: str) -> str:
    """``text`` less a leading copy of ``title`` (ignoring case and the spaces around it).

    Most pages start with their own title as a heading, so a snippet taken from the start repeated the
    result's title on the line under it: a wasted line for people and tokens for a model."""
    stripped = text.lstrip()
    head = stripped[: len(title)]
    rest = stripped[len(title) :]
    if title.strip() and head.casefold() == title.casefold() and not rest[:1].isalnum():
        return rest.lstrip()
    return text


def make_snippet(
    generator: tantivy.SnippetGenerator, body: str, tokens: Iterable[str], *, title: str = ""
) -> str:
    """About SNIPPET_CHARS characters of ``body`` around the query's terms, as one line of plain text.

    The page's leading heading (its ``title``) is left out, not the title wherever it occurs: further
    down it is part of a sentence ("Miss Grand International 2022 was the 10th edition...")."""
    body = without_title(body, title)
    sources = [body]
    if len(body) > SHORT_BODY:
        reduced = windows(body, tokens)
        sources = [reduced, body] if reduced else [body]
    for source in sources:
        snippet = generator.snippet_from_doc(tantivy.Document(**{SEARCH_FIELD: source}))
        if snippet.highlighted():
            return collapse_spaces(snippet.fragment())
    return start_of(body)
