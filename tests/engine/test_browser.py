"""The environment's behaviour, command by command, on an in-memory corpus."""

import json

from browser.engine.browser import Browser, recorded_pages
from browser.engine.commands import EndReason
from browser.engine.settings import BrowserSettings
from tests.engine.fakes import ALLERGY, POLLEN, MemoryBackend, sample_documents


def open_pollen(browser: Browser) -> None:
    assert browser.step("Search pollen").valid
    link = next(i for i, link in enumerate(browser.page.links) if link.url == POLLEN)
    assert browser.step(f"Clicked on link {link}").valid


def test_search_shows_results_without_blocked_domains(browser):
    result = browser.step("Search pollen")
    assert (result.valid, result.done) == (True, False)
    assert browser.page.display_title == "Search results for: pollen"
    assert all("reddit" not in link.domain for link in browser.page.links)
    assert [link.domain for link in browser.page.links] == ["bees.example.org", "en.wikipedia.org"]


def test_click_opens_the_page_and_a_missing_link_is_invalid(browser):
    open_pollen(browser)
    assert browser.page.display_title == "Pollen - Wikipedia (en.wikipedia.org)"
    result = browser.step("Clicked on link 99")
    assert not result.valid
    assert "There is no link 99 on this page" in result.message
    assert browser.page.url == POLLEN


def test_a_link_outside_the_corpus_opens_a_clear_page(backend, browser):
    del backend.documents[ALLERGY]
    open_pollen(browser)
    browser.step("Clicked on link 0")
    assert browser.page.title == "Page not in the corpus"
    assert browser.page.plain == f"{ALLERGY} is not in the corpus. Go back or search again."


def test_fetch_errors_become_error_pages(backend, browser):
    backend.failing.add(POLLEN)
    open_pollen(browser)
    assert browser.page.kind == "error"
    assert "connection reset" in browser.page.plain


def test_scrolling_moves_whole_windows_and_stays_on_the_page(browser):
    open_pollen(browser)
    count = len(browser.page.lines)
    assert browser.scrollbar() == (0, 4)
    browser.step("Scrolled down 2")
    assert browser.scrollbar() == (10, 14)
    browser.step("Scrolled down 3")
    assert browser.scrollbar() == (25, 29)
    browser.step("Scrolled down 3")
    result = browser.step("Scrolled down 3")
    assert browser.scrollbar() == (count - 5, count - 1)
    assert browser.step("Scrolled down 1").message == "Already at the bottom."
    browser.step("Scrolled up 1")
    assert browser.top == count - 10
    browser.step("Top")
    assert browser.scrollbar() == (0, 4)
    assert result.valid


def test_back_restores_the_previous_page_and_its_cursor(browser):
    open_pollen(browser)
    browser.step("Scrolled down 1")
    browser.step("Find in page: allergy")
    top = browser.top
    browser.step(f"Clicked on link {[link.url for link in browser.page.links].index(ALLERGY)}")
    assert browser.page.url == ALLERGY
    browser.step("Back")
    assert (browser.page.url, browser.top) == (POLLEN, top)
    assert browser.can_go_back
    browser.step("Back")
    assert browser.page.kind == "search"
    assert not browser.can_go_back  # what a policy's command grammar reads: Back would be invalid here
    result = browser.step("Back")
    assert not result.valid and "no previous page" in result.message


def test_find_moves_to_the_next_match_wraps_and_reports_absence(browser):
    open_pollen(browser)
    browser.step("Find in page: SECTION 1")
    first = browser.top
    assert "Section 1." in " ".join(browser.visible_lines())
    browser.step("Find in page: section 1")  # Section 10 and 11 come next
    assert browser.top > first
    browser.step("Find in page: section 1")
    result = browser.step("Find in page: section 1")
    assert result.message == "Wrapped to the top of the page."
    assert browser.top == first
    missing = browser.step("Find in page: photosynthesis")
    assert missing.valid and missing.message == "'photosynthesis' was not found on this page."


