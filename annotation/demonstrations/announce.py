"""What the browsing page's live region says after an action: what changed, in a short sentence, for people
who cannot see the page change ("12 results for 'okapi'", "No match for 'zebra'", "Quote 2 added").

Derived from the engine's record of the last action (its display line, as in "Past actions"), so the
words follow what the engine did, not what the page asked for."""

from __future__ import annotations

import math

from browser.engine.browser import Action, Browser
from browser.engine.matching import find

FIND_DISPLAY = "Find in page: "
SEARCH_DISPLAY = "Search "
QUOTE_DISPLAY = "Quote"


def announcement(browser: Browser, message: str = "", valid: bool = True) -> str:
    """The sentence for the live region; "" for a refused action (the panel's alert says why)."""
    if not valid:
        return ""
    action = browser.actions[-1] if browser.actions else None
    if action is None:
        return message
    if message and message != action.message:  # a notice about the episode itself (a stale tab)
        return message
    if action.display.startswith(FIND_DISPLAY):
        needle = action.display.removeprefix(FIND_DISPLAY)
        if find(browser.page.plain, needle) is None:  # Find wraps around: a miss means nowhere on the page
            return f"No match for '{needle}'."  # (the engine's note says the same in other words)
    # The engine's note follows: "Wrapped to the top of the page.", "Already at the bottom."...
    return " ".join(part for part in (_what_changed(browser, action), action.message) if part)


def _what_changed(browser: Browser, action: Action) -> str:
    if action.display.startswith(SEARCH_DISPLAY) and browser.page.kind == "search":
        count = len(browser.page.links)  # each result is one link; "No results." has none
        query = action.display.removeprefix(SEARCH_DISPLAY)
        return f"{count} result{'' if count == 1 else 's'} for '{query}'."
    if action.display.startswith(FIND_DISPLAY):
        return f"Found '{action.display.removeprefix(FIND_DISPLAY)}': {page_position(browser)}."
    if action.display == QUOTE_DISPLAY:
        return f"Quote {len(browser.quotes)} added."
    return f"{page_position(browser)}."


def page_position(browser: Browser) -> str:
    """``<page title>, page <n> of <windows>``: where the window is, in windows of the page."""
    page, window = browser.page, browser.settings.window_lines
    title = page.display_title or "No page yet"
    if not page.lines:
        return title
    _, last = browser.scrollbar()
    return f"{title}, page {math.ceil((last + 1) / window)} of {math.ceil(len(page.lines) / window)}"
