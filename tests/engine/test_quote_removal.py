"""A person takes a quote back: the list, the budget, the observation and the model's trajectory follow."""

import json

import pytest

from browser.engine.browser import Browser, recorded_pages, removed_quote_actions
from browser.engine.commands import InvalidCommand
from browser.engine.trajectory import model_commands
from tests.engine.test_browser import NoBackend, open_pollen


def quoted_twice(browser: Browser) -> None:
    open_pollen(browser)
    browser.step("Quote: hard coat")
    browser.step("Scrolled down 1")
    browser.step("Quote: seed plants")


def test_removing_a_quote_takes_it_off_the_list_and_frees_its_budget_but_costs_no_action(browser):
    quoted_twice(browser)
    actions_left, budget = browser.actions_left, browser.quote_chars_left
    removed = browser.remove_quote(1)
    assert removed.extract == "hard coat"
    assert [quote.extract for quote in browser.quotes] == ["seed plants"]
    assert browser.actions_left == actions_left
    assert browser.quote_chars_left == budget + len("hard coat")
    (removal,) = browser.removed_quotes
    assert (removal.action, removal.after, removal.quote) == (2, 5, removed)  # the 3rd action, after 5


def test_the_observation_shows_the_removed_quote_nowhere(browser):
    quoted_twice(browser)
    browser.remove_quote(1)
    text = browser.observation()
    assert "hard coat" not in text.split("♦Title")[0]
    assert "♦Quotes\nFrom Pollen - Wikipedia (en.wikipedia.org)\n> seed plants\n♦Past actions\n" in text
    past = text.split("♦Past actions\n")[1].split("\n♦Title")[0]
    assert past.splitlines() == [
        "Search pollen",
        "Click Pollen - Wikipedia en.wikipedia.org",
        "Scrolled down 1",
        "Quote",
    ]


@pytest.mark.parametrize(("number", "says"), [(0, "There is no quote 0"), (3, "numbered 1 to 2")])
def test_a_quote_that_is_not_there_cannot_be_removed(browser, number, says):
    quoted_twice(browser)
    with pytest.raises(InvalidCommand, match=says):
        browser.remove_quote(number)
    assert len(browser.quotes) == 2 and browser.removed_quotes == ()


def test_removals_are_kept_in_the_state_and_old_states_still_load(backend, browser):
    quoted_twice(browser)
    browser.remove_quote(2)
    state = json.loads(json.dumps(browser.state()))
    restored = Browser.from_state(backend, state)
    assert restored.removed_quotes == browser.removed_quotes
    assert restored.observation() == browser.observation()
    assert removed_quote_actions(state) == {4}
    del state["removed_quotes"]  # saved before quotes could be removed
    assert Browser.from_state(backend, state).removed_quotes == ()


def test_quote_numbers_follow_the_list_after_earlier_removals(browser):
    quoted_twice(browser)
    browser.step("Quote: male gametes")
    browser.remove_quote(2)  # seed plants (action 4)
    browser.remove_quote(2)  # now male gametes (action 5), not seed plants again
    assert [removal.action for removal in browser.removed_quotes] == [4, 5]
    assert [quote.extract for quote in browser.quotes] == ["hard coat"]
    assert browser.quote_actions() == [2]


def test_the_models_trajectory_leaves_the_removed_quote_out_and_replays_to_the_same_quotes(browser):
    quoted_twice(browser)
    browser.remove_quote(1)
    browser.step("End: Answer")
    actions = [(action.command, action.valid) for action in browser.actions]
    commands = model_commands(actions, removed_quote_actions(browser.state()))
    assert "Quote: hard coat" not in commands and "Quote: seed plants" in commands
    replay = Browser(NoBackend(), browser.settings, recorded=recorded_pages(browser.state()))
    replay.reset(browser.question)
    for command in commands:
        assert replay.step(command).valid, command
    assert replay.quotes == browser.quotes
    assert replay.answer_prompt() == browser.answer_prompt()
