"""Signals of careless work per labeler and kind of work, each a share with its count and 95% Wilson
interval, and whether it is "notable": its interval lies wholly on the careless side of what careful work
gives.

Read: the SUBMITTED assignments of the kind's production batches (screening tests left out; a researcher's
reference is never SUBMITTED), less the work a revocation excluded (``workforce.excluded``, as exports).
Counts of work (speed, contradictions) take every submission; the signals read from a judgement's content
(position bias, a constant rating, agreement) leave out judgements excluded on flag review, as the batch
page's agreement does. The signals:

- ``position_bias`` (comparisons): the share of comparisons where the answer SHOWN FIRST is preferred, an
  "equal" counting half. The order is drawn per assignment, so careful work gives 50% whatever the
  answers: notable when the interval excludes 0.5 (either side); ``notable_vs_others`` against the other
  labelers' rate on the same kind.
- ``constant_rating``: comparisons: the share of "equally good" overall ratings; rankings: the share of
  the labeler's 1-7 ratings that are their most frequent value; ratings: the share of submissions whose
  choices are the labeler's most frequent combination. Against the other labelers' share of the same
  value; careless above.
- ``fast_tasks``: the share of submissions whose active time is under a third of the kind's median
  (every labeler's submissions of the kind); against the others' share; careless above.
- ``agreement``: with the other labelers on shared items, an item scoring the mean over the others of 1
  (the same), 0.5 (one tie) or 0 (comparisons: the overall preference for the same answer; rankings: the
  share of answer pairs ordered alike; ratings: the share of choice fields chosen alike); Wilson over the
  number of shared items with the item scores as successes. Against the others' pooled agreement;
  careless below.
- ``contradictions`` (comparisons): the share of submissions with contradiction flags (overall against the
  dimensions); against the others' share; careless above.

"The others" are every other labeler of the kind pooled (their successes over their count, with its own
Wilson interval), so one careless labeler does not set their own expectation. Against the others a signal
is notable only when the two intervals do not overlap: the others' figure is an estimate too, and a point
estimate of 0 from a handful of tasks would make any single contradiction "notable". Non-overlap of two
95% intervals is a conservative test (roughly p < 0.01 for similar counts): a page should raise few false
alarms about people. With no other labeler nothing is notable except position bias against 0.5.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from django.db.models import QuerySet

from annotation.feedback.agreement import preference_agreement, ranking_pair_agreement, wilson_interval
from annotation.feedback.scales import (
    COMPARISON_TEMPLATES,
    OVERALL,
    TEMPLATES,
    preference_value,
    rating_fields,
)
from annotation.models import Assignment, AssignmentStatus, FeedbackBatch, FlagDecision
from annotation.models.workforce import RATING_PREFIX
from annotation.workforce.excluded import without_excluded_work
from core.permissions import AnyUser

Side = Literal["above", "below", "either"]
FAST_SHARE_OF_MEDIAN = 1 / 3
SIGNAL_LABELS = {
    "position_bias": "Prefers the answer shown first",
    "constant_rating": "Near-constant rating",
    "fast_tasks": "Tasks far under the median time",
    "agreement": "Agreement with the other labelers",
    "contradictions": "Overall rating contradicting the dimensions",
}


@dataclass(frozen=True)
class Share:
    """``successes`` of ``count`` (fractional successes: a tie as half) with its 95% Wilson interval."""

    successes: float
    count: int
    low: float
    high: float

    @property
    def value(self) -> float | None:
        return self.successes / self.count if self.count else None


def share(successes: float, count: int) -> Share:
    return Share(successes, count, *wilson_interval(successes, count))


@dataclass(frozen=True)
class Signal:
    """One signal: the labeler's ``mine`` and the other labelers' pooled ``others`` (None without
    others), each with count and interval; ``expected`` what careful work gives (``expected_label`` says
    what), ``careless`` the side careless work lies on.

    ``notable_vs_others``: the labeler's interval lies wholly on the careless side of the others'
    interval (the two do not overlap, so neither a few tasks of theirs nor of the others' makes it);
    ``notable``: for a fixed expectation (position bias: 0.5) the interval lies wholly on the careless
    side of it, otherwise the same as ``notable_vs_others``."""

    code: str
    label: str
    mine: Share
    others: Share | None
    expected: float | None
    expected_label: str
    careless: Side
    notable: bool
    notable_vs_others: bool
    detail: str = ""

    @property
    def value(self) -> float | None:
        return self.mine.value

    @property
    def count(self) -> int:
        return self.mine.count

    @property
    def low(self) -> float:
        return self.mine.low

    @property
    def high(self) -> float:
        return self.mine.high


@dataclass(frozen=True)
class Signals:
    """One labeler's signals for one kind of work (None: the signal does not apply to the kind)."""

    user_id: int
    kind: str
    submitted: int
    median_seconds: float | None
    kind_median_seconds: float | None
    position_bias: Signal | None = None
    constant_rating: Signal | None = None
    fast_tasks: Signal | None = None
    agreement: Signal | None = None
    contradictions: Signal | None = None

    @property
    def all(self) -> list[Signal]:
        """The signals that apply, in a fixed order (for a table row)."""
        signals = (
            self.position_bias,
            self.constant_rating,
            self.fast_tasks,
            self.agreement,
            self.contradictions,
        )
        return [signal for signal in signals if signal is not None]

    @property
    def notable(self) -> list[Signal]:
        return [signal for signal in self.all if signal.notable or signal.notable_vs_others]


def kind_template(kind: str) -> tuple[str, str] | None:
    """(template, preset) of a kind of feedback work; None for demonstrations or an unknown kind."""
    if kind.startswith(RATING_PREFIX):
        return "rating", kind.removeprefix(RATING_PREFIX)
    if kind in dict(TEMPLATES) and kind != "rating":
        return kind, ""
    return None


def signals_for_kind(kind: str) -> dict[int, Signals]:
    """user id -> Signals over every production batch of the kind ({} for a kind without feedback)."""
    parsed = kind_template(kind)
    if parsed is None:
        return {}
    template, preset = parsed
    batches = FeedbackBatch.objects.filter(template=template, is_screening=False)
    if template == "rating":
        batches = batches.filter(preset=preset)
    return _signals(kind, template, preset, _tasks(Assignment.objects.filter(item__batch__in=batches)))


def signals_for_user(user: AnyUser | int, kind: str) -> Signals | None:
    """One labeler's Signals for the kind (computed with everyone's, which the expectations need); None
    when they submitted nothing of it."""
    user_id = user if isinstance(user, int) else user.pk
    return signals_for_kind(kind).get(user_id)


def signals_for_batch(batch: FeedbackBatch) -> dict[int, Signals]:
    """user id -> Signals within one batch (screening or not), the others being that batch's labelers."""
    kind = f"{RATING_PREFIX}{batch.preset}" if batch.template == "rating" else batch.template
    return _signals(kind, batch.template, batch.preset, _tasks(Assignment.objects.filter(item__batch=batch)))


@dataclass
class _Task:
    labeler: int
    item: int
    order: list
    response: dict
    seconds: float
    flagged: bool
    judged: bool  # not excluded on flag review: its content counts


def _tasks(assignments: QuerySet[Assignment]) -> list[_Task]:
    rows = (
        without_excluded_work(assignments.filter(status=AssignmentStatus.SUBMITTED))
        .order_by("id")
        .values_list("labeler_id", "item_id", "order", "response", "active_seconds", "flags", "flag_decision")
    )
    return [
        _Task(
            labeler,
            item,
            order if isinstance(order, list) else [],
            response if isinstance(response, dict) else {},
            float(seconds or 0.0),
            bool(flags),
            decision != FlagDecision.EXCLUDE,
        )
        for labeler, item, order, response, seconds, flags, decision in rows
    ]


@dataclass
class _Tally:
    """Per labeler successes and counts of one signal; the others' figure is the total less one's own."""

    successes: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, labeler: int, success: float) -> None:
        self.successes[labeler] += success
        self.counts[labeler] += 1

    def mine(self, labeler: int) -> Share:
        return share(self.successes.get(labeler, 0.0), self.counts.get(labeler, 0))

    def others(self, labeler: int) -> Share | None:
        count = sum(self.counts.values()) - self.counts.get(labeler, 0)
        if count <= 0:
            return None
        return share(sum(self.successes.values()) - self.successes.get(labeler, 0.0), count)


