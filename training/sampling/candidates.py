"""Candidate next actions at one state of a recorded episode (issue 38, groundwork): what a step-preference
item shows (Web-Shepherd: a chosen and a rejected action at the same state), the demonstrator's own action
against a policy's, or two of a policy's.

``browser_at`` replays an episode's commands on the pages it recorded (no search, no fetch: a live-web
episode replays as well as a corpus one) up to the state before one of its actions; ``candidate_commands``
asks a policy for distinct commands there, each from a seed of its own. The commands are not run: a labeler
judges the move, not where it leads. Django-free."""

from __future__ import annotations

from collections.abc import Sequence

from browser.engine.backend import ReplayOnly
from browser.engine.browser import Browser, recorded_pages
from browser.engine.commands import InvalidCommand, parse_command
from browser.engine.settings import BrowserSettings
from training.sampling.episode import Policy, SamplingSettings, derive_seed

MAX_TRIES_PER_CANDIDATE = 4  # draws per wanted command before giving up on duplicates and unreadable ones


def browser_at(
    state: dict,
    settings: BrowserSettings,
    question: str,
    commands: Sequence[str],
    step: int,
    reference_answers: Sequence[str] = (),
) -> Browser:
    """A browser in the state an episode (its final ``state()``, its ``commands`` in order) was in just
    before command ``step`` (0: the question alone), replayed on its recorded pages."""
    if not 0 <= step <= len(commands):
        raise ValueError(f"step {step} is not a state of an episode of {len(commands)} actions")
    browser = Browser(ReplayOnly(), settings, recorded=recorded_pages(state))
    browser.reset(question, reference_answers)
    for command in commands[:step]:
        browser.step(command)
    return browser


def candidate_commands(
    policy: Policy,
    browser: Browser,
    settings: SamplingSettings,
    *,
    k: int,
    seed: int,
    exclude: Sequence[str] = (),
) -> list[str]:
    """Up to ``k`` distinct commands the policy writes at ``browser``'s state, in the order drawn, none of
    them in ``exclude`` (the demonstrator's own action, say) and each one a command the browser can read.
    Drawn in batches of the missing number, ``MAX_TRIES_PER_CANDIDATE`` draws per command at most, so a
    policy that keeps writing the same command yields fewer than ``k``."""
    found: list[str] = []
    unwanted = {command.strip() for command in exclude}
    drawn = 0
    while len(found) < k and drawn < k * MAX_TRIES_PER_CANDIDATE:
        wanted = k - len(found)
        requests = [
            policy.command_request(browser, settings, derive_seed(seed, drawn + n, "candidate"))
            for n in range(wanted)
        ]
        drawn += wanted
        for completion in policy.backend.complete(requests):
            command = policy.command_from(completion).strip()
            if command in unwanted or command in found or not _readable(command):
                continue
            found.append(command)
    return found[:k]


def _readable(command: str) -> bool:
    try:
        parse_command(command)
    except InvalidCommand:
        return False
    return True