def test_find_shows_the_match_with_the_line_before_so_its_sentence_can_be_quoted_whole(browser):
    open_pollen(browser)
    browser.step("Scrolled down 2")  # lines 10-14
    assert browser.step("Find in page: which produce male gametes").valid
    assert browser.page.line_of(browser.state()["cursor"]["find_offset"]) == 10
    assert browser.scrollbar() == (9, 13)
    # The sentence starts on the line before the match's, and the window has both.
    window = " ".join(browser.visible_lines())
    assert "It consists of pollen grains, which produce male gametes." in window
    assert browser.step("Quote: It consists of pollen grains, which produce male gametes.").valid


def test_a_match_on_the_first_line_has_no_line_before_and_the_page_stays_at_its_top(browser):
    open_pollen(browser)
    assert browser.step("Find in page: pollen").valid  # the title, line 0
    assert browser.scrollbar() == (0, 4)


def test_find_matches_link_text_not_markup(browser):
    open_pollen(browser)
    assert browser.step("Find in page: bees collect it").message == ""
    assert browser.step("Find in page: †").message.endswith("was not found on this page.")


def test_quote_ignores_case_and_whitespace_and_keeps_the_page_spelling(browser):
    open_pollen(browser)
    result = browser.step("Quote: POWDERY   substance\nproduced by SEED plants")
    assert result.valid
    quote = browser.quotes[0]
    assert quote.extract == "powdery substance produced by seed plants"
    assert (quote.title, quote.url, quote.domain) == ("Pollen - Wikipedia", POLLEN, "en.wikipedia.org")


def test_quote_with_start_and_end_takes_everything_between(browser):
    open_pollen(browser)
    browser.step("Quote: It consists━male gametes.")
    assert browser.quotes[0].extract == "It consists of pollen grains, which produce male gametes."


def test_text_not_on_the_page_cannot_be_quoted(browser):
    open_pollen(browser)
    result = browser.step("Quote: pollen is made of cheese")
    assert not result.valid
    assert result.message == "That text is not on this page, so it cannot be quoted."
    assert browser.quotes == ()
    assert "♦Error\nThat text is not on this page" in browser.observation()


def test_answering_needs_a_quote(browser):
    result = browser.step("End: Answer")
    assert not result.valid and not result.done
    assert "at least one quote" in result.message
    open_pollen(browser)
    browser.step("Quote: hard coat")
    result = browser.step("End: Answer")
    assert (result.valid, result.done, result.end_reason) == (True, True, EndReason.ANSWER)


def test_nonsense_and_controversial_end_without_quotes(backend):
    for choice in ("Nonsense", "Controversial"):
        browser = Browser(backend)
        browser.reset("Is the moon made of cheese?")
        result = browser.step(f"End: {choice}")
        assert result.done and result.end_reason == EndReason(choice.lower())
        assert not browser.step("Search moon").valid  # nothing happens after the end


def test_invalid_actions_count_toward_the_limit_and_change_nothing_else(backend):
    browser = Browser(backend, BrowserSettings(max_actions=3))
    browser.reset("What is pollen?")
    browser.step("Search pollen")
    before = browser.state()
    result = browser.step("please search for pollen")
    assert not result.valid and "Invalid action" in result.message
    after = browser.state()
    assert after["actions"][:-1] == before["actions"]
    assert {k: v for k, v in after.items() if k != "actions"} == {
        k: v for k, v in before.items() if k != "actions"
    }
    assert browser.actions_left == 1
    result = browser.step("Top")
    assert (result.done, result.end_reason) == (True, EndReason.ACTION_LIMIT)


def test_the_quote_budget_ends_browsing(backend):
    browser = Browser(backend, BrowserSettings(max_quote_chars=60))
    browser.reset("What is pollen?")
    open_pollen(browser)
    assert not browser.step("Quote: hard coat").done
    result = browser.step("Quote: Pollen is a powdery substance produced by seed plants. It consists")
    assert (result.done, result.end_reason) == (True, EndReason.QUOTE_LIMIT)
    assert sum(len(q.extract) for q in browser.quotes) <= 60
    assert browser.quotes[1].extract.startswith("Pollen is a powdery")


