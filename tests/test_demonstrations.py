"""Demonstration episodes: assignment, recording, idempotency, stale tabs, limits, the answer step."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.demonstrations import service
from annotation.demonstrations.batches import create_demonstration_batch
from annotation.models import Episode, EpisodeAction, EpisodeStatus, Question
from annotation.questions.service import import_questions
from browser.models import PageSnapshot
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

QUESTIONS = b"\n".join(
    b'{"id": "%d", "question": "Question number %d about the AFL Grand Final?"}' % (i, i) for i in range(40)
)


@pytest.fixture
def bank(freshwiki):
    import_questions(QUESTIONS, filename="bank.jsonl", dataset="bank")
    return Question.objects.filter(split="bc")


@pytest.fixture
def erin(django_user_model):
    return make_user(django_user_model, "erin", "demonstrator")


def act(episode: Episode, user, command: str, key=None) -> service.Outcome:
    episode.refresh_from_db()
    return service.record_action(episode.pk, user, command, key or uuid.uuid4(), episode.version)


def test_next_question_comes_from_the_bc_split_and_is_resumed_until_done(bank, dana):
    episode = service.next_episode(dana)
    assert episode.question.split == "bc"
    assert episode.status == EpisodeStatus.BROWSING
    assert service.next_episode(dana) == episode  # resumed, not a second one
    assert Episode.objects.count() == 1


def test_a_question_goes_to_one_demonstrator_at_a_time_and_never_twice_to_the_same(bank, dana, erin):
    first = service.next_episode(dana)
    second = service.next_episode(erin)
    assert first.question != second.question
    service.skip_episode(first.pk, dana, "I do not understand it")
    third = service.next_episode(dana)
    assert third.question not in (first.question, second.question)
    service.skip_episode(second.pk, erin, "too hard")
    assert service.next_episode(erin).question == first.question  # skipped questions return to the pool


def test_batches_come_first_and_can_ask_for_overlap(bank, dana, erin):
    extra = Question.objects.filter(dataset="bank").exclude(split="bc")[:1]
    create_demonstration_batch(None, "overlap two", extra, overlap=2)
    first, second = service.next_episode(dana), service.next_episode(erin)
    assert first.question == second.question == extra[0]
    assert first.batch == second.batch


def test_when_nothing_is_left_there_is_no_next_question(freshwiki, dana):
    assert service.next_episode(dana) is None


def test_each_command_is_recorded_with_what_was_seen_before_it(bank, dana):
    episode = service.next_episode(dana)
    before = service.open_browser(episode).observation()
    outcome = act(episode, dana, "Search AFL Grand Final")
    assert outcome.result.valid
    action = EpisodeAction.objects.get()
    assert (action.index, action.command, action.valid) == (0, "Search AFL Grand Final", True)
    assert action.observation_before == before
    assert PageSnapshot.objects.filter(digest=action.page_after, kind="search").exists()
    assert PageSnapshot.objects.filter(digest=action.page_before, kind="blank").exists()
    act(episode, dana, "Clicked on link 0")
    reloaded = service.open_browser(Episode.objects.get())  # as after a reload or a server restart
    assert reloaded.page.title == "2022 AFL Grand Final"
    assert (
        "♦Past actions\nSearch AFL Grand Final\nClick 2022 AFL Grand Final en.wikipedia.org\n"
        in reloaded.observation()
    )


def test_a_repeated_request_is_applied_once(bank, dana):
    episode = service.next_episode(dana)
    key = uuid.uuid4()
    first = service.record_action(episode.pk, dana, "Search AFL", key, 0)
    again = service.record_action(episode.pk, dana, "Search AFL", key, 0)
    assert first.result is not None and again.result is None and again.notice == ""
    assert EpisodeAction.objects.count() == 1
    assert Episode.objects.get().version == 1


def test_a_stale_tab_cannot_fork_the_episode(bank, dana):
    episode = service.next_episode(dana)
    service.record_action(episode.pk, dana, "Search AFL", uuid.uuid4(), 0)
    stale = service.record_action(episode.pk, dana, "Search Olympics", uuid.uuid4(), 0)
    assert stale.result is None
    assert stale.notice == service.STALE_MESSAGE
    assert list(EpisodeAction.objects.values_list("command", flat=True)) == ["Search AFL"]


def test_invalid_commands_are_recorded_as_invalid_and_explained(bank, dana):
    episode = service.next_episode(dana)
    outcome = act(episode, dana, "Quote: something")
    assert not outcome.result.valid
    action = EpisodeAction.objects.get()
    assert action.valid is False and "not on this page" in action.message
    assert "♦Error" in service.open_browser(Episode.objects.get()).observation()


def test_running_out_of_actions_moves_to_the_answer_step_when_there_are_quotes(bank, dana, settings):
    settings.BROWSER = {**settings.BROWSER, "max_actions": 3}
    episode = service.next_episode(dana)
    act(episode, dana, "Search AFL Grand Final")
    act(episode, dana, "Clicked on link 0")
    act(episode, dana, "Quote: Geelong")
    episode.refresh_from_db()
    assert (episode.status, episode.end_reason) == (EpisodeStatus.ANSWERING, "action_limit")
    assert (
        service.return_to_browsing(episode.pk, dana)
        == "No actions are left: write the answer with the quotes you have."
    )


def test_running_out_of_actions_without_quotes_finishes(bank, dana, settings):
    settings.BROWSER = {**settings.BROWSER, "max_actions": 1}
    episode = service.next_episode(dana)
    act(episode, dana, "Top")
    episode.refresh_from_db()
    assert (episode.status, episode.end_reason) == (EpisodeStatus.FINISHED, "action_limit")


def answering_episode(dana) -> Episode:
    episode = service.next_episode(dana)
    for command in ("Search AFL Grand Final", "Clicked on link 0", "Quote: won by Geelong", "End: Answer"):
        act(episode, dana, command)
    episode.refresh_from_db()
    return episode


def test_answers_are_checked_against_the_quotes(bank, dana):
    episode = answering_episode(dana)
    assert episode.status == EpisodeStatus.ANSWERING
    assert service.submit_answer(episode.pk, dana, "   ") == ["Write an answer before submitting."]
    assert service.submit_answer(episode.pk, dana, "Geelong won [1][2].") == [
        "Unknown citation [2]: your quotes are numbered [1] to [1]."
    ]
    assert service.submit_answer(episode.pk, dana, "Geelong won the grand final [1].") == []
    episode.refresh_from_db()
    assert (episode.status, episode.answer) == (EpisodeStatus.FINISHED, "Geelong won the grand final [1].")
    assert service.submit_answer(episode.pk, dana, "Geelong won the grand final [1].") == []  # a retry


def test_answering_without_quotes_is_refused_by_the_engine(bank, dana):
    episode = service.next_episode(dana)
    outcome = act(episode, dana, "End: Answer")
    assert not outcome.result.valid and "at least one quote" in outcome.result.message
    assert Episode.objects.get().status == EpisodeStatus.BROWSING


def test_drafts_autosave_and_browsing_can_resume_from_the_answer_step(bank, dana):
    episode = answering_episode(dana)
    service.save_draft(episode.pk, dana, "Geelong won")
    assert Episode.objects.get().answer_draft == "Geelong won"
    assert service.return_to_browsing(episode.pk, dana) == ""
    episode.refresh_from_db()
    assert episode.status == EpisodeStatus.BROWSING and episode.answer_draft == "Geelong won"
    assert act(episode, dana, "Scrolled down 1").result.valid
    with pytest.raises(service.EpisodeClosed):
        service.save_draft(episode.pk, dana, "not at the answer step")


def test_nonsense_finishes_without_an_answer_and_takes_a_note(bank, dana):
    episode = service.next_episode(dana)
    act(episode, dana, "End: Nonsense")
    episode.refresh_from_db()
    assert (episode.status, episode.end_reason) == (EpisodeStatus.FINISHED, "nonsense")
    service.save_note(episode.pk, dana, "The question mixes two events.")
    assert Episode.objects.get().note == "The question mixes two events."


def test_active_time_counts_only_gaps_without_long_idleness(bank, dana):
    episode = service.next_episode(dana)
    start = timezone.now()
    Episode.objects.filter(pk=episode.pk).update(last_seen_at=start, active_seconds=0)
    service.heartbeat(episode.pk, dana, now=start + timedelta(seconds=20))
    assert Episode.objects.get().active_seconds == 20
    service.heartbeat(episode.pk, dana, now=start + timedelta(seconds=20, minutes=10))
    assert Episode.objects.get().active_seconds == 20  # the ten minutes away do not count
    service.heartbeat(episode.pk, dana, now=start + timedelta(seconds=50, minutes=10))
    assert Episode.objects.get().active_seconds == 50  # back at work: the 30 s gap counts again


def test_other_peoples_episodes_cannot_be_changed(bank, dana, erin):
    episode = service.next_episode(dana)
    with pytest.raises(Episode.DoesNotExist):
        service.record_action(episode.pk, erin, "Top", uuid.uuid4(), 0)
    with pytest.raises(Episode.DoesNotExist):
        service.submit_answer(episode.pk, erin, "x [1]")
