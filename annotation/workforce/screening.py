"""Screening scores (InstructGPT B.1): each applicant's agreement with the researchers' reference judgements
on a kind's screening tests, per measure, with its count and 95% interval against the test's soft cutoff;
for demonstrators, the mean of researchers' 1-7 grades of their screening demonstrations (cutoff 6).

The cutoffs are soft, as in the paper: the scores suggest pass or fail, a researcher decides."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from annotation.feedback.agreement import wilson_interval
from annotation.models import (
    DEMONSTRATION,
    Assignment,
    AssignmentStatus,
    DemonstrationBatch,
    DemonstrationReview,
    Episode,
    EpisodeStatus,
    FeedbackBatch,
    FeedbackItem,
    Qualification,
    work_kind,
)
from annotation.workforce.judgements import FLAGS, MEASURE_LABELS, canonical, compare
from annotation.workforce.states import State

GRADE = "grade"
GRADE_LABEL = "Mean grade of screening demonstrations (1-7)"

PASS, FAIL, INCOMPLETE = "pass", "fail", "incomplete"

# Two-sided 95% Student t quantiles by degrees of freedom (1-30); beyond, a Cornish-Fisher correction of z.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(df: int) -> float:
    if df <= len(_T95):
        return _T95[df - 1]
    z = 1.959963984540054
    return z + (z**3 + z) / (4 * df)


def mean_interval(values: Sequence[float], low: float, high: float) -> tuple[float, float]:
    """The 95% t interval of the mean of ``values``, clipped to the scale [low, high]; the whole scale for
    fewer than two values (one grade says nothing about the spread)."""
    if len(values) < 2:
        return (low, high)
    half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    mean = statistics.fmean(values)
    return (max(low, mean - half), min(high, mean + half))


@dataclass(frozen=True)
class Score:
    measure: str
    label: str
    value: float
    count: int
    low: float
    high: float
    cutoff: float

    @property
    def passes(self) -> bool:
        return self.value >= self.cutoff


@dataclass
class Candidate:
    user_id: int
    username: str
    kind: str
    state: str
    done: int
    total: int
    scores: list[Score] = field(default_factory=list)
    revised: int = 0  # items changed after their first submission (scored as first submitted)

    @property
    def suggestion(self) -> str:
        """pass when every score reaches its cutoff with every referenced item done; fail when a score is
        under its cutoff; incomplete while items are left (or nothing can be scored yet)."""
        if any(not score.passes for score in self.scores) and self.done >= self.total:
            return FAIL
        if self.done < self.total or not self.scores:
            return INCOMPLETE
        return PASS

    def reason(self) -> str:
        """A reason to prefill the researcher's decision with: the scores against the cutoffs."""
        parts = [
            f"{score.label}: {score.value:.0%} over {score.count} "
            f"(95% interval {score.low:.0%}-{score.high:.0%}), cutoff {score.cutoff:.0%}"
            if score.measure != GRADE
            else f"{score.label}: {score.value:.1f} over {score.count}, cutoff {score.cutoff:.0f}"
            for score in self.scores
        ]
        return f"Screening ({self.done} of {self.total} items): " + "; ".join(parts)


def feedback_candidates(kind: str) -> list[Candidate]:
    """Everyone who judged an item of one of the kind's screening tests, with their scores on the items that
    carry a reference; the cutoffs are the latest screening test's."""
    batches = [
        batch
        for batch in FeedbackBatch.objects.filter(is_screening=True)
        if work_kind(batch.template, batch.preset) == kind
    ]
    if not batches:
        return []
    latest = batches[-1]
    cutoffs = {FLAGS: latest.flag_cutoff}
    items = {
        item.pk: item
        for item in FeedbackItem.objects.filter(batch__in=batches, is_gold=True).select_related("batch")
        if item.gold_expected
    }
    tasks = (
        Assignment.objects.filter(item__batch__in=batches, status=AssignmentStatus.SUBMITTED)
        .select_related("labeler", "item__batch")
        .order_by("labeler_id", "id")
    )
    scores: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    done: dict[int, int] = defaultdict(int)
    revised: dict[int, int] = defaultdict(int)
    names: dict[int, str] = {}
    for task in tasks:
        names[task.labeler_id] = task.labeler.get_username()
        item = items.get(task.item_id)
        if item is None:
            continue
        done[task.labeler_id] += 1
        revised[task.labeler_id] += task.revised
        batch = item.batch
        # The first submission: a candidate who saw their running score cannot revise towards a pass.
        mine = canonical(batch.template, task.scored_response, task.order, batch.preset)
        for measure, value in compare(batch.template, mine, item.gold_expected).items():
            scores[task.labeler_id][measure].append(value)
    states = _states(kind)
    candidates = []
    for user_id, username in names.items():
        state = states.get(user_id, State.APPLICANT)
        candidate = Candidate(user_id, username, kind, state, done[user_id], len(items))
        candidate.revised = revised[user_id]
        for measure, values in sorted(scores[user_id].items()):
            low, high = wilson_interval(sum(values), len(values))
            cutoff = cutoffs.get(measure, latest.agreement_cutoff)
            candidate.scores.append(
                Score(
                    measure,
                    MEASURE_LABELS[measure],
                    sum(values) / len(values),
                    len(values),
                    low,
                    high,
                    cutoff,
                )
            )
        candidates.append(candidate)
    return sorted(candidates, key=lambda c: c.username)


def demonstration_candidates() -> list[Candidate]:
    """Everyone who finished a demonstration of a screening test, with the mean of researchers' grades."""
    batches = list(DemonstrationBatch.objects.filter(is_screening=True))
    if not batches:
        return []
    cutoff = batches[-1].grade_cutoff
    total = len({pk for batch in batches for pk in batch.questions.values_list("pk", flat=True)})
    episodes = (
        Episode.objects.human()
        .filter(batch__in=batches, status=EpisodeStatus.FINISHED)
        .select_related("user")
        .order_by("user_id", "id")
    )
    grades: dict[int, list[float]] = defaultdict(list)
    graded: dict[int, set[int]] = defaultdict(set)
    reviews = DemonstrationReview.objects.filter(episode__in=episodes, grade__isnull=False)
    for user_id, episode_id, grade in reviews.values_list("episode__user_id", "episode_id", "grade"):
        grades[user_id].append(float(grade))
        graded[user_id].add(episode_id)
    names = {episode.user_id: episode.user.get_username() for episode in episodes}
    states = _states(DEMONSTRATION)
    candidates = []
    for user_id, username in names.items():
        state = states.get(user_id, State.APPLICANT)
        # A demonstration counts as done once a researcher has graded it: until then the score is incomplete.
        candidate = Candidate(user_id, username, DEMONSTRATION, state, len(graded[user_id]), total)
        values = grades[user_id]
        if values:
            low, high = mean_interval(values, 1.0, 7.0)
            candidate.scores.append(
                Score(GRADE, GRADE_LABEL, statistics.fmean(values), len(values), low, high, cutoff)
            )
        candidates.append(candidate)
    return sorted(candidates, key=lambda c: c.username)


def candidates_for(kind: str) -> list[Candidate]:
    return demonstration_candidates() if kind == DEMONSTRATION else feedback_candidates(kind)


def _states(kind: str) -> dict[int, str]:
    return dict(Qualification.objects.filter(kind=kind).values_list("user_id", "state"))
