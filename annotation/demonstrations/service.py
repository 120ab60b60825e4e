"""Demonstration episodes: handing out questions, recording every command, the answer step.

Every change takes the episode's row lock inside a transaction, so two requests for one episode (a double
click, a retry, a second tab) are applied one after the other, and the checks below see the latest state.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.demonstrations.answers import answer_errors
from annotation.demonstrations.batches import batch_source
from annotation.models import (
    DEMONSTRATION,
    DemonstrationBatch,
    Episode,
    EpisodeAction,
    EpisodeStatus,
    Question,
    Split,
)
from annotation.workforce.gate import demonstration_state, refusal
from annotation.workforce.states import State
from browser.engine.backend import ReplayOnly
from browser.engine.browser import Browser, StepResult
from browser.engine.commands import EndReason, InvalidCommand
from browser.services import browser_settings, restore_browser, save_browser
from browser.sources import open_source
from core.models import log_action
from core.permissions import AnyUser

# Gaps longer than this between signs of activity do not count as time on task.
IDLE_LIMIT = timedelta(seconds=60)
STALE_MESSAGE = "This episode changed in another tab or window: here is its current state."
LAST_QUOTE = (
    "Answering needs at least one quote: go back to browsing to quote another before removing this one."
)


class EpisodeClosed(ValueError):
    """The episode is not in a state that allows this (for example, it is finished)."""


@dataclass(frozen=True)
class Outcome:
    episode: Episode
    result: StepResult | None = None  # None when nothing was applied
    notice: str = ""
    browser: Browser | None = None  # the episode's browser after the change, when one was opened


def next_episode(user: AnyUser) -> Episode | None:
    """The person's open episode, or a new one on a question they have not done; None when none is left."""
    current = Episode.objects.filter(user=user).open().select_related("batch").first()
    if current is not None and not _refused(current, user):
        return current
    with transaction.atomic():
        question, batch = _pick_question(user)
        if question is None:
            return None
        search, corpus = batch_source(batch)
        browser = Browser(open_source(search, corpus), browser_settings())
        browser.reset(question.text, question.reference_answers)
        episode = Episode.objects.create(
            user=user,
            question=question,
            batch=batch,
            corpus=corpus,
            search=search,
            settings=browser.settings.to_dict(),
            state=save_browser(browser),
            last_seen_at=timezone.now(),
        )
        log_action(user, "episode.start", episode, question=question.pk)
    return episode


def _pick_question(user: AnyUser) -> tuple[Question | None, DemonstrationBatch | None]:
    """Active batches first (each question to ``overlap`` people), then the bc split (one person each)
    unless settings.DEMONSTRATION_SPLIT_FALLBACK is off.

    Rows are locked with SKIP LOCKED, so two people asking at the same moment get different questions.
    """
    done_by_user = Episode.objects.filter(question=OuterRef("pk"), user=user)
    # The gate: an applicant demonstrates the screening tests' questions only, a qualified person the rest.
    state = demonstration_state(user)
    if state not in (State.APPLICANT, State.QUALIFIED):
        return None, None
    screening = state == State.APPLICANT
    for batch in DemonstrationBatch.objects.filter(is_active=True, is_screening=screening):
        taken = (
            Episode.objects.human()
            .filter(question=OuterRef("pk"), batch=batch)
            .exclude(status=EpisodeStatus.SKIPPED)
            .values("question")
            .annotate(n=Count("pk"))
            .values("n")
        )
        question = (
            batch.questions.annotate(taken=Coalesce(Subquery(taken, output_field=IntegerField()), 0))
            .filter(~Exists(done_by_user))
            .filter(Q() if batch.is_screening else Q(taken__lt=batch.overlap))
            .order_by("key")
            .select_for_update(skip_locked=True, of=("self",))
            .first()
        )
        if question is not None:
            return question, batch
    if screening or not settings.DEMONSTRATION_SPLIT_FALLBACK:
        return None, None
    # Model samples never take a question from the people who demonstrate it.
    taken_by_anyone = (
        Episode.objects.human().filter(question=OuterRef("pk")).exclude(status=EpisodeStatus.SKIPPED)
    )
    in_active_batch = DemonstrationBatch.objects.filter(is_active=True, questions=OuterRef("pk"))
    question = (
        Question.objects.filter(split=Split.BC)
        .filter(~Exists(done_by_user), ~Exists(taken_by_anyone), ~Exists(in_active_batch))
        .order_by("key")
        .select_for_update(skip_locked=True, of=("self",))
        .first()
    )
    return question, None


def _refused(episode: Episode, user: AnyUser) -> str:
    """Why the person's state for demonstrations stops them from changing this episode now ("" when
    nothing does): a pause or a revocation ends the episode they hold (``workforce.held_work``), and this
    refuses every change that still arrives for it."""
    return refusal(user, DEMONSTRATION, "", bool(episode.batch_id and episode.batch.is_screening))


