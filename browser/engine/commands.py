"""The command language (WebGPT, Table 1), parsed strictly: anything else is an invalid action."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    SEARCH = "search"
    CLICK = "click"
    FIND = "find"
    QUOTE = "quote"
    SCROLL_DOWN = "scroll_down"
    SCROLL_UP = "scroll_up"
    TOP = "top"
    BACK = "back"
    END = "end"


class EndReason(StrEnum):
    ANSWER = "answer"
    NONSENSE = "nonsense"
    CONTROVERSIAL = "controversial"
    ACTION_LIMIT = "action_limit"
    QUOTE_LIMIT = "quote_limit"


@dataclass(frozen=True)
class Command:
    kind: Kind
    argument: str = ""  # the query, text, link id, scroll count or end choice


class InvalidCommand(ValueError):
    """Not a command of the language; the message says what the valid forms are."""


COMMAND_FORMS = (
    "Search <query>",
    "Clicked on link <id>",
    "Find in page: <text>",
    "Quote: <text>",
    "Scrolled down <1|2|3>",
    "Scrolled up <1|2|3>",
    "Top",
    "Back",
    "End: Answer",
    "End: Nonsense",
    "End: Controversial",
)
_PATTERNS: tuple[tuple[re.Pattern[str], Kind], ...] = (
    (re.compile(r"Search (?P<arg>\s*\S.*)", re.DOTALL), Kind.SEARCH),
    (re.compile(r"Clicked on link (?P<arg>\d{1,6})"), Kind.CLICK),
    (re.compile(r"Find in page: (?P<arg>\s*\S.*)", re.DOTALL), Kind.FIND),
    (re.compile(r"Quote: (?P<arg>\s*\S.*)", re.DOTALL), Kind.QUOTE),
    (re.compile(r"Scrolled down (?P<arg>[123])"), Kind.SCROLL_DOWN),
    (re.compile(r"Scrolled up (?P<arg>[123])"), Kind.SCROLL_UP),
    (re.compile(r"Top"), Kind.TOP),
    (re.compile(r"Back"), Kind.BACK),
    (re.compile(r"End: (?P<arg>Answer|Nonsense|Controversial)"), Kind.END),
)


def parse_command(text: str) -> Command:
    """The command in ``text`` (surrounding whitespace ignored), or InvalidCommand."""
    stripped = text.strip()
    for pattern, kind in _PATTERNS:
        match = pattern.fullmatch(stripped)
        if match:
            argument = match.groupdict().get("arg") or ""
            return Command(kind, argument.strip())
    shown = stripped if len(stripped) <= 60 else stripped[:57] + "..."
    raise InvalidCommand(f"Invalid action {shown!r}. Valid actions: {'; '.join(COMMAND_FORMS)}.")
