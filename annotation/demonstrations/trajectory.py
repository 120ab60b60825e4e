"""An episode's trajectory as the page replays it: step by step, what was seen before each action (the
stored observation: the exact text a model read, or the engine's text of what a person saw), the action,
what came of it, and the quotes as they were added and removed. From the stored rows and the episode's
state in one query for the actions, however long the episode."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from annotation.models import Episode, EpisodeAction
from browser.engine.browser import Browser
from browser.engine.observation import scrollbar_of
from browser.engine.page import BLANK_PAGE, Quote

# The episode's key too: the related manager reads it on every row, and deferred it cost a query per step.
STEP_FIELDS = (
    "episode",
    "index",
    "command",
    "valid",
    "message",
    "observation_before",
    "page_before",
    "page_after",
)


@dataclass
class Step:
    number: int  # from 1, for people
    action: EpisodeAction
    line_before: int  # the first line in view before the action (the snapshot link scrolls to it)
    line_after: int = 0  # and after it
    added: tuple[int, Quote] | None = None  # the quote this action added, with its number then
    removed: list[tuple[int, Quote]] = field(default_factory=list)  # quotes removed after it, numbered then

    @property
    def page_before(self) -> str:
        """The snapshot digest before the action, or "" for the blank page (nothing to open)."""
        return "" if self.action.page_before == BLANK_PAGE.digest else self.action.page_before

    @property
    def page_after(self) -> str:
        """The snapshot digest after the action, or "" when the action stayed on the page (or none)."""
        after = self.action.page_after
        return "" if after in (BLANK_PAGE.digest, self.action.page_before) else after


def trajectory(episode: Episode, browser: Browser) -> list[Step]:
    """The steps of ``episode``, whose current state ``browser`` holds (its quotes and removals)."""
    actions = episode.actions.only(*STEP_FIELDS).order_by("index")
    steps = [Step(n, action, _first_line(action.observation_before)) for n, action in enumerate(actions, 1)]
    for step, following in pairwise(steps):
        step.line_after = following.line_before
    if steps:
        steps[-1].line_after = browser.top
    _place_quotes(steps, browser)
    return steps


def _first_line(observation: str) -> int:
    scrollbar = scrollbar_of(observation)
    return scrollbar[0] if scrollbar else 0


def _place_quotes(steps: list[Step], browser: Browser) -> None:
    """Each quote on the step that added it and each removal after the step it followed, numbered as the
    list was numbered at that moment."""
    made_by = dict(zip(browser.quote_actions(), browser.quotes, strict=True))
    made_by |= {removal.action: removal.quote for removal in browser.removed_quotes}
    removals: dict[int, list[int]] = {}
    for removal in browser.removed_quotes:
        removals.setdefault(removal.after, []).append(removal.action)
    held: list[int] = []  # the Quote actions behind the list, in order
    for step in steps:
        index = step.action.index
        if index in made_by:
            held.append(index)
            step.added = (len(held), made_by[index])
        for action in removals.get(index + 1, []):
            step.removed.append((held.index(action) + 1, made_by[action]))
            held.remove(action)
