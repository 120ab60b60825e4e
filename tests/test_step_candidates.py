"""Candidate actions at one state of a recorded episode (training/sampling/candidates.py): the replay reaches
exactly the observation the episode had there, on its recorded pages alone, and the candidates are
distinct, readable, and never the excluded (demonstrator's) command."""

from __future__ import annotations

import pytest

from browser.engine.commands import parse_command
from tests.test_guided_browsing import BySeed
from tests.test_sampling_core import ENV, QUESTIONS, browser, index  # noqa: F401 (a fixture)
from tests.test_sampling_grammar import first_sentence
from training.sampling.candidates import browser_at, candidate_commands
from training.sampling.episode import SamplingSettings
from training.sampling.local import LocalBackend
from training.sampling.policies import BCPolicy


@pytest.fixture
def recorded(index):  # noqa: F811 (the fixture)
    """An episode on the demo corpus, an invalid action among its steps: (final state, commands, the
    observation before each command)."""
    live = browser(index)
    live.reset(QUESTIONS[0])
    commands, observations = (
        ["Search AFL Grand Final", "Clicked on link 0", "Jump ahead", "Scrolled down 1"],
        [],
    )
    for command in commands:
        observations.append(live.observation())
        assert live.step(command).valid == (command != "Jump ahead")
    commands.append(f"Quote: {first_sentence(live)}")
    observations.append(live.observation())
    assert live.step(commands[-1]).valid
    return live.state(), commands, observations


def test_the_replay_reaches_each_state_on_the_recorded_pages_alone(recorded):
    state, commands, observations = recorded
    for step, expected in enumerate(observations):
        assert browser_at(state, ENV, QUESTIONS[0], commands, step).observation() == expected
    with pytest.raises(ValueError, match="step 9 is not a state"):
        browser_at(state, ENV, QUESTIONS[0], commands, 9)


def test_candidates_are_distinct_readable_and_never_the_demonstrators_own(recorded):
    state, commands, _ = recorded
    at = browser_at(state, ENV, QUESTIONS[0], commands, 3)
    found = candidate_commands(BCPolicy(BySeed()), at, SamplingSettings(), k=3, seed=1, exclude=[commands[3]])
    assert len(found) == 3 and len(set(found)) == 3 and commands[3] not in found
    for command in found:
        parse_command(command)  # raises when unreadable
    # A policy with fewer distinct commands than asked gives what it has, after a bounded number of draws.
    few = candidate_commands(BCPolicy(BySeed()), at, SamplingSettings(), k=9, seed=1)
    assert sorted(few) == sorted({"Scrolled down 1", "Search Crimean Bridge", "Back", "Top"})


def test_a_constrained_policy_offers_commands_the_state_accepts(recorded, tiny_llama_dir):
    state, commands, _ = recorded
    settings = SamplingSettings(max_command_tokens=12, constrain_commands=True)
    policy = BCPolicy(LocalBackend(tiny_llama_dir, device="cpu"))
    at = browser_at(state, ENV, QUESTIONS[0], commands, 2)
    found = candidate_commands(policy, at, settings, k=3, seed=5)
    assert found and len(set(found)) == len(found)
    links = {str(link_id) for link_id in range(len(at.page.links))}
    for command in found:  # not run (a click or a search leaves the recording): checked against the state
        parse_command(command)
        if command.startswith("Clicked on link "):
            assert command.removeprefix("Clicked on link ") in links
        if command.startswith("Quote: "):
            assert command.removeprefix("Quote: ") in at.page.plain
