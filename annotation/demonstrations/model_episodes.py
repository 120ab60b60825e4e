"""A model's episode stored as demonstrations are (kind model, no user): the browser's state with its pages
as snapshots, and every action with the observation the model saw before it. Sampling runs store their
samples so (``training/sampling/jobs.py``), and so does the demo's scripted browsing (``demo_steps``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from django.utils import timezone

from annotation.models import Episode, EpisodeAction, EpisodeKind, EpisodeStatus, Question
from browser.engine.browser import Browser
from browser.services import save_browser


class ActionRecord(NamedTuple):
    """One action as it happened: what was seen before it, the command, the browser's verdict, the pages
    before and after, and (a guided step's) every candidate command with its score."""

    observation: str
    command: str
    valid: bool
    message: str
    page_before: str
    page_after: str
    candidates: tuple[dict, ...] = ()


def store_model_episode(
    *,
    question: Question,
    policy: str,
    browser: Browser,
    actions: Iterable[ActionRecord],
    answer: str,
    end_reason: str,
    corpus: str,
    search: str,
) -> Episode:
    """A finished model episode and its actions (the caller's transaction)."""
    now = timezone.now()
    episode = Episode.objects.create(
        kind=EpisodeKind.MODEL,
        user=None,
        policy=policy,
        question=question,
        status=EpisodeStatus.FINISHED,
        end_reason=end_reason,
        corpus=corpus,
        search=search,
        settings=browser.settings.to_dict(),
        state=save_browser(browser),
        answer=answer,
        finished_at=now,
        last_seen_at=now,
    )
    EpisodeAction.objects.bulk_create(
        EpisodeAction(
            episode=episode,
            index=index,
            command=action.command,
            valid=action.valid,
            message=action.message,
            observation_before=action.observation,
            page_before=action.page_before,
            page_after=action.page_after,
            candidates=list(action.candidates),
        )
        for index, action in enumerate(actions)
    )
    return episode
