"""The browsing page's search box shows the last query searched, in the htmx panel and after a reload."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.demonstrations import service
from annotation.models import Question
from annotation.questions.service import import_questions
from tests.test_demonstration_pages import post_action

pytestmark = pytest.mark.django_db


@pytest.fixture
def episode(freshwiki, dana):
    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    return service.next_episode(dana)


def search_box(html: str) -> str:
    start = html.index('id="search-query"')
    return html[start : html.index(">", start)]


def test_the_search_box_is_empty_before_any_search(client_for, dana, episode):
    html = client_for(dana).get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    assert 'value=""' in search_box(html)


def test_the_search_box_keeps_the_last_query_through_other_actions_and_a_reload(client_for, dana, episode):
    client = client_for(dana)
    post_action(client, episode, "search", "first query")
    post_action(client, episode, "search", 'AFL "Grand" <Final>')
    post_action(client, episode, "click", "0")  # opens a page: not a search
    panel = post_action(client, episode, "command", "Scrolled down 1").content.decode()
    assert 'value="AFL &quot;Grand&quot; &lt;Final&gt;"' in search_box(panel)  # the latest, escaped
    reloaded = client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    assert 'value="AFL &quot;Grand&quot; &lt;Final&gt;"' in search_box(reloaded)
    episode.refresh_from_db()
    assert [action.command for action in episode.actions.order_by("index")][-2:] == [
        "Clicked on link 0",
        "Scrolled down 1",
    ]