def open_browser(episode: Episode, *, with_all_pages: bool = False) -> Browser:
    """The episode's browser on its source; ``with_all_pages``: every page it opened, for a replay, which
    asks no backend (a live episode replays with the network gone or the provider since unconfigured)."""
    if with_all_pages:
        return restore_browser(ReplayOnly(), episode.state, with_all_pages=True)
    return restore_browser(open_source(episode.search, episode.corpus), episode.state)


def record_action(episode_id: int, user: AnyUser, command: str, key: uuid.UUID, version: int) -> Outcome:
    """Apply one command once: a repeated key is ignored, a stale version is refused."""
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id, user=user)
        refused = _not_applied(episode, key, version)
        if refused is not None:
            return refused
        if standing := _refused(episode, user):
            return Outcome(episode, notice=standing)
        if episode.status != EpisodeStatus.BROWSING:
            return Outcome(episode, notice="Browsing has ended for this episode.")
        browser = open_browser(episode)
        observation, page_before = browser.observation(), browser.page.digest
        result = browser.step(command)
        episode.state = save_browser(browser, episode.state["pages"])
        EpisodeAction.objects.create(
            episode=episode,
            index=len(browser.actions) - 1,  # the engine's action list and the rows grow together
            command=command.strip(),
            valid=result.valid,
            message=result.message,
            observation_before=observation,
            page_before=page_before,
            page_after=browser.page.digest,
            idempotency_key=key,
        )
        if result.done:
            _end_browsing(episode, browser)
        _applied(episode, key)
    return Outcome(episode, result, browser=browser)


def _not_applied(episode: Episode, key: uuid.UUID, version: int) -> Outcome | None:
    """Why a change sent from the page is not applied, if it is not: a repeated key is a double click or
    a retry of the last change (already applied: nothing to say); a stale version means the page showed
    an older state (an older retry lands here too: refused, never applied twice)."""
    if key == episode.last_action_key:
        return Outcome(episode)
    if version != episode.version:
        return Outcome(episode, notice=STALE_MESSAGE)
    return None


def _applied(episode: Episode, key: uuid.UUID) -> None:
    """Save a change made under the row lock: a new version, its key, the time on task."""
    _touch(episode, timezone.now())
    episode.version += 1
    episode.last_action_key = key
    episode.save(update_fields=[*_STEP_FIELDS])


def remove_quote(episode_id: int, user: AnyUser, number: int, key: uuid.UUID, version: int) -> Outcome:
    """Take quote ``number`` off the episode's list, once (the key and version rules of ``record_action``:
    a stale page would name another quote by that number). While browsing and at the answer step, where
    one quote must stay. The engine records the removal in the episode's state (``removed_quotes``, which
    the trajectory page and the BC examples read); the audit trail gets an entry."""
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id, user=user)
        refused = _not_applied(episode, key, version)
        if refused is not None:
            return refused
        if standing := _refused(episode, user):
            return Outcome(episode, notice=standing)
        if not episode.is_open:
            return Outcome(episode, notice="This episode is closed: its quotes stay as they were.")
        browser = open_browser(episode)
        answering = episode.status == EpisodeStatus.ANSWERING
        try:
            if answering and len(browser.quotes) == 1:
                raise InvalidCommand(LAST_QUOTE)
            browser.remove_quote(number)
        except InvalidCommand as exc:
            return Outcome(episode, StepResult(False, str(exc), False, None), browser=browser)
        episode.state = save_browser(browser, episode.state["pages"])
        _applied(episode, key)
        removal = browser.removed_quotes[-1]
        log_action(user, "episode.remove_quote", episode, number=number, quote_action=removal.action)
    message = f"Quote {number} removed."
    if answering and number <= len(browser.quotes):
        message += " The quotes after it moved up one number: check the citations in your answer."
    return Outcome(episode, StepResult(True, message, False, None), browser=browser)


_STEP_FIELDS = (
    "state",
    "status",
    "end_reason",
    "finished_at",
    "version",
    "last_action_key",
    "active_seconds",
    "last_seen_at",
)


def _end_browsing(episode: Episode, browser: Browser) -> None:
    reason = browser.end_reason
    episode.end_reason = reason.value if reason else ""
    # Limits end browsing but not the episode: whoever has quotes still writes the answer.
    if reason == EndReason.ANSWER or (
        reason in {EndReason.ACTION_LIMIT, EndReason.QUOTE_LIMIT} and browser.quotes
    ):
        episode.status = EpisodeStatus.ANSWERING
    else:
        episode.status = EpisodeStatus.FINISHED
        episode.finished_at = timezone.now()


