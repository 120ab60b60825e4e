"""The demonstration pages beyond browsing and answering, each doing what it promises: the heartbeat counts
active time, "browse again" takes the episode back to browsing, a note is saved on a finished episode, and
a skip is recorded with its reason and puts the question back in the pool for others."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.demonstrations import service
from annotation.models import ActiveKind, Episode, EpisodeStatus, Question
from annotation.questions.service import import_questions
from annotation.workforce.activity import page_view
from core.models import AuditEntry
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
QUESTION = "Who won the 2022 AFL Grand Final?"


@pytest.fixture
def episode(freshwiki, dana) -> Episode:
    import_questions(f'{{"question": "{QUESTION}"}}'.encode(), filename="q.jsonl", explain_statements=False)
    Question.objects.update(split="bc")
    return service.next_episode(dana)


def act(episode: Episode, user, *commands: str) -> Episode:
    for command in commands:
        episode.refresh_from_db()
        outcome = service.record_action(episode.pk, user, command, uuid.uuid4(), episode.version)
        assert outcome.result is None or outcome.result.valid, outcome.result.message
    episode.refresh_from_db()
    return episode


def at_the_answer_step(episode: Episode, user) -> Episode:
    episode = act(
        episode, user, "Search AFL Grand Final", "Clicked on link 0", "Quote: Geelong", "End: Answer"
    )
    assert episode.status == EpisodeStatus.ANSWERING
    return episode


def shown_messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_heartbeat_counts_the_time_since_the_last_sign_of_activity(client_for, dana, episode):
    client = client_for(dana)
    url = reverse("annotation:heartbeat", args=[episode.pk])
    beat = {"page_view": page_view(dana, ActiveKind.DEMONSTRATION, episode.pk)}  # as the page sends it
    a_moment_ago = timezone.now() - timedelta(seconds=30)
    Episode.objects.filter(pk=episode.pk).update(last_seen_at=a_moment_ago, active_seconds=5)

    assert client.post(url, beat).status_code == 204
    episode.refresh_from_db()
    assert episode.last_seen_at > a_moment_ago
    # 5 s before plus the 30 s gap (and the moment the request took): a gap under a minute counts.
    counted = episode.active_seconds
    assert counted >= 35

    back_from_lunch = timezone.now() - timedelta(hours=1)
    Episode.objects.filter(pk=episode.pk).update(last_seen_at=back_from_lunch)
    assert client.post(url, beat).status_code == 204
    episode.refresh_from_db()
    assert episode.active_seconds == counted and episode.last_seen_at > back_from_lunch  # the hour does not


def test_the_heartbeat_of_a_finished_episode_changes_nothing(client_for, dana, episode):
    episode = at_the_answer_step(episode, dana)
    assert service.submit_answer(episode.pk, dana, "Geelong [1].") == []
    before = Episode.objects.values("last_seen_at", "active_seconds").get(pk=episode.pk)
    beat = {"page_view": page_view(dana, ActiveKind.DEMONSTRATION, episode.pk)}
    assert client_for(dana).post(reverse("annotation:heartbeat", args=[episode.pk]), beat).status_code == 204
    assert Episode.objects.values("last_seen_at", "active_seconds").get(pk=episode.pk) == before
    assert client_for(dana).get(reverse("annotation:heartbeat", args=[episode.pk])).status_code == 405


def test_browse_again_takes_the_answer_step_back_to_browsing_with_the_quotes_kept(client_for, dana, episode):
    episode = at_the_answer_step(episode, dana)
    quotes, version = episode.state["quotes"], episode.version
    client = client_for(dana)
    answer_page = client.get(reverse("annotation:episode", args=[episode.pk])).content.decode()
    assert reverse("annotation:browse_again", args=[episode.pk]) in answer_page

    response = client.post(reverse("annotation:browse_again", args=[episode.pk]), follow=True)
    assert response.redirect_chain == [(reverse("annotation:episode", args=[episode.pk]), 302)]
    episode.refresh_from_db()
    assert (episode.status, episode.end_reason, episode.version) == (EpisodeStatus.BROWSING, "", version + 1)
    assert episode.state["quotes"] == quotes
    page = response.content.decode()
    assert 'id="episode-panel"' in page and "Geelong" in page  # the browsing page, its quote listed
    assert act(episode, dana, "Scrolled down 1").status == EpisodeStatus.BROWSING  # browsing goes on


def test_browse_again_while_browsing_says_why_and_changes_nothing(client_for, dana, episode):
    version = episode.version
    response = client_for(dana).post(reverse("annotation:browse_again", args=[episode.pk]), follow=True)
    assert shown_messages(response) == ["This episode is not at the answer step."]
    episode.refresh_from_db()
    assert (episode.status, episode.version) == (EpisodeStatus.BROWSING, version)


def test_a_note_is_saved_on_a_finished_episode_and_shown_on_its_page(client_for, dana, episode):
    episode = at_the_answer_step(episode, dana)
    assert service.submit_answer(episode.pk, dana, "Geelong [1].") == []
    client = client_for(dana)
    response = client.post(
        reverse("annotation:note", args=[episode.pk]), {"note": "The final was in Melbourne."}, follow=True
    )
    assert response.redirect_chain == [(reverse("annotation:episode", args=[episode.pk]), 302)]
    assert shown_messages(response) == ["Note saved."]
    assert Episode.objects.get(pk=episode.pk).note == "The final was in Melbourne."
    assert "<dt>Note</dt><dd>The final was in Melbourne.</dd>" in response.content.decode()

    too_long = client.post(reverse("annotation:note", args=[episode.pk]), {"note": "x" * 5001}, follow=True)
    assert shown_messages(too_long) == ["The note is too long: at most 5000 characters."]
    assert Episode.objects.get(pk=episode.pk).note == "The final was in Melbourne."


def test_a_note_on_an_episode_still_in_progress_is_refused(client_for, dana, episode):
    response = client_for(dana).post(
        reverse("annotation:note", args=[episode.pk]), {"note": "hm"}, follow=True
    )
    assert shown_messages(response) == ["Notes are for finished episodes."]
    assert Episode.objects.get(pk=episode.pk).note == ""


def test_a_skip_is_recorded_with_its_reason_and_the_question_goes_back_to_the_pool(
    client_for, django_user_model, dana, episode
):
    episode = act(episode, dana, "Search AFL Grand Final")
    response = client_for(dana).post(
        reverse("annotation:skip", args=[episode.pk]), {"reason": "  I know nothing about football "}
    )
    assert response.url == reverse("annotation:next_question")
    episode.refresh_from_db()
    assert (episode.status, episode.note) == (EpisodeStatus.SKIPPED, "I know nothing about football")
    assert episode.finished_at is not None and not episode.is_open
    entry = AuditEntry.objects.get(action="episode.skip")
    assert (entry.actor, entry.object_id, entry.data) == (
        dana,
        str(episode.pk),
        {"reason": "I know nothing about football"},
    )

    assert service.next_episode(dana) is None  # never handed to dana again
    erin = make_user(django_user_model, "erin", "demonstrator")
    started = client_for(erin).post(reverse("annotation:start"))
    theirs = Episode.objects.get(user=erin)
    assert started.url == reverse("annotation:episode", args=[theirs.pk])
    assert theirs.question.text == QUESTION  # back in the pool for others


def test_a_skip_without_a_reason_is_refused_and_the_episode_goes_on(client_for, dana, episode):
    response = client_for(dana).post(
        reverse("annotation:skip", args=[episode.pk]), {"reason": ""}, follow=True
    )
    assert response.redirect_chain == [(reverse("annotation:episode", args=[episode.pk]), 302)]
    assert shown_messages(response) == ["Say why you skip this question."]
    episode.refresh_from_db()
    assert episode.status == EpisodeStatus.BROWSING and not AuditEntry.objects.filter(action="episode.skip")
