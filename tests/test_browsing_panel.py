"""What the browsing panel shows beyond the model's observation: the Find match marked, the sentence the live
region reads out after each action, the corpus line and the active time."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from annotation.demonstrations import service
from annotation.demonstrations.announce import announcement
from annotation.demonstrations.presenter import active_time, line_segments, panel_context
from annotation.models import Episode, Question
from annotation.questions.service import import_questions
from browser.models import Corpus
from browser.sources import describe_source
from tests.test_demonstration_pages import HTMX, post_action

pytestmark = pytest.mark.django_db


@pytest.fixture
def episode(freshwiki, dana):
    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    return service.next_episode(dana)


def step(episode: Episode, user, *commands: str) -> dict:
    """Apply ``commands`` in order; the panel's context after the last one."""
    for command in commands:
        episode.refresh_from_db()
        outcome = service.record_action(episode.pk, user, command, uuid.uuid4(), episode.version)
    return panel_context(outcome.episode, outcome.browser, message=outcome.result.message)


def marked(context: dict) -> list[str]:
    return [piece["text"] for line in context["lines"] for piece in line if piece.get("mark")]


OPEN_AFL = ("Search AFL Grand Final 2022", "Clicked on link 0")


def test_a_line_is_cut_at_the_edges_of_the_mark_and_a_link_inside_is_marked_whole():
    segments = line_segments("ab 【0†link text†x.org】 cd", (1, 5))
    assert segments == [
        {"text": "a"},
        {"text": "b ", "mark": True},
        {"link": 0, "text": "link text", "domain": "x.org", "mark": True},
        {"text": " cd"},
    ]
    assert line_segments("ab cd") == [{"text": "ab cd"}]


def test_find_marks_its_match_in_the_pages_spelling_until_the_next_action(episode, dana):
    found = step(episode, dana, *OPEN_AFL, "Find in page: MARGIN OF 81 points")
    assert marked(found) == ["margin of 81 points"]
    assert found["announcement"].startswith(
        "Found 'MARGIN OF 81 points': 2022 AFL Grand Final (en.wikipedia.org)"
    )
    missed = step(episode, dana, "Find in page: zebra crossing")  # the cursor keeps the earlier match
    assert marked(missed) == [] and missed["announcement"] == "No match for 'zebra crossing'."
    assert marked(step(episode, dana, "Find in page: Geelong", "Scrolled down 1")) == []


def test_a_match_across_two_lines_is_marked_on_both(episode, dana):
    context = step(episode, dana, *OPEN_AFL)
    lines = context["lines"]
    first, second = (" ".join(p["text"] for p in line) for line in lines[1:3])
    needle = f"{first.split()[-1]} {second.split()[0]}"  # the last word of a line and the first of the next
    assert marked(step(episode, dana, f"Find in page: {needle}")) == needle.split()


def test_the_announcement_says_what_each_action_changed(episode, dana):
    results = step(episode, dana, "Search AFL Grand Final 2022")
    count = len(results["link_urls"])
    assert count > 1 and results["announcement"] == f"{count} results for 'AFL Grand Final 2022'."
    opened = step(episode, dana, "Clicked on link 0")
    total = -(-opened["scrollbar"]["total"] // 20)
    assert opened["announcement"] == f"2022 AFL Grand Final (en.wikipedia.org), page 1 of {total}."
    assert step(episode, dana, "Scrolled down 1")["announcement"].endswith(f"page 2 of {total}.")
    assert step(episode, dana, "Quote: Geelong")["announcement"] == "Quote 1 added."
    back = step(episode, dana, "Back", "Top")
    windows = -(-back["scrollbar"]["total"] // 20)
    assert back["announcement"] == f"Search results for: AFL Grand Final 2022, page 1 of {windows}."
    nothing = step(episode, dana, "Search qqqxyzzy")
    assert nothing["announcement"] == "0 results for 'qqqxyzzy'."


def test_a_refused_action_is_left_to_the_alert_and_a_stale_tab_is_read_out(client_for, dana, episode):
    client = client_for(dana)
    old_page = client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    refused = post_action(client, episode, "quote", "words that are nowhere").content.decode()
    assert 'role="alert"' in refused and 'data-announce=""' in refused
    stale = post_action(client, episode, "search", "Olympics", html=old_page).content.decode()
    assert (
        'data-announce="This episode changed in another tab or window: here is its current state."' in stale
    )
    assert 'role="alert"' not in stale  # not the person's mistake: a note, read out by the live region
    episode.refresh_from_db()
    browser = service.open_browser(episode)
    assert announcement(browser, "Refused.", valid=False) == ""


def test_the_page_shows_the_corpus_searched_and_the_active_time(client_for, dana, episode):
    Episode.objects.filter(pk=episode.pk).update(active_seconds=252.7)
    client = client_for(dana)
    html = client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    assert '<p id="corpus-line" class="corpus-line">Searching freshwiki: 100 pages</p>' in html
    assert '<span id="active-time" data-seconds="252">4:12</span>' in html
    assert '<p id="live-status" class="live-status" role="status" aria-live="polite"></p>' in html
    panel = post_action(client, episode, "search", "AFL", headers=HTMX).content.decode()
    assert 'id="active-time"' in panel and "live-status" not in panel  # the region stays; the panel changes


def test_corpus_lines_and_active_times_read_naturally(db):
    Corpus.objects.create(name="one", document_count=1)
    Corpus.objects.create(name="big", document_count=886_000)
    assert describe_source("local", "one") == "Searching one: 1 page"
    assert describe_source("local", "big") == "Searching big: 886,000 pages"
    assert describe_source("local", "gone") == "Searching gone"
    assert describe_source("searxng") == "Searching the live web with SearXNG"
    assert [active_time(s) for s in (0, 59.9, 252, 3723)] == ["0:00", "0:59", "4:12", "1:02:03"]