def make_signal(
    code: str,
    mine: Share,
    others: Share | None,
    careless: Side,
    *,
    expected: float | None = None,
    expected_label: str = "the other labelers",
    detail: str = "",
) -> Signal:
    """A signal against the others, or against a fixed ``expected`` value when one is given."""
    versus_others = (
        others is not None
        and others.count > 0
        and mine.count > 0
        and _beyond(mine, others.low, others.high, careless)
    )
    if expected is None:
        notable = versus_others
        expected = others.value if others is not None else None
    else:
        notable = mine.count > 0 and _beyond(mine, expected, expected, careless)
    return Signal(
        code=code,
        label=SIGNAL_LABELS[code],
        mine=mine,
        others=others,
        expected=expected,
        expected_label=expected_label,
        careless=careless,
        notable=notable,
        notable_vs_others=versus_others,
        detail=detail,
    )


def _beyond(mine: Share, low: float, high: float, careless: Side) -> bool:
    """Whether ``mine``'s interval lies wholly on the careless side of [low, high]."""
    above, below = mine.low > high, mine.high < low
    return {"above": above, "below": below, "either": above or below}[careless]


def _versus_others(code: str, tally: _Tally, labeler: int, careless: Side, detail: str = "") -> Signal:
    return make_signal(code, tally.mine(labeler), tally.others(labeler), careless, detail=detail)


