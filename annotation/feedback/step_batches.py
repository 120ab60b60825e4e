"""Step-review batches (issue 38): one item per browsing episode, replayed step by step. The episodes are a
demonstration batch's finished demonstrations (or every finished demonstration), or the samples of sampling
runs: all of them, or only the ones a comparison judged worse (where the policy went wrong is what a process
reward model has to learn)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from django.db import transaction
from django.db.models import Count, Q, QuerySet

from annotation.feedback.batch_settings import BatchError, BatchSettings, batch_fields
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.feedback.step_pairs import candidate_pairs
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    DemonstrationBatch,
    Episode,
    EpisodeStatus,
    FeedbackBatch,
    FeedbackItem,
    FlagDecision,
)
from annotation.workforce.judgements import PREFERENCE, canonical
from core.models import log_action
from core.permissions import AnyUser

STEP_SOURCES = ("demonstrations", "runs")


def check_step_source(config: BatchSettings, source: str) -> None:
    """The sources a step review takes, and what only it reads: BatchError naming the field at fault."""
    if source not in STEP_SOURCES:
        raise BatchError(
            "A step review replays browsing episodes: choose finished demonstrations or sampling runs.",
            "source",
        )
    if config.template == "step_preference" and source != "runs":
        raise BatchError(
            "Step preferences are made from sampling runs: guided ones (a step model chose among the "
            "commands written at each step) or ones at demonstration states (a policy's action against the "
            "demonstrator's): choose sampling runs.",
            "source",
        )
    if config.include_declined:
        raise BatchError(
            "A step review takes every episode of the runs, declined or not: leave this out.",
            "include_declined",
        )
    batch_id = config.demonstration_batch
    if batch_id is not None:
        if source != "demonstrations":
            raise BatchError(
                "A demonstration batch is read only when the episodes are demonstrations.",
                "demonstration_batch",
            )
        if not DemonstrationBatch.objects.filter(pk=batch_id).exists():
            raise BatchError(f"There is no demonstration batch {batch_id}.", "demonstration_batch")
    if config.judged_worse and source != "runs":
        raise BatchError(
            "Only the episodes a comparison judged worse: read only when the episodes are sampling runs' "
            "samples.",
            "judged_worse",
        )


def _reviewable(episodes: QuerySet[Episode]) -> QuerySet[Episode]:
    """Finished episodes with at least one action (a step review needs a step), oldest first."""
    return (
        episodes.filter(status=EpisodeStatus.FINISHED)
        .annotate(step_total=Count("actions"))
        .filter(step_total__gt=0)
        .order_by("pk")
    )


def judged_worse(episode_ids: Iterable[int]) -> set[int]:
    """Of ``episode_ids``, those whose answer the submitted comparisons of an item judged worse on the
    whole (the mean preference of its judgements, flagged-and-excluded ones left out, is for the other
    answer); an even split judges neither."""
    answers = dict(Answer.objects.filter(episode_id__in=list(episode_ids)).values_list("pk", "episode_id"))
    if not answers:
        return set()
    rows = (
        Assignment.objects.filter(
            status=AssignmentStatus.SUBMITTED,
            item__batch__template__in=COMPARISON_TEMPLATES,
            item__answers__in=list(answers),
        )
        .exclude(flag_decision=FlagDecision.EXCLUDE)
        .distinct()
        .values_list("item_id", "item__batch__template", "response", "order")
    )
    preferences: dict[int, list[float]] = defaultdict(list)
    orders: dict[int, list[int]] = {}
    for item_id, template, response, order in rows:
        judgement = canonical(template, response, order)
        if PREFERENCE in judgement:  # for the answer with the lower id
            preferences[item_id].append(float(judgement[PREFERENCE]))
            orders[item_id] = order
    worse = set()
    for item_id, values in preferences.items():
        mean = sum(values) / len(values)
        if mean:
            loser = max(orders[item_id]) if mean > 0 else min(orders[item_id])
            if loser in answers:
                worse.add(answers[loser])
    return worse


def step_episodes(config: BatchSettings, source: str) -> tuple[list[Episode], dict]:
    """The episodes a step-review batch replays, and its origin (``FeedbackBatch.origin``)."""
    if source == "demonstrations":
        episodes = Episode.objects.human()
        batch_id = config.demonstration_batch
        if batch_id is not None:
            episodes = episodes.filter(batch_id=batch_id)
        chosen = list(_reviewable(episodes))
        return chosen, {"source": source, "demonstration_batch": batch_id, "episodes": len(chosen)}
    runs = list(config.runs)
    sampled = Q(sample__run__in=runs)
    if config.template == "step_preference":  # and the demonstrations a run sampled candidates at
        sampled |= Q(actions__policy_candidates__run__in=runs)
    chosen = list(_reviewable(Episode.objects.filter(sampled).distinct()))
    origin = {"source": source, "runs": runs, "judged_worse": config.judged_worse}
    if origin["judged_worse"]:
        worse = judged_worse(episode.pk for episode in chosen)
        origin["not_judged_worse"] = len(chosen) - len(worse)
        chosen = [episode for episode in chosen if episode.pk in worse]
    origin["episodes"] = len(chosen)
    return chosen, origin


def why_no_episodes(source: str, origin: dict) -> str:
    if source == "demonstrations":
        where = (
            f"demonstration batch {origin['demonstration_batch']}"
            if origin.get("demonstration_batch") is not None
            else "the demonstrations"
        )
        return f"no items: {where} has no finished episode with a step to review"
    if origin.get("judged_worse"):
        return (
            "no items: no sample of these runs was judged worse in a submitted comparison (make and judge a "
            "comparison batch of the runs first, or review all their episodes)"
        )
    return "no items: these runs have no finished episode with a step to review"


def create_step_batch(user: AnyUser | None, config: BatchSettings, source: str) -> FeedbackBatch:
    """The batch of ``step_episodes`` (the caller has checked the request): an item per episode, or per
    state with two candidates for step preferences (``step_pairs``); BatchError when there is none."""
    episodes, origin = step_episodes(config, source)
    if config.template == "step_preference":
        pairs = candidate_pairs(episodes, runs=config.runs)
        if not pairs:
            raise BatchError(
                "no items: no step of these runs' episodes has two different candidate commands (a guided "
                "run records them: sample with a step model; or sample at demonstration states)"
            )
        origin["states"] = len(pairs)
        return create_step_items(
            user, config, [pair.episode for pair in pairs], origin, steps=[pair.as_step() for pair in pairs]
        )
    if not episodes:
        raise BatchError(why_no_episodes(source, origin))
    return create_step_items(user, config, episodes, origin)


def create_step_items(
    user: AnyUser | None,
    config: BatchSettings,
    episodes: Sequence[Episode],
    origin: dict,
    steps: Sequence[dict] | None = None,
) -> FeedbackBatch:
    """One item per episode (finished, with a step), in one transaction; ``steps``: each item's state and
    candidates (``FeedbackItem.step``) for step preferences."""
    with transaction.atomic():
        batch = FeedbackBatch.objects.create(
            **batch_fields(user, config), item_count=len(episodes), origin=origin
        )
        if origin.get("runs"):
            batch.sampling_runs.set(origin["runs"])
        FeedbackItem.objects.bulk_create(
            FeedbackItem(
                batch=batch,
                question_id=episode.question_id,
                episode=episode,
                step=steps[n] if steps is not None else {},
            )
            for n, episode in enumerate(episodes)
        )
        log_action(
            user,
            "feedback_batch.create",
            batch,
            items=len(episodes),
            template=batch.template,
            source=origin.get("source", ""),
        )
    return batch
