"""What the browsing page shows, derived from the engine: the person sees what the model reads, laid out."""

from __future__ import annotations

import uuid
from typing import Any

from django.urls import reverse

from annotation.demonstrations.announce import FIND_DISPLAY, announcement
from annotation.models import Episode
from browser.engine.browser import Browser
from browser.engine.matching import find
from browser.engine.page import LINK_MARKER

SEARCH_REQUEST = "search:"  # how the engine names the request of a search action

SHORTCUTS = (
    ("/", "focus the search box"),
    ("f", "focus the find box"),
    ("j or Page Down", "scroll down"),
    ("k or Page Up", "scroll up"),
    ("t", "top of the page"),
    ("b", "back"),
    ("q", "quote the selected text"),
)


def line_segments(line: str, mark: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """A display line as text pieces and links (id, text, domain) for the template; ``mark`` is a
    [start, end) range of the line's plain text (links reduced to their text) shown highlighted."""
    segments: list[dict[str, Any]] = []
    position = 0
    for match in LINK_MARKER.finditer(line):
        if match.start() > position:
            segments.append({"text": line[position : match.start()]})
        segments.append({"link": int(match.group(1)), "text": match.group(2), "domain": match.group(3) or ""})
        position = match.end()
    if position < len(line):
        segments.append({"text": line[position:]})
    return _marked(segments, mark) if mark else segments


def _marked(segments: list[dict[str, Any]], mark: tuple[int, int]) -> list[dict[str, Any]]:
    """``segments`` with the text pieces cut at the edges of ``mark`` and the pieces inside it flagged
    (a link inside is flagged whole: it stays one link)."""
    start, end = mark
    result: list[dict[str, Any]] = []
    offset = 0  # where the segment starts in the line's plain text
    for segment in segments:
        text, first = segment["text"], offset
        offset += len(text)
        if offset <= start or first >= end:
            result.append(segment)
        elif "link" in segment:
            result.append({**segment, "mark": True})
        else:
            left, right = max(start - first, 0), min(end - first, len(text))
            if left:
                result.append({"text": text[:left]})
            result.append({"text": text[left:right], "mark": True})
            if right < len(text):
                result.append({"text": text[right:]})
    return result


def find_match(browser: Browser, cursor: dict[str, Any]) -> tuple[int, int] | None:
    """The [start, end) in the page's plain text of what the last action, a Find, matched; else None.

    ``cursor`` is the episode state's cursor: the engine keeps the offset of the last match there (the
    model's observation shows only the window moved to it; the highlight is for people)."""
    action = browser.actions[-1] if browser.actions else None
    if action is None or not action.valid or not action.display.startswith(FIND_DISPLAY):
        return None
    needle, offset, plain = (
        action.display.removeprefix(FIND_DISPLAY),
        cursor.get("find_offset"),
        browser.page.plain,
    )
    # A miss leaves the offset of an earlier match: Find wraps around, so a miss means nowhere on the page.
    if offset is None or find(plain, needle) is None:
        return None
    end = offset + len(needle)
    # (casefold() changes the length of a few letters: then the match is not highlighted, only moved to.)
    return (offset, end) if plain[offset:end].casefold() == needle.casefold() else None


def visible_lines(browser: Browser, match: tuple[int, int] | None) -> list[list[dict[str, Any]]]:
    """The window's lines as segments, the Find match highlighted where it falls in them."""
    page, lines = browser.page, []
    for number, line in enumerate(browser.visible_lines(), start=browser.top):
        mark = None
        if match is not None:
            first = page.line_starts[number]
            start, end = max(match[0], first), min(match[1], first + len(page.plain_lines[number]))
            mark = (start - first, end - first) if end > start else None
        lines.append(line_segments(line, mark))
    return lines


def active_time(seconds: float) -> str:
    """``4:12`` (minutes:seconds), ``1:02:03`` past an hour: how active time reads on the page."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def last_search_query(browser: Browser) -> str:
    """The query of the latest search that ran, so the search box can show what was searched."""
    for action in reversed(browser.actions):
        if action.valid and action.request.startswith(SEARCH_REQUEST):
            return action.request.removeprefix(SEARCH_REQUEST)
    return ""


def last_find_text(browser: Browser) -> str:
    """The text of the latest Find, so the find box keeps it: Find again moves to the next match (the
    engine searches on from the last match), as "Find in page" does in WebGPT's browser."""
    for action in reversed(browser.actions):
        if action.command.startswith(FIND_DISPLAY):
            return action.command.removeprefix(FIND_DISPLAY).strip()
    return ""


def panel_context(
    episode: Episode, browser: Browser, *, message: str = "", valid: bool = True
) -> dict[str, Any]:
    first, last = browser.scrollbar()
    page = browser.page
    return {
        "episode": episode,
        "act_url": reverse("annotation:act", args=[episode.pk]),
        "remove_quote_url": reverse("annotation:remove_quote", args=[episode.pk]),
        "question": browser.question,
        "page": page,
        "page_title": page.display_title,
        "lines": visible_lines(browser, find_match(browser, episode.state["cursor"])),
        "scrollbar": {"first": first, "last": last, "total": len(page.lines)},
        "link_urls": {index: link.url for index, link in enumerate(page.links)},
        "quotes": browser.quotes,
        "last_query": last_search_query(browser),
        "last_find": last_find_text(browser),
        "actions_left": browser.actions_left,
        "quote_chars_left": browser.quote_chars_left,
        "message": message,
        "message_is_error": not valid,
        "announcement": announcement(browser, message, valid),
        "active_seconds": int(episode.active_seconds),
        "active_time": active_time(episode.active_seconds),
        # One key per rendering: whichever form is submitted first from this state is applied once.
        "key": uuid.uuid4(),
        "version": episode.version,
        "shortcuts": SHORTCUTS,
    }