def _signals(kind: str, template: str, preset: str, tasks: list[_Task]) -> dict[int, Signals]:
    if not tasks:
        return {}
    comparison = template in COMPARISON_TEMPLATES
    labelers = sorted({task.labeler for task in tasks})
    judged = [task for task in tasks if task.judged]
    kind_median = statistics.median(task.seconds for task in tasks)
    fast, contradictions = _Tally(), _Tally()
    for task in tasks:
        fast.add(task.labeler, float(task.seconds < kind_median * FAST_SHARE_OF_MEDIAN))
        contradictions.add(task.labeler, float(task.flagged))
    position = _position_tally(judged) if comparison else None
    constant = _constant(template, preset, judged)
    agreement = _agreement_tally(template, preset, judged)
    threshold = kind_median * FAST_SHARE_OF_MEDIAN
    fast_detail = f"under {threshold:.0f} s, a third of the median time {kind_median:.0f} s"
    seconds: dict[int, list[float]] = defaultdict(list)
    for task in tasks:
        seconds[task.labeler].append(task.seconds)
    result = {}
    for labeler in labelers:
        signals = Signals(
            user_id=labeler,
            kind=kind,
            submitted=len(seconds[labeler]),
            median_seconds=statistics.median(seconds[labeler]),
            kind_median_seconds=kind_median,
            fast_tasks=_versus_others("fast_tasks", fast, labeler, "above", fast_detail),
            agreement=_versus_others("agreement", agreement, labeler, "below"),
            constant_rating=constant(labeler),
        )
        if position is not None:
            signals = replace(
                signals,
                position_bias=make_signal(
                    "position_bias",
                    position.mine(labeler),
                    position.others(labeler),
                    "either",
                    expected=0.5,
                    expected_label="50% (the order shown is drawn at random)",
                ),
                contradictions=_versus_others("contradictions", contradictions, labeler, "above"),
            )
        result[labeler] = signals
    return result


def _overall_code(task: _Task) -> str | None:
    ratings = task.response.get("ratings")
    code = ratings.get(OVERALL) if isinstance(ratings, dict) else None
    try:
        preference_value(code)
    except (KeyError, TypeError):
        return None
    return code


