"""The text a model sees (WebGPT, Figure 1b) and the answer prompt. Byte-exact formats."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from browser.engine.page import Quote

if TYPE_CHECKING:
    from browser.engine.browser import Browser

ANSWER_SEPARATOR = "■"
_SCROLLBAR = re.compile(r"^♦Scrollbar: (\d+) - (\d+)$", re.MULTILINE)


def format_quote(quote: Quote) -> str:
    source = f"{quote.title} ({quote.domain})" if quote.domain else quote.title
    extract = "\n".join(f"> {line}" for line in quote.extract.split("\n"))
    return f"From {source}\n{extract}"


def format_observation(browser: Browser) -> str:
    """One section per marker; "♦Error" / "♦Note" appear only right after an action that produced one."""
    sections = ["♦Question", browser.question, "♦Quotes"]
    sections.extend(format_quote(quote) for quote in browser.quotes)
    sections.append("♦Past actions")
    removed = {removal.action for removal in browser.removed_quotes}  # as if never quoted (remove_quote)
    shown = [a.display for i, a in enumerate(browser.actions) if a.valid and i not in removed]
    sections.extend(shown[-browser.settings.past_actions_shown :] if shown else [])
    first, last = browser.scrollbar()
    sections += ["♦Title", browser.page.display_title, f"♦Scrollbar: {first} - {last}", "♦Text"]
    sections.extend(browser.visible_lines())
    if browser.actions and browser.actions[-1].message:
        last_action = browser.actions[-1]
        sections += ["♦Note" if last_action.valid else "♦Error", last_action.message]
    sections += [f"♦Actions left: {browser.actions_left}", "♦Next action"]
    return "\n".join(sections)


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