def _touch(episode: Episode, now: datetime) -> None:
    """Count the time since the last sign of activity, unless the person was away."""
    if episode.last_seen_at is not None and timedelta(0) <= now - episode.last_seen_at <= IDLE_LIMIT:
        episode.active_seconds += (now - episode.last_seen_at).total_seconds()
    episode.last_seen_at = now


def heartbeat(episode_id: int, user: AnyUser, *, now: datetime | None = None) -> bool:
    """The page is visible and in use (sent by the page every few seconds while that is so); whether it
    counted (only while the episode is open)."""
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id, user=user)
        if episode.is_open:
            _touch(episode, now or timezone.now())
            episode.save(update_fields=["active_seconds", "last_seen_at"])
        return episode.is_open


def save_draft(episode_id: int, user: AnyUser, text: str) -> Episode:
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id, user=user)
        if episode.status != EpisodeStatus.ANSWERING:
            raise EpisodeClosed("This episode is not at the answer step.")
        if standing := _refused(episode, user):
            raise EpisodeClosed(standing)
        episode.answer_draft = text
        _touch(episode, timezone.now())
        episode.save(update_fields=["answer_draft", "active_seconds", "last_seen_at"])
    return episode


def submit_answer(episode_id: int, user: AnyUser, text: str) -> list[str]:
    """Finish the episode with its answer, or say why not. Submitting the same answer again is harmless;
    another answer once the episode left the answer step (from a second tab) is refused with the reason,
    never dropped silently."""
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id, user=user)
        if episode.status == EpisodeStatus.FINISHED and episode.answer == text:
            return []
        if episode.status != EpisodeStatus.ANSWERING:
            return [_not_answering(episode)]
        if standing := _refused(episode, user):
            return [standing]
        errors = answer_errors(text, len(episode.state["quotes"]))
        episode.answer_draft = text
        if not errors:
            episode.answer = text
            episode.status = EpisodeStatus.FINISHED
            episode.finished_at = timezone.now()
            episode.version += 1
            log_action(user, "episode.answer", episode)
        _touch(episode, timezone.now())
        episode.save()
    return errors


def _not_answering(episode: Episode) -> str:
    """Why an answer is refused when the episode is no longer at the answer step."""
    if episode.status == EpisodeStatus.FINISHED and episode.answer:
        what = "was already answered (in another tab or window?) with a different answer"
    elif episode.status == EpisodeStatus.FINISHED:
        what = "was finished without an answer"
    elif episode.status == EpisodeStatus.SKIPPED:
        what = "was skipped"
    else:
        what = "went back to browsing (in another tab or window?)"
    return f"This question {what}: the answer you sent was not saved."


def return_to_browsing(episode_id: int, user: AnyUser) -> str:
    """Leave the answer step for more browsing while actions remain; the reason why not otherwise."""
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id, user=user)
        if episode.status != EpisodeStatus.ANSWERING:
            return "This episode is not at the answer step."
        if standing := _refused(episode, user):
            return standing
        browser = open_browser(episode)
        if not browser.reopen():
            return "No actions are left: write the answer with the quotes you have."
        episode.state = save_browser(browser, episode.state["pages"])
        episode.status, episode.end_reason = EpisodeStatus.BROWSING, ""
        episode.version += 1
        episode.save()
    return ""


def save_note(episode_id: int, user: AnyUser, note: str) -> None:
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id, user=user)
        if episode.status != EpisodeStatus.FINISHED:
            raise EpisodeClosed("Notes are for finished episodes.")
        episode.note = note
        episode.save(update_fields=["note"])


def skip_episode(episode_id: int, user: AnyUser, reason: str) -> None:
    """Give the question back (it returns to the pool for others) with a reason."""
    if not reason.strip():
        raise EpisodeClosed("Say why you skip this question.")
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id, user=user)
        if not episode.is_open:
            raise EpisodeClosed("This episode is already closed.")
        episode.status, episode.note, episode.finished_at = (
            EpisodeStatus.SKIPPED,
            reason.strip(),
            timezone.now(),
        )
        episode.version += 1
        episode.save()
        log_action(user, "episode.skip", episode, reason=reason.strip())


def open_question_count() -> int:
    """How many questions are waiting for anyone (an indication for the landing page): those of active
    batches, and the untaken bc questions when the bc split is handed out too."""
    taken = Episode.objects.human().filter(question=OuterRef("pk")).exclude(status=EpisodeStatus.SKIPPED)
    pool = Q(demonstration_batches__is_active=True)
    if settings.DEMONSTRATION_SPLIT_FALLBACK:
        pool |= Q(split=Split.BC)
    return Question.objects.filter(pool).filter(~Exists(taken)).distinct().count()
