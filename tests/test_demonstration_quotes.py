"""Editing the quote list before answering, and the find box that keeps its text (issue 24): dana takes a
quote back from the browsing panel or the answer step, once per press, saved on the server at once."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse

from annotation.demonstrations import service
from annotation.models import Episode, EpisodeAction, EpisodeStatus, Question
from annotation.questions.service import import_questions
from core.models import AuditEntry
from tests.conftest import make_user
from tests.test_demonstration_pages import HTMX, panel_fields, post_action

pytestmark = pytest.mark.django_db


@pytest.fixture
def episode(freshwiki, dana):
    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    return service.next_episode(dana)


def page(client, episode) -> str:
    return client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()


def two_quotes(client, episode) -> str:
    """Open the AFL page and quote twice; the panel after the second quote."""
    html = post_action(client, episode, "search", "AFL Grand Final 2022").content.decode()
    html = post_action(client, episode, "click", "0", html=html).content.decode()
    html = post_action(client, episode, "quote", "won by Geelong", html=html).content.decode()
    return post_action(client, episode, "quote", "margin of 81 points", html=html).content.decode()


def remove(client, episode, number, html, headers=HTMX):
    data = {"number": number, **panel_fields(html)}
    return client.post(reverse("annotation:remove_quote", args=[episode.pk]), data, headers=headers)


def extracts(episode) -> list[str]:
    episode.refresh_from_db()
    return [quote["extract"] for quote in episode.state["quotes"]]


def test_each_quote_has_a_remove_button_named_for_it(client_for, dana, episode):
    html = two_quotes(client_for(dana), episode)
    for number in (1, 2):
        assert re.search(
            rf'<button type="submit" id="remove-quote-{number}" class="secondary">'
            rf'Remove<span class="visually-hidden"> quote {number}</span></button>',
            html,
        )
    assert html.count('class="inline remove-quote"') == 2


def test_removing_a_quote_is_saved_at_once_and_read_out(client_for, dana, episode):
    client = client_for(dana)
    html = two_quotes(client, episode)
    response = remove(client, episode, 1, html)
    panel = response.content.decode()
    assert response.status_code == 200 and panel.startswith('<div id="episode-panel"')
    assert 'data-announce="Quote 1 removed."' in panel
    assert "won by Geelong" not in panel.split("<h2>Quotes</h2>")[1]
    assert extracts(episode) == ["margin of 81 points"]
    assert episode.state["removed_quotes"][0]["quote"]["extract"] == "won by Geelong"
    assert EpisodeAction.objects.count() == 4  # an edit, not a browsing action: no row, no action spent
    entry = AuditEntry.objects.get(action="episode.remove_quote")
    assert (entry.actor, entry.data) == (dana, {"number": 1, "quote_action": 2})


def test_a_double_press_removes_once_and_a_stale_page_removes_nothing(client_for, dana, episode):
    client = client_for(dana)
    html = two_quotes(client, episode)
    remove(client, episode, 1, html)
    again = remove(client, episode, 1, html)  # the same key: already applied
    assert again.status_code == 200 and extracts(episode) == ["margin of 81 points"]
    stale = {**panel_fields(html), "key": "00000000-0000-0000-0000-000000000001"}
    response = client.post(
        reverse("annotation:remove_quote", args=[episode.pk]), {"number": 1, **stale}, headers=HTMX
    )
    assert "changed in another tab" in response.content.decode()
    assert extracts(episode) == ["margin of 81 points"]  # quote 1 of the stale page was another quote


def test_a_quote_that_is_not_there_is_refused_with_the_reason(client_for, dana, episode):
    client = client_for(dana)
    html = two_quotes(client, episode)
    refused = remove(client, episode, 3, html).content.decode()
    assert 'role="alert"' in refused and "There is no quote 3 (quotes are numbered 1 to 2)." in refused
    forged = client.post(reverse("annotation:remove_quote", args=[episode.pk]), {"number": "x"}, headers=HTMX)
    assert "nothing was done" in forged.content.decode()
    assert len(extracts(episode)) == 2


def test_at_the_answer_step_a_quote_is_removed_but_never_the_last(client_for, dana, episode):
    client = client_for(dana)
    html = two_quotes(client, episode)
    post_action(client, episode, "command", "End: Answer", html=html)
    answer_page = page(client, episode)
    quotes = answer_page.split("Your quotes")[1].split("</ol>")[0]
    assert 'id="remove-quote-2"' in quotes and "hx-post" not in quotes  # a whole page: a plain form
    response = remove(client, episode, 1, answer_page, headers={})
    assert response.status_code == 302 and response.url == reverse("annotation:episode", args=[episode.pk])
    after = page(client, episode)
    assert "Quote 1 removed. The quotes after it moved up one number" in after
    assert "remove-quote-1" not in after  # one quote left: nothing to remove
    episode.refresh_from_db()
    forged = {"number": 1, "key": uuid.uuid4(), "version": episode.version}  # no button: sent by hand
    refused = client.post(reverse("annotation:remove_quote", args=[episode.pk]), forged, follow=True)
    assert "Answering needs at least one quote" in refused.content.decode()
    assert extracts(episode) == ["margin of 81 points"]
    assert Episode.objects.get().status == EpisodeStatus.ANSWERING


def test_a_finished_episode_keeps_its_quotes(client_for, dana, episode):
    client = client_for(dana)
    html = two_quotes(client, episode)
    post_action(client, episode, "command", "End: Answer", html=html)
    answer_page = page(client, episode)
    client.post(reverse("annotation:answer", args=[episode.pk]), {"answer": "Geelong [1], by 81 [2]."})
    response = remove(client, episode, 1, answer_page, headers={})
    assert response.status_code == 302
    assert len(extracts(episode)) == 2


def test_nobody_else_removes_a_demonstrators_quote(client_for, django_user_model, alice, dana, episode):
    html = two_quotes(client_for(dana), episode)
    erin = make_user(django_user_model, "erin", "demonstrator")
    assert remove(client_for(erin), episode, 1, html).status_code == 404
    assert remove(client_for(alice), episode, 1, html).status_code == 403  # researchers read, never act
    assert len(extracts(episode)) == 2


def test_the_find_box_keeps_the_last_find_and_finding_again_moves_to_the_next_match(
    client_for, dana, episode
):
    client = client_for(dana)
    html = post_action(client, episode, "search", "AFL Grand Final 2022").content.decode()
    html = post_action(client, episode, "click", "0", html=html).content.decode()
    html = post_action(client, episode, "find", "Geelong", html=html).content.decode()
    assert re.search(r'<input id="find-text" name="text"[^>]* value="Geelong">', html)
    first = Episode.objects.get().state["cursor"]["find_offset"]
    html = post_action(client, episode, "find", "Geelong", html=html).content.decode()
    assert Episode.objects.get().state["cursor"]["find_offset"] > first  # the next match
    assert re.search(r'<input id="find-text" name="text"[^>]* value="Geelong">', html)
    html = post_action(client, episode, "command", "Top", html=html).content.decode()
    assert 'value="Geelong"' in html  # kept until another Find
