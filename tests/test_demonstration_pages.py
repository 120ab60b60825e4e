"""The demonstration pages over HTTP: who may see and act, htmx partials, form validation."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.demonstrations import service
from annotation.models import Episode, EpisodeAction, EpisodeStatus
from annotation.questions.service import import_questions
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture
def episode(freshwiki, dana):
    import_questions(
        b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl", explain_statements=False
    )
    from annotation.models import Question

    Question.objects.update(split="bc")
    return service.next_episode(dana)


def panel_fields(html: str) -> dict[str, str]:
    return {
        "key": re.search(r'name="key" value="([^"]+)"', html).group(1),
        "version": re.search(r'name="version" value="([^"]+)"', html).group(1),
    }


def post_action(client, episode, kind, text, html=None, headers=HTMX):
    html = html or client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    data = {"kind": kind, "text": text, **panel_fields(html)}
    return client.post(reverse("annotation:act", args=[episode.pk]), data, headers=headers)


def test_the_landing_page_starts_and_then_resumes_a_question(freshwiki, client_for, dana):
    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    from annotation.models import Question

    Question.objects.update(split="bc")
    client = client_for(dana)
    landing = client.get(reverse("annotation:next_question")).content.decode()
    assert "Start next question" in landing
    response = client.post(reverse("annotation:start"))
    episode = Episode.objects.get()
    assert response.url == reverse("annotation:episode", args=[episode.pk])
    assert "Resume your question" in client.get(reverse("annotation:next_question")).content.decode()


def test_the_browsing_page_has_every_control_with_its_name(client_for, dana, episode):
    html = client_for(dana).get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    for name in (
        "Search",
        "Back",
        "Top",
        "Scroll down",
        "Scroll up",
        "Find in page",
        "Quote",
        "End: Answer",
        "End: Nonsense",
        "End: Controversial",
    ):
        assert re.search(rf"<button[^>]*>{re.escape(name)}</button>", html), name
    assert '<label for="search-query">Search query</label>' in html
    assert '<label for="find-text">Find text</label>' in html
    assert "Who won the 2022 AFL Grand Final?" in html
    assert reverse("annotation:instructions") in html
    assert "<kbd>/</kbd>" in html  # shortcuts are listed


def test_an_htmx_action_returns_the_updated_panel_with_links(client_for, dana, episode):
    client = client_for(dana)
    response = post_action(client, episode, "search", "AFL Grand Final")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.startswith('<div id="episode-panel"')
    assert "Search results for: AFL Grand Final" in html
    assert re.search(r'<a href="#page-title" hx-post="[^"]+" hx-vals=\'\{"kind": "click", "text": "0"', html)
    response = post_action(client, episode, "click", "0", html=html)
    assert "2022 AFL Grand Final (en.wikipedia.org)" in response.content.decode()
    assert list(EpisodeAction.objects.values_list("command", flat=True)) == [
        "Search AFL Grand Final",
        "Clicked on link 0",
    ]


def test_a_refused_quote_shows_why(client_for, dana, episode):
    response = post_action(client_for(dana), episode, "quote", "words that are nowhere")
    html = response.content.decode()
    assert 'role="alert"' in html and "not on this page" in html
    assert EpisodeAction.objects.get().valid is False


def test_empty_or_forged_inputs_are_refused_without_recording_anything(client_for, dana, episode):
    client = client_for(dana)
    assert "Type what to search for." in post_action(client, episode, "search", "   ").content.decode()
    assert "Select text in the page first" in post_action(client, episode, "quote", "").content.decode()
    assert "Unknown command." in post_action(client, episode, "command", "Search evil").content.decode()
    assert "Unknown link." in post_action(client, episode, "click", "x").content.decode()
    response = client.post(
        reverse("annotation:act", args=[episode.pk]), {"kind": "search", "text": "AFL"}, headers=HTMX
    )
    assert response.status_code == 200 and "nothing was done" in response.content.decode()
    assert EpisodeAction.objects.count() == 0


def test_a_stale_tab_gets_the_current_state_and_a_message(client_for, dana, episode):
    client = client_for(dana)
    old_page = client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    post_action(client, episode, "search", "AFL")
    response = post_action(client, episode, "search", "Olympics", html=old_page)
    html = response.content.decode()
    assert "changed in another tab" in html
    assert "Search results for: AFL" in html
    assert EpisodeAction.objects.count() == 1


def test_without_htmx_actions_redirect_back_to_the_episode(client_for, dana, episode):
    response = post_action(client_for(dana), episode, "search", "AFL", headers={})
    assert response.status_code == 302 and response.url == reverse("annotation:episode", args=[episode.pk])


def test_ending_with_answer_leads_to_the_answer_step_and_submission(client_for, dana, episode):
    client = client_for(dana)
    html = post_action(client, episode, "search", "AFL Grand Final").content.decode()
    html = post_action(client, episode, "click", "0", html=html).content.decode()
    html = post_action(client, episode, "quote", "won by Geelong", html=html).content.decode()
    response = post_action(client, episode, "command", "End: Answer", html=html)
    assert response.status_code == 204
    assert response.headers["HX-Redirect"] == reverse("annotation:episode", args=[episode.pk])
    page = client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    assert "[1] 2022 AFL Grand Final (en.wikipedia.org)" in page
    assert '<label for="id_answer">Answer</label>' in page
    assert client.post(reverse("annotation:draft", args=[episode.pk]), {"answer": "Geel"}).status_code == 200
    bad = client.post(reverse("annotation:answer", args=[episode.pk]), {"answer": "Geelong [3]"}, follow=True)
    assert bad.redirect_chain == [(reverse("annotation:episode", args=[episode.pk]), 302)]
    assert "Unknown citation [3]" in bad.content.decode()
    good = client.post(reverse("annotation:answer", args=[episode.pk]), {"answer": "Geelong won [1]."})
    assert good.url == reverse("annotation:next_question")
    episode.refresh_from_db()
    assert episode.status == EpisodeStatus.FINISHED
    detail = client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    assert "Geelong won [1]." in detail and "Clicked on link 0" in detail


def test_another_demonstrator_gets_404_for_every_episode_url(client_for, django_user_model, episode):
    erin = make_user(django_user_model, "erin", "demonstrator")
    client = client_for(erin)
    assert client.get(reverse("annotation:episode", args=[episode.pk])).status_code == 404
    for name in ("act", "heartbeat", "draft", "answer", "browse_again", "note", "skip"):
        assert client.post(reverse(f"annotation:{name}", args=[episode.pk]), {}).status_code == 404, name
    assert EpisodeAction.objects.count() == 0


def test_labelers_outsiders_and_anonymous_visitors_cannot_use_demonstration_pages(
    client_for, bob, charlie, episode
):
    for user in (bob, charlie):
        client = client_for(user)
        assert client.get(reverse("annotation:next_question")).status_code == 403
        assert client.post(reverse("annotation:start")).status_code == 403
        assert client.get(reverse("annotation:episode", args=[episode.pk])).status_code == 404
        assert client.post(reverse("annotation:act", args=[episode.pk]), {}).status_code == 403
    anonymous = client_for(None)
    response = anonymous.get(reverse("annotation:episode", args=[episode.pk]))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_researchers_see_episodes_read_only(client_for, alice, episode):
    client = client_for(alice)
    page = client.get(reverse("annotation:episode", args=[episode.pk]))
    assert page.status_code == 200 and "by dana" in page.content.decode()
    assert client.post(reverse("annotation:act", args=[episode.pk]), {}).status_code == 403


def test_history_lists_only_ones_own_episodes(client_for, django_user_model, dana, episode):
    erin = make_user(django_user_model, "erin", "demonstrator")
    assert "AFL Grand Final" in client_for(dana).get(reverse("annotation:history")).content.decode()
    assert "AFL Grand Final" not in client_for(erin).get(reverse("annotation:history")).content.decode()


def test_a_researcher_creates_a_demonstration_batch_in_the_console(client_for, alice, bob, freshwiki):
    from annotation.models import DemonstrationBatch

    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl", dataset="afl")
    client = client_for(alice)
    form = {"name": "AFL", "dataset": "afl", "split": "", "limit": 10, "overlap": 2}
    response = client.post(reverse("console:demonstration_batches"), form)
    assert response.status_code == 302
    batch = DemonstrationBatch.objects.get()
    assert (batch.name, batch.overlap, batch.questions.count()) == ("AFL", 2, 1)
    assert "AFL" in client.get(reverse("console:demonstration_batches")).content.decode()
    empty = client.post(reverse("console:demonstration_batches"), {**form, "dataset": "none"})
    assert empty.status_code == 400 and "No question matches" in empty.content.decode()
    assert client_for(bob).get(reverse("console:demonstration_batches")).status_code == 403


def at_the_answer_step(client, episode) -> None:
    html = post_action(client, episode, "search", "AFL Grand Final").content.decode()
    html = post_action(client, episode, "click", "0", html=html).content.decode()
    html = post_action(client, episode, "quote", "won by Geelong", html=html).content.decode()
    post_action(client, episode, "command", "End: Answer", html=html)
    episode.refresh_from_db()
    assert episode.status == EpisodeStatus.ANSWERING


def test_a_reload_after_a_refused_answer_shows_the_newer_draft_and_never_reposts(client_for, dana, episode):
    client = client_for(dana)
    at_the_answer_step(client, episode)
    page_url = reverse("annotation:episode", args=[episode.pk])
    refused = client.post(reverse("annotation:answer", args=[episode.pk]), {"answer": "Geelong [3]"})
    assert refused.status_code == 302 and refused.url == page_url
    page = client.get(page_url).content.decode()
    assert "Unknown citation [3]" in page and ">Geelong [3]</textarea>" in page
    client.post(reverse("annotation:draft", args=[episode.pk]), {"answer": "Geelong, by 81 points [1]"})
    reload = client.get(page_url).content.decode()  # a reload GETs the page: nothing is re-posted
    assert ">Geelong, by 81 points [1]</textarea>" in reload and "Unknown citation" not in reload
    assert Episode.objects.get().answer_draft == "Geelong, by 81 points [1]"


def test_an_unstorable_answer_says_what_is_wrong_and_is_shown_back(client_for, dana, episode):
    client = client_for(dana)
    at_the_answer_step(client, episode)
    response = client.post(
        reverse("annotation:answer", args=[episode.pk]), {"answer": "Gee\x00long [1]"}, follow=True
    )
    page = response.content.decode()
    assert "may not contain NUL characters" in page and "too long" not in page
    assert "long [1]</textarea>" in page  # shown back to fix
    draft = client.post(reverse("annotation:draft", args=[episode.pk]), {"answer": "x" * 20_001})
    assert draft.status_code == 400 and "at most 20000 characters" in draft.content.decode()
    assert Episode.objects.get().status == EpisodeStatus.ANSWERING


def test_a_different_answer_from_a_second_tab_is_refused_and_shown_back(client_for, dana, episode):
    client = client_for(dana)
    at_the_answer_step(client, episode)
    answer_url = reverse("annotation:answer", args=[episode.pk])
    assert client.post(answer_url, {"answer": "Geelong won [1]."}).url == reverse("annotation:next_question")
    second_tab = client.post(answer_url, {"answer": "Geelong beat Sydney by 81 points [1]."}, follow=True)
    assert second_tab.redirect_chain == [(reverse("annotation:episode", args=[episode.pk]), 302)]
    page = second_tab.content.decode()
    assert "already answered" in page and "not saved" in page
    assert ">Geelong beat Sydney by 81 points [1].</textarea>" in page  # the text, to copy
    assert Episode.objects.get().answer == "Geelong won [1]."
    again = client.post(answer_url, {"answer": "Geelong won [1]."})  # the first tab's retry stays harmless
    assert again.url == reverse("annotation:next_question")


def test_an_answer_after_another_tab_went_back_to_browsing_is_shown_back(client_for, dana, episode):
    client = client_for(dana)
    at_the_answer_step(client, episode)
    client.post(reverse("annotation:browse_again", args=[episode.pk]))
    response = client.post(
        reverse("annotation:answer", args=[episode.pk]), {"answer": "Geelong [1]."}, follow=True
    )
    page = response.content.decode()
    assert "went back to browsing" in page and ">Geelong [1].</textarea>" in page
    assert 'id="episode-panel"' in page  # the browsing page, where the episode is now
