"""Routing a batch by a judge run: where the judge is confident and its verdict is the same in both orders,
its verdict decides the item and labelers never get it; the rest, and a seeded random audit share of the
judge's items, go to labelers (the audit measures the routed verdicts against the auditors).

While a batch has a routed judge run that is queued or running, the gate holds all its items from labelers
(``holding_runs``, read by ``workforce.gate``), so nobody takes an item the judge is about to decide; a run
that fails or is cancelled holds nothing, and every item goes to humans as before.

How an item is closed: ``is_open`` False, the same flag a full item has, so the pool's index scan, the
counts of waiting work and the next-task pick all pass it by with no rule of their own. Nothing reopens it:
slots come back to the pool only from a lease that expires or is skipped (``slots.release_slot``), an
expired lease is retaken only by its labeler (``_retake``), and adaptive overlap asks for more only on
disagreement among submissions; so only items no labeler has started (nothing leased, submitted, expired or
late: skipped tasks aside) are routed to the judge, checked under the items' row locks. Gold items measure
labelers and a screening test measures applicants: they always go to humans."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from annotation.judging.verdicts import Verdict, run_verdicts
from annotation.models import Assignment, AssignmentStatus, FeedbackItem, JudgeRun, RoutePath, Routing
from core.jobs.models import JobStatus
from core.models import log_action

HOLDING = (JobStatus.QUEUED, JobStatus.RUNNING)
DEFAULT_CONFIDENCE_THRESHOLD = 0.8
DEFAULT_AUDIT_SHARE = 0.1
DEFAULT_SEED = 0
# Assignments that leave an item with the labelers: any but a skipped task (its slot is back in the pool and
# it never comes back) or a researcher's reference (no slot at all).
_NOT_STARTED = (AssignmentStatus.SKIPPED, AssignmentStatus.REFERENCE)


@dataclass(frozen=True)
class RoutingSettings:
    confidence_threshold: float = DEFAULT_CONFIDENCE_THRESHOLD
    audit_share: float = DEFAULT_AUDIT_SHARE
    seed: int = DEFAULT_SEED


def routing_settings(settings: Mapping[str, Any] | None) -> RoutingSettings:
    """The routing settings of a run's ``settings`` (defaults where absent); ValueError naming a bad one."""
    settings = settings if isinstance(settings, Mapping) else {}
    found = {}
    for name in ("confidence_threshold", "audit_share"):
        value = settings.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"'{name}' must be a number from 0 to 1, not {value!r}.")
        found[name] = float(value)
    seed = settings.get("seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"'seed' must be a whole number from 0, not {seed!r}.")
        found["seed"] = seed
    return RoutingSettings(**found)


def holding_runs() -> QuerySet[JudgeRun]:
    """The routed judge runs that hold their batches' items from labelers now: queued or running."""
    return JudgeRun.objects.filter(route=True, status__in=HOLDING)


def is_confident(found: Verdict | None, threshold: float) -> bool:
    """Whether a verdict may decide its item: the same in both orders, with a confidence of at least
    ``threshold`` (a judge that gives no confidence is never confident)."""
    return (
        found is not None and found.counts and found.confidence is not None and found.confidence >= threshold
    )


def audit_count(share: float, confident: int) -> int:
    """How many of ``confident`` items are audited: ``share`` of them rounded up, so that any share above 0
    audits at least one (an accuracy never measured is no accuracy); the epsilon keeps 0.1 * 30 at 3."""
    return min(confident, math.ceil(share * confident - 1e-9)) if share > 0 else 0


def route_batch(run: JudgeRun) -> dict[str, int]:
    """Route ``run``'s batch by its verdicts (module docstring): a ``Routing`` for every item of the batch
    not routed before (by this run or another), judge-path items closed to labelers, in one transaction;
    the counts of this run's items per path. The run's job calls it when the judging is done, while the
    run still holds the batch. ValueError for a run that does not route or bad routing settings."""
    if not run.route:
        raise ValueError(f"Judge run {run.pk} does not route its batch.")
    chosen = routing_settings(run.settings)
    found = run_verdicts(run)
    batch = run.batch
    with transaction.atomic():
        # Locked first, then read: a labeler who took an item just before waits for nothing (the pick
        # skips locked items) and their lease is seen below, keeping the item with the labelers.
        items = list(
            FeedbackItem.objects.select_for_update()
            .filter(batch=batch)
            .order_by("id")
            .values_list("pk", "is_gold")
        )
        routed = set(Routing.objects.filter(item__batch=batch).values_list("item_id", flat=True))
        started = set(
            Assignment.objects.filter(item__batch=batch)
            .exclude(status__in=_NOT_STARTED)
            .values_list("item_id", flat=True)
        )
        fresh = [(pk, gold) for pk, gold in items if pk not in routed]
        confident = [
            pk
            for pk, gold in fresh
            if not gold
            and not batch.is_screening
            and pk not in started
            and is_confident(found.get(pk), chosen.confidence_threshold)
        ]
        draw = random.Random(chosen.seed)  # noqa: S311 (a reproducible audit sample, nothing secret)
        audited = set(draw.sample(confident, audit_count(chosen.audit_share, len(confident))))
        decided = set(confident) - audited
        Routing.objects.bulk_create(
            Routing(
                run=run,
                item_id=pk,
                path=RoutePath.JUDGE
                if pk in decided
                else RoutePath.AUDIT
                if pk in audited
                else RoutePath.HUMAN,
                verdict=found[pk].preference if pk in confident else None,
            )
            for pk, _ in fresh
        )
        FeedbackItem.objects.filter(pk__in=decided).update(is_open=False)
        counts = routing_counts(run)
        log_action(run.owner, "judge_run.route", run, **counts, settings=chosen.__dict__)
    return counts


def routing_counts(run: JudgeRun) -> dict[str, int]:
    """How many of the batch's items ``run`` routed to each path (every path named, 0 when none)."""
    counts = dict.fromkeys(RoutePath.values, 0)
    for path in Routing.objects.filter(run=run).values_list("path", flat=True):
        counts[path] += 1
    return counts
