"""What the browsing page shows, derived from the engine: the person sees what the model reads, laid out."""

from __future__ import annotations

import uuid
from typing import Any

from django.urls import reverse

from annotation.models import Episode
from browser.engine.browser import Browser
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


def line_segments(line: str) -> list[dict[str, Any]]:
    """A display line as text pieces and links (id, text, domain) for the template."""
    segments: list[dict[str, Any]] = []
    position = 0
    for match in LINK_MARKER.finditer(line):
        if match.start() > position:
            segments.append({"text": line[position : match.start()]})
        segments.append({"link": int(match.group(1)), "text": match.group(2), "domain": match.group(3) or ""})
        position = match.end()
    if position < len(line):
        segments.append({"text": line[position:]})
    return segments


def last_search_query(browser: Browser) -> str:
    """The query of the latest search that ran, so the search box can show what was searched."""
    for action in reversed(browser.actions):
        if action.valid and action.request.startswith(SEARCH_REQUEST):
            return action.request.removeprefix(SEARCH_REQUEST)
    return ""


def panel_context(
    episode: Episode, browser: Browser, *, message: str = "", valid: bool = True
) -> dict[str, Any]:
    first, last = browser.scrollbar()
    page = browser.page
    return {
        "episode": episode,
        "act_url": reverse("annotation:act", args=[episode.pk]),
        "question": browser.question,
        "page": page,
        "page_title": page.display_title,
        "lines": [line_segments(line) for line in browser.visible_lines()],
        "scrollbar": {"first": first, "last": last, "total": len(page.lines)},
        "link_urls": {index: link.url for index, link in enumerate(page.links)},
        "quotes": browser.quotes,
        "last_query": last_search_query(browser),
        "actions_left": browser.actions_left,
        "quote_chars_left": browser.quote_chars_left,
        "message": message,
        "message_is_error": not valid,
        # One key per rendering: whichever form is submitted first from this state is applied once.
        "key": uuid.uuid4(),
        "version": episode.version,
        "shortcuts": SHORTCUTS,
    }
