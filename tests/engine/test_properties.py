"""Property tests: whatever is typed, the environment stays consistent."""

import json
import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from browser.engine.browser import Browser
from browser.engine.settings import BrowserSettings
from tests.engine.fakes import POLLEN, MemoryBackend, sample_documents

COMMANDS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["Top", "Back", "End: Nonsense", "Scrolled down 1", "Scrolled up 3", "Scrolled down 3"]),
    st.builds(lambda n: f"Clicked on link {n}", st.integers(0, 8)),
    st.builds(lambda t: f"Search {t}", st.text(min_size=1, max_size=20)),
    st.builds(lambda t: f"Find in page: {t}", st.text(min_size=1, max_size=10)),
    st.builds(lambda t: f"Quote: {t}", st.text(min_size=1, max_size=30)),
    st.sampled_from(["Search pollen", "Find in page: pollen", "Quote: hard coat", "Quote: Pollen━plants"]),
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def new_browser(**overrides) -> Browser:
    browser = Browser(MemoryBackend(sample_documents()), BrowserSettings(window_lines=5, **overrides))
    browser.reset("What is pollen?")
    return browser


def on_pollen_page() -> Browser:
    browser = new_browser()
    browser.step("Search pollen")
    browser.step(f"Clicked on link {[link.url for link in browser.page.links].index(POLLEN)}")
    return browser


def check_invariants(browser: Browser) -> None:
    count = len(browser.page.lines)
    first, last = browser.scrollbar()
    assert 0 <= browser.top <= max(0, count - browser.settings.window_lines)
    assert 0 <= first <= last < max(count, 1)
    assert browser.actions_left == max(0, browser.settings.max_actions - len(browser.actions))
    assert sum(len(q.extract) for q in browser.quotes) <= browser.settings.max_quote_chars
    assert browser.observation().endswith("♦Next action")


@FAST
@given(st.lists(COMMANDS, max_size=25))
def test_any_commands_never_raise_and_keep_the_state_consistent(commands):
    browser = new_browser(max_actions=20)
    for command in commands:
        quotes_before, count_before, done_before = browser.quotes, len(browser.actions), browser.done
        result = browser.step(command)
        check_invariants(browser)
        assert browser.quotes[: len(quotes_before)] == quotes_before
        assert len(browser.actions) == count_before + (0 if done_before else 1)
        assert result.done == browser.done


@FAST
@given(st.lists(COMMANDS, max_size=15))
def test_state_to_json_and_back_is_lossless(commands):
    browser = new_browser()
    for command in commands:
        browser.step(command)
    restored = Browser.from_state(browser.backend, json.loads(json.dumps(browser.state())))
    assert restored.state() == browser.state()
    assert restored.observation() == browser.observation()


def perturb(text: str, data) -> str:
    """Change the case of some letters and the whitespace between some characters."""
    out = []
    for char in text:
        if char.isspace():
            out.append(data.draw(st.sampled_from(["", " ", "  ", "\n", "\t "])))
            continue
        out.append(char.swapcase() if data.draw(st.booleans()) else char)
        if data.draw(st.integers(0, 9)) == 0:
            out.append(" ")
    return "".join(out)


def compact(text: str) -> str:
    return re.sub(r"\s+", "", text).casefold()


@FAST
@given(st.data())
def test_any_substring_of_the_page_text_can_be_quoted_with_case_and_spacing_changed(data):
    browser = on_pollen_page()
    plain = browser.page.plain
    start = data.draw(st.integers(0, len(plain) - 2))
    end = data.draw(st.integers(start + 1, min(len(plain), start + 200)))
    piece = plain[start:end]
    assume(piece.strip())
    result = browser.step(f"Quote: {perturb(piece, data)}")
    assert result.valid, result.message
    assert compact(browser.quotes[-1].extract) == compact(piece)


@FAST
@given(st.text(min_size=1, max_size=40))
def test_text_that_is_not_on_the_page_cannot_be_quoted(text):
    browser = on_pollen_page()
    assume(compact(text) and compact(text) not in compact(browser.page.plain) and "━" not in text)
    result = browser.step(f"Quote: {text}")
    assert not result.valid
    assert browser.quotes == ()
