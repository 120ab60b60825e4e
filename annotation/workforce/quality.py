"""A person's own quality figures ("My quality"): their state per kind of work, gold accuracy and agreement
with the other labelers (overall and per ISO week), screening scores against the references, and the
researchers' reviews of their demonstrations.

Everything here is about one person and only aggregates other people's work: agreement is a mean over
shared items of how far the person's judgement matches the others', never the others' judgements."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime

from django.utils import timezone

from annotation.feedback.agreement import comparison_agreement, ranking_agreement
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.models import (
    Assignment,
    AssignmentStatus,
    DemonstrationReview,
    FeedbackBatch,
    FlagDecision,
    Qualification,
    work_kind,
)
from annotation.workforce.as_seen import GoldDisagreement, disagreements
from annotation.workforce.gold import Accuracy, gold_checks, share
from annotation.workforce.judgements import FLAGS, MEASURE_LABELS, canonical, compare, main_measure
from annotation.workforce.references import referenced_items
from annotation.workforce.states import State, kind_label, kinds_for
from core.permissions import AnyUser, Role, has_role

# The states whose recorded reason the person reads: why they cannot work now.
EXPLAINED = (State.PAUSED, State.REVOKED)


@dataclass(frozen=True)
class Week:
    """One ISO week (Monday to Sunday, in the site's time zone) of a figure."""

    week: str  # "2026-W49"
    starts: date
    figure: Accuracy


def by_week(scored: Iterable[tuple[datetime, float]]) -> list[Week]:
    """Scores grouped by the ISO week of their time, oldest week first."""
    weeks: dict[tuple[int, int], list[float]] = defaultdict(list)
    for at, score in scored:
        year, week, _ = timezone.localtime(at).isocalendar()
        weeks[(year, week)].append(score)
    return [
        Week(f"{year}-W{week:02d}", date.fromisocalendar(year, week, 1), share(scores))
        for (year, week), scores in sorted(weeks.items())
    ]


@dataclass(frozen=True)
class KindQuality:
    kind: str
    label: str
    state: str
    state_label: str
    reason: str  # the recorded reason, when paused or revoked
    decided_at: datetime | None
    gold: Accuracy
    gold_weeks: list[Week]
    agreement: Accuracy  # count: the items shared with other labelers
    agreement_weeks: list[Week]

    @property
    def weeks(self) -> list[tuple[Week, Accuracy | None, Accuracy | None]]:
        """The page's table: each week with its gold accuracy and agreement (None: nothing that week)."""
        gold = {week.week: week for week in self.gold_weeks}
        agreement = {week.week: week for week in self.agreement_weeks}
        rows = []
        for name in sorted(set(gold) | set(agreement)):
            week = gold.get(name) or agreement[name]
            rows.append(
                (
                    week,
                    gold[name].figure if name in gold else None,
                    agreement[name].figure if name in agreement else None,
                )
            )
        return rows


@dataclass(frozen=True)
class ScreeningScore:
    measure: str
    label: str
    figure: Accuracy


@dataclass(frozen=True)
class Screening:
    kind: str
    label: str
    taken_at: datetime | None
    judged: int  # items judged in the test
    scores: list[ScreeningScore]


@dataclass(frozen=True)
class Review:
    episode_id: int
    question: str
    grade: int | None
    comment: str
    reviewed_at: datetime
    screening: bool
    reviewer: str = "a researcher"  # never who: a review is the research team's


@dataclass
class Report:
    kinds: list[KindQuality] = field(default_factory=list)
    disagreements: list[GoldDisagreement] = field(default_factory=list)
    # Missed gold items the person may still revise: their references come once that ends (the first).
    withheld: int = 0
    withheld_until: datetime | None = None
    screenings: list[Screening] = field(default_factory=list)
    reviews: list[Review] = field(default_factory=list)
    labeler: bool = False
    demonstrator: bool = False


def _kinds_of(user: AnyUser, rows: dict[str, Qualification], worked: set[str]) -> list[str]:
    """The kinds shown: those of the person's roles, and any other they have a state or work in."""
    kinds: list[str] = []
    for role in (Role.LABELER, Role.DEMONSTRATOR):
        if has_role(user, role):
            kinds += kinds_for(role)
    return kinds + sorted((set(rows) | worked) - set(kinds))


def agreement_scores(user: AnyUser) -> dict[str, list[tuple[datetime, float]]]:
    """Per kind of work: (when the person submitted, their agreement on the item) for each item of a
    production batch they share with another labeler. Comparisons: sign agreement of the overall
    preference with each other labeler, averaged (``comparison_agreement``); rankings: pairwise order
    agreement (``ranking_agreement``); ratings: the share of choice fields chosen alike. Judgements
    excluded on flag review, late ones and references do not count."""
    mine = list(
        Assignment.objects.filter(
            labeler=user, status=AssignmentStatus.SUBMITTED, item__batch__is_screening=False
        )
        .exclude(flag_decision=FlagDecision.EXCLUDE)
        .select_related("item__batch")
    )
    if not mine:
        return {}
    others: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    rows = (
        Assignment.objects.filter(
            item_id__in=[task.item_id for task in mine], status=AssignmentStatus.SUBMITTED
        )
        .exclude(labeler=user)
        .exclude(flag_decision=FlagDecision.EXCLUDE)
        .values_list("item_id", "labeler_id", "response", "order")
    )
    batches = {task.item_id: task.item.batch for task in mine}
    for item_id, labeler_id, response, order in rows:
        batch = batches[item_id]
        others[item_id].append((labeler_id, canonical(batch.template, response, order, batch.preset)))
    scores: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for task in mine:
        if not others[task.item_id]:
            continue
        batch = task.item.batch
        own = canonical(batch.template, task.response, task.order, batch.preset)
        score = _item_agreement(batch.template, own, others[task.item_id])
        if score is not None:
            scores[work_kind(batch.template, batch.preset)].append((task.submitted_at, score))
    return dict(scores)


def _item_agreement(template: str, own: dict, others: list[tuple[int, dict]]) -> float | None:
    me = "self"
    if template in COMPARISON_TEMPLATES:
        if "preference" not in own:
            return None
        labels = {str(pk): j["preference"] for pk, j in others if "preference" in j}
        return comparison_agreement({"item": {me: own["preference"], **labels}}).get(me) if labels else None
    if template == "ranking":
        rankings = {str(pk): j.get("ranks") or {} for pk, j in others}
        return ranking_agreement({"item": {me: own.get("ranks") or {}, **rankings}}).get(me)
    # Ratings: the share of fields chosen alike; step reviews: the same first bad step.
    fields = [compare(template, own, theirs).get(main_measure(template)) for _, theirs in others]
    kept = [value for value in fields if value is not None]
    return sum(kept) / len(kept) if kept else None


def screening_scores(user: AnyUser) -> list[Screening]:
    """Each screening test the person took: per measure (``judgements.compare``), their mean agreement
    with the researchers' references over the items that have one, with its count and interval."""
    tasks = (
        Assignment.objects.filter(
            labeler=user, status=AssignmentStatus.SUBMITTED, item__batch__is_screening=True
        )
        .select_related("item__batch")
        .order_by("first_submitted_at", "id")
    )
    by_batch: dict[int, list[Assignment]] = defaultdict(list)
    for task in tasks:
        by_batch[task.item.batch_id].append(task)
    screenings = []
    for batch_id, judged in by_batch.items():
        batch: FeedbackBatch = judged[0].item.batch
        references = referenced_items(batch_id)
        measures: dict[str, list[float]] = defaultdict(list)
        for task in judged:
            reference = references.get(task.item_id)
            if reference:
                # The first submission, as the candidates page scores it: the running score shown here
                # after each item cannot be revised towards.
                own = canonical(batch.template, task.scored_response, task.order, batch.preset)
                for measure, score in compare(batch.template, own, reference).items():
                    measures[measure].append(score)
        order = [main_measure(batch.template), FLAGS]
        ranked = sorted(measures, key=lambda m: (order.index(m) if m in order else len(order), m))
        kind = work_kind(batch.template, batch.preset)
        screenings.append(
            Screening(
                kind,
                kind_label(kind),
                judged[-1].first_submitted_at,
                len(judged),
                [ScreeningScore(m, MEASURE_LABELS.get(m, m), share(measures[m])) for m in ranked],
            )
        )
    return screenings


def reviews_of(user: AnyUser) -> list[Review]:
    """Researchers' grades and comments on the person's demonstrations, newest first."""
    reviews = (
        DemonstrationReview.objects.filter(episode__user=user)
        .select_related("episode__question", "episode__batch")
        .order_by("-reviewed_at", "-id")
    )
    return [
        Review(
            review.episode_id,
            review.episode.question.text,
            review.grade,
            review.comment,
            review.reviewed_at,
            bool(review.episode.batch and review.episode.batch.is_screening),
        )
        for review in reviews
    ]


def report(user: AnyUser) -> Report:
    """Everything "My quality" shows the signed-in person, about themselves only."""
    labeler, demonstrator = has_role(user, Role.LABELER), has_role(user, Role.DEMONSTRATOR)
    rows = {row.kind: row for row in Qualification.objects.filter(user=user)}
    checks = gold_checks(user) if labeler else []
    kinds_of_batches = {
        pk: work_kind(template, preset)
        for pk, template, preset in FeedbackBatch.objects.filter(
            pk__in={c.batch_id for c in checks}
        ).values_list("pk", "template", "preset")
    }
    gold: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for check in checks:
        gold[kinds_of_batches[check.batch_id]].append((check.submitted_at, check.score))
    agreement = agreement_scores(user) if labeler else {}
    kinds = []
    for kind in _kinds_of(user, rows, set(gold) | set(agreement)):
        row = rows.get(kind)
        state = State(row.state) if row else State.APPLICANT
        kinds.append(
            KindQuality(
                kind,
                kind_label(kind),
                state.value,
                state.label,
                row.reason if row and state in EXPLAINED else "",
                row.decided_at if row else None,
                share(score for _, score in gold.get(kind, [])),
                by_week(gold.get(kind, [])),
                share(score for _, score in agreement.get(kind, [])),
                by_week(agreement.get(kind, [])),
            )
        )
    missed = disagreements(user, checks)
    return Report(
        kinds=kinds,
        disagreements=missed.shown,
        withheld=missed.withheld,
        withheld_until=missed.next_at,
        screenings=screening_scores(user) if labeler else [],
        reviews=reviews_of(user) if demonstrator else [],
        labeler=labeler,
        demonstrator=demonstrator,
    )