def _position_tally(tasks: Iterable[_Task]) -> _Tally:
    """A comparison prefers the answer shown first (slot A, ``order[0]``) by its overall rating: 1, 0.5
    for equal, 0 for the second."""
    tally = _Tally()
    for task in tasks:
        code = _overall_code(task)
        if code is not None and len(task.order) == 2:
            value = preference_value(code)
            tally.add(task.labeler, 1.0 if value > 0 else 0.5 if value == 0 else 0.0)
    return tally


def _constant(template: str, preset: str, tasks: list[_Task]) -> Callable[[int], Signal]:
    """A function labeler -> their constant-rating signal."""
    if template in COMPARISON_TEMPLATES:
        tally = _Tally()
        for task in tasks:
            code = _overall_code(task)
            if code is not None:
                tally.add(task.labeler, float(code == "equal"))
        return lambda labeler: _versus_others(
            "constant_rating", tally, labeler, "above", "share of overall ratings “equally good”"
        )
    values: dict[int, list[Any]] = defaultdict(list)
    if template == "ranking":
        for task in tasks:
            likert = task.response.get("likert")
            values[task.labeler] += [v for v in (likert.values() if isinstance(likert, dict) else ()) if v]
        what = "1-7 rating"
    else:
        fields = [spec.code for spec in rating_fields(preset) if spec.choices]
        for task in tasks:
            values[task.labeler].append(tuple(task.response.get(code) for code in fields))
        what = "combination of answers"

    def signal(labeler: int) -> Signal:
        mine = values.get(labeler, [])
        theirs = [value for other, given in values.items() if other != labeler for value in given]
        if not mine:
            return make_signal("constant_rating", share(0, 0), None, "above")
        # The most frequent value; on a tie the first in sorted order, so the figure is reproducible.
        counts = Counter(mine)
        modal = min(counts, key=lambda value: (-counts[value], repr(value)))
        others = share(sum(value == modal for value in theirs), len(theirs)) if theirs else None
        shown = modal if template == "ranking" else ", ".join(str(part) for part in modal)
        return make_signal(
            "constant_rating",
            share(counts[modal], len(mine)),
            others,
            "above",
            expected_label="the other labelers' share of the same",
            detail=f"share of their most frequent {what} ({shown})",
        )

    return signal


def _agreement_tally(template: str, preset: str, tasks: list[_Task]) -> _Tally:
    """Per labeler, one success (fractional) per shared item: the mean agreement with the others on it."""
    by_item: dict[int, dict[int, Any]] = defaultdict(dict)
    score: Callable[[Any, Any], float | None]
    if template in COMPARISON_TEMPLATES:
        for task in tasks:
            code = _overall_code(task)
            if code is not None and len(task.order) == 2:
                value = preference_value(code)
                by_item[task.item][task.labeler] = value if task.order[0] == min(task.order) else -value
        score = preference_agreement
    elif template == "ranking":
        for task in tasks:
            ranks = task.response.get("ranks")
            ranks = ranks if isinstance(ranks, dict) else {}
            by_item[task.item][task.labeler] = {
                str(answer): float(ranks[str(position)])
                for position, answer in enumerate(task.order, start=1)
                if isinstance(ranks.get(str(position)), int | float)
            }
        score = ranking_pair_agreement
    else:
        fields = [spec.code for spec in rating_fields(preset) if spec.choices]
        for task in tasks:
            by_item[task.item][task.labeler] = {code: task.response.get(code) for code in fields}
        score = _fields_agreement
    tally = _Tally()
    for judgements in by_item.values():
        for labeler, mine in judgements.items():
            scores = [score(mine, theirs) for other, theirs in judgements.items() if other != labeler]
            kept = [s for s in scores if s is not None]
            if kept:
                tally.add(labeler, sum(kept) / len(kept))
    return tally


def _fields_agreement(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> float | None:
    shared = [code for code in mine if mine[code] is not None and theirs.get(code) is not None]
    return sum(mine[code] == theirs[code] for code in shared) / len(shared) if shared else None
