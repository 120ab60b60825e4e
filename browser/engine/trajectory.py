"""Human trajectories to training trajectories (WebGPT, C.1): people scroll one window at a time; consecutive
single scrolls in one direction are merged into ``Scrolled down k`` / ``Scrolled up k`` with k <= 3; invalid
actions and the Quotes of quotes the person removed are left out."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence

_SINGLE_SCROLL = re.compile(r"Scrolled (down|up) 1")
MAX_MERGED = 3


def merge_scrolls(commands: Sequence[str]) -> list[str]:
    merged: list[str] = []
    run_direction, run_length = "", 0
    for command in [*commands, ""]:
        match = _SINGLE_SCROLL.fullmatch(command.strip())
        direction = match.group(1) if match else ""
        if run_length and (direction != run_direction or run_length == MAX_MERGED):
            merged.append(f"Scrolled {run_direction} {run_length}")
            run_length = 0
        if direction:
            run_direction, run_length = direction, run_length + 1
        elif command:
            merged.append(command)
    return merged


def model_commands(actions: Iterable[tuple[str, bool]], removed: Collection[int] = ()) -> list[str]:
    """The commands a model learns from a person's ``(command, valid)`` actions: the valid ones, less the
    Quotes whose quotes the person removed (by action index, ``removed_quote_actions``), scrolls merged.
    What is left is a trajectory the model could have taken itself: replayed, it gives the observations
    it trains on."""
    return merge_scrolls(
        [command for index, (command, valid) in enumerate(actions) if valid and index not in removed]
    )
