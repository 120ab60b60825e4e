"""Behaviour-cloning examples from a finished episode, exactly as a model will see them."""

from __future__ import annotations

from annotation.demonstrations.service import open_browser
from annotation.models import Episode
from browser.engine.backend import ReplayOnly
from browser.engine.browser import Browser, recorded_pages, removed_quote_actions
from browser.engine.settings import BrowserSettings
from browser.engine.trajectory import model_commands


def bc_examples(episode: Episode) -> list[dict[str, str]]:
    """``{"prompt", "completion"}`` pairs: observation -> command for each step, answer prompt -> answer.

    The human trajectory is turned into the model's (invalid actions dropped, single scrolls merged,
    WebGPT C.1; the Quote of a quote the person removed dropped too, so the model never learns to quote
    what was taken back) and replayed on the episode's recorded pages, so every prompt is the observation
    the model would have seen after those very commands.
    """
    recording = open_browser(episode, with_all_pages=True)
    actions = episode.actions.order_by("index").values_list("command", "valid")
    commands = model_commands(actions, removed_quote_actions(episode.state))
    replay = Browser(
        ReplayOnly(), BrowserSettings.from_dict(episode.settings), recorded=recorded_pages(recording.state())
    )
    replay.reset(episode.question.text, episode.question.reference_answers)
    examples = []
    for command in commands:
        examples.append({"prompt": replay.observation(), "completion": command})
        replay.step(command)
    if episode.answer:
        examples.append({"prompt": replay.answer_prompt(), "completion": episode.answer})
    return examples
