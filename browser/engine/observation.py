"""The pieces of the text a model sees (WebGPT, Figure 1b: the browser puts them together in
``Browser.observation``) and the answer prompt. Byte-exact formats."""

from __future__ import annotations

import re
from collections.abc import Sequence

from browser.engine.page import Quote

ANSWER_SEPARATOR = "■"
_SCROLLBAR = re.compile(r"^♦Scrollbar: (\d+) - (\d+)$", re.MULTILINE)


def format_quote(quote: Quote) -> str:
    source = f"{quote.title} ({quote.domain})" if quote.domain else quote.title
    extract = "\n".join(f"> {line}" for line in quote.extract.split("\n"))
    return f"From {source}\n{extract}"


def format_answer_prompt(question: str, quotes: Sequence[Quote]) -> str:
    """``<question>■`` then ``[n] <title> (<domain>)\\n\\n<extract>■`` for each quote, numbered from 1."""
    parts = [f"{question}{ANSWER_SEPARATOR}"]
    for number, quote in enumerate(quotes, start=1):
        source = f"{quote.title} ({quote.domain})" if quote.domain else quote.title
        parts.append(f"[{number}] {source}\n\n{quote.extract}{ANSWER_SEPARATOR}")
    return "".join(parts)


def scrollbar_of(observation: str) -> tuple[int, int] | None:
    """The first and last visible line an observation shows (its ``♦Scrollbar`` section), or None."""
    match = _SCROLLBAR.search(observation)
    return (int(match.group(1)), int(match.group(2))) if match else None