def test_pages_sharing_ten_words_with_the_question_or_answer_are_censored(backend):
    browser = Browser(backend)
    browser.reset(
        "What is pollen?",
        reference_answers=["It consists of pollen grains, which produce male gametes. Pollen"],
    )
    open_pollen(browser)
    assert browser.page.title == "Censored page"
    assert browser.page.kind == "error"


def test_observation_has_every_section_in_order(browser):
    open_pollen(browser)
    browser.step("Quote: hard coat")
    text = browser.observation()
    markers = [
        "♦Question",
        "♦Quotes",
        "♦Past actions",
        "♦Title",
        "♦Scrollbar: 0 - 4",
        "♦Text",
        "♦Actions left: 97",
        "♦Next action",
    ]
    positions = [text.index(marker) for marker in markers]
    assert positions == sorted(positions)
    assert text.startswith(
        "♦Question\nWhat is pollen made of?\n♦Quotes\n"
        "From Pollen - Wikipedia (en.wikipedia.org)\n> hard coat\n"
    )
    assert "♦Past actions\nSearch pollen\nClick Pollen - Wikipedia en.wikipedia.org\nQuote\n♦Title\n" in text
    assert text.endswith("♦Actions left: 97\n♦Next action")


def test_answer_prompt_format(browser):
    open_pollen(browser)
    browser.step("Quote: hard coat")
    browser.step("Quote: seed plants")
    assert browser.answer_prompt() == (
        "What is pollen made of?■[1] Pollen - Wikipedia (en.wikipedia.org)\n\nhard coat■"
        "[2] Pollen - Wikipedia (en.wikipedia.org)\n\nseed plants■"
    )


def test_state_round_trips_through_json_and_resumes(backend, browser):
    open_pollen(browser)
    browser.step("Scrolled down 1")
    browser.step("Quote: hard coat")
    restored = Browser.from_state(backend, json.loads(json.dumps(browser.state())))
    assert restored.observation() == browser.observation()
    assert restored.state() == browser.state()
    for command in ("Back", "Clicked on link 1", "Find in page: legs"):
        assert restored.step(command) == browser.step(command)
    assert restored.observation() == browser.observation()


def test_same_pages_and_commands_give_byte_identical_observations():
    commands = [
        "Search pollen",
        "Clicked on link 1",
        "Scrolled down 1",
        "Find in page: bees",
        "Quote: hard coat",
        "Back",
    ]
    transcripts = []
    for _ in range(2):
        browser = Browser(MemoryBackend(sample_documents()))
        browser.reset("What is pollen?")
        transcripts.append([browser.step(c) and browser.observation() for c in commands])
    assert transcripts[0] == transcripts[1]


class NoBackend:
    """A backend that must not be asked: a replay serves recorded pages only."""

    name = "none"

    def search(self, query, k=10):
        raise AssertionError("replay asked the backend to search")

    def fetch(self, url):
        raise AssertionError("replay asked the backend to fetch")


def test_a_replay_serves_the_recorded_pages_and_reproduces_every_observation(browser):
    commands = [
        "Search pollen",
        "Clicked on link 1",
        "Scrolled down 1",
        "Quote: hard coat",
        "Back",
        "Clicked on link 0",
    ]
    observations = []
    for command in commands:
        observations.append(browser.observation())
        browser.step(command)
    replay = Browser(NoBackend(), browser.settings, recorded=recorded_pages(browser.state()))
    replay.reset(browser.question)
    for command, expected in zip(commands, observations, strict=True):
        assert replay.observation() == expected
        replay.step(command)
    assert replay.observation() == browser.observation()


def test_the_answer_step_can_return_to_browsing_while_actions_remain(backend):
    browser = Browser(backend, BrowserSettings(max_actions=4))
    browser.reset("What is pollen?")
    open_pollen(browser)
    browser.step("Quote: hard coat")
    browser.step("End: Answer")
    assert browser.done and browser.actions_left == 0
    assert browser.reopen() is False  # no actions left
    browser = Browser(backend)
    browser.reset("What is pollen?")
    open_pollen(browser)
    browser.step("Quote: hard coat")
    browser.step("End: Answer")
    assert browser.reopen() is True
    assert not browser.done and browser.step("Top").valid
    browser.step("End: Nonsense")
    assert browser.reopen() is False
