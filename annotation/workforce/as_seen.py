"""A gold item a labeler disagreed with, shown again as they saw it: the question, the answers in their own
display order with their slot names (A/B or 1..K), their response in words, and the reference judgement
turned into the same order, next to the researcher's explanation.

Blind as the task page is: never an answer's source, the item's sides, an episode or a model, nor any other
labeler's judgement."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from annotation.feedback.scales import (
    CITATION,
    COMPARISON_SCALE,
    COMPARISON_TEMPLATES,
    LIKERT_7,
    OVERALL,
    QUESTION_FLAGS,
    dimensions_for,
    preference_value,
    ranking_tags,
    rating_fields,
)
from annotation.feedback.steps import NO_BAD_STEP, first_bad_value
from annotation.models import Answer, Assignment, work_kind
from annotation.workforce.gate import refusal
from annotation.workforce.gold import GoldCheck
from annotation.workforce.judgements import FIELDS, FIRST_BAD, FLAGS, PREFERENCE
from annotation.workforce.states import kind_label
from core.permissions import AnyUser

QUOTE_KEYS = ("title", "domain", "extract")


@dataclass(frozen=True)
class Line:
    label: str
    value: str


@dataclass(frozen=True)
class Slot:
    slot: str
    text: str
    quotes: list[dict[str, str]]


@dataclass(frozen=True)
class GoldDisagreement:
    assignment_id: int
    kind: str
    kind_label: str
    submitted_at: datetime
    score: float
    question: str
    answers: list[Slot]
    mine: list[Line]
    reference: list[Line]
    explanation: str
    revised: bool = False  # changed after the first submission, which is what ``mine`` shows and was scored


def slot_names(template: str, count: int) -> list[str]:
    """A/B for a comparison, 1..K otherwise (the task page's names)."""
    return ["A", "B"][:count] if template in COMPARISON_TEMPLATES else [str(n) for n in range(1, count + 1)]


def scale_label(value: float) -> str:
    """A preference for A in [-1, 1] as the comparison scale says it (the nearest point of the scale)."""
    _code, label = min(COMPARISON_SCALE, key=lambda option: abs(preference_value(option[0]) - value))
    return label


def _section(values: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    section = values.get(key)
    return section if isinstance(section, Mapping) else {}


def _flags(codes: Iterable[str]) -> Line | None:
    labels = dict(QUESTION_FLAGS)
    ticked = [labels.get(code, code) for code in codes]
    return Line("Question flags", "; ".join(ticked)) if ticked else None


FIRST_BAD_LABEL = "First bad step"
BETTER_ACTION_LABEL = "Which next action is better"


def _first_bad_words(value: Any) -> str:
    """A first bad step (an index from 0, or ``steps.NO_BAD_STEP``) as the page numbers steps."""
    return "none: every step good or neutral" if value == NO_BAD_STEP else f"step {int(value) + 1}"


def response_lines(
    template: str, preset: str, response: Mapping[str, Any] | None, slots: Sequence[str]
) -> list[Line]:
    """The labeler's own response in words, in their display order."""
    response = response if isinstance(response, Mapping) else {}
    lines: list[Line] = []
    if template in COMPARISON_TEMPLATES:
        scale = dict(COMPARISON_SCALE)
        ratings = _section(response, "ratings")
        for code, label in dimensions_for(template):
            if code in ratings:
                lines.append(Line(label, scale.get(str(ratings[code]), str(ratings[code]))))
        flags = _flags(code for code, on in _section(response, "flags").items() if on)
        lines += [flags] if flags else []
    elif template == "step_review":
        lines.append(Line(FIRST_BAD_LABEL, _first_bad_words(first_bad_value(response))))
    elif template == "step_preference":
        code = response.get("preference")
        lines.append(Line(BETTER_ACTION_LABEL, dict(COMPARISON_SCALE).get(str(code), str(code))))
    elif template == "ranking":
        ranks, likert, tags = (_section(response, key) for key in ("ranks", "likert", "tags"))
        likert_labels, tag_labels = dict(LIKERT_7), dict(ranking_tags(preset))
        for slot in sorted(slots, key=lambda s: (float(ranks.get(s, len(slots) + 1)), s)):
            parts = [f"rank {ranks[slot]}" if slot in ranks else "not ranked"]
            if slot in likert:
                parts.append(f"1-7 rating {likert_labels.get(likert[slot], likert[slot])}")
            parts += [tag_labels.get(code, code) for code in tags.get(slot) or []]
            lines.append(Line(f"Answer {slot}", "; ".join(str(part) for part in parts)))
    else:
        for rating in rating_fields(preset):
            if rating.choices and rating.code in response:
                value = response[rating.code]
                lines.append(Line(rating.label, dict(rating.choices).get(value, str(value))))
    comment = response.get("comment")
    if isinstance(comment, str) and comment.strip():
        lines.append(Line("Your comment", comment))
    return lines


def reference_lines(
    template: str, preset: str, reference: Mapping[str, Any], order: Sequence[int]
) -> list[Line]:
    """The reference (``FeedbackItem.gold_expected``: the preference for the lower-id answer, ranks by answer
    id) in the labeler's display order."""
    lines: list[Line] = []
    if template in COMPARISON_TEMPLATES:
        flags = _flags(reference.get(FLAGS) or [])
        lines += [flags] if flags else []
        if PREFERENCE in reference and len(order) == 2:
            value = float(reference[PREFERENCE])
            for_a = value if order[0] == min(order) else -value
            lines.append(Line(dict(dimensions_for(template))[OVERALL], scale_label(for_a)))
    elif template == "step_review" and FIRST_BAD in reference:
        lines.append(Line(FIRST_BAD_LABEL, _first_bad_words(reference[FIRST_BAD])))
    elif template == "step_preference" and PREFERENCE in reference:
        lines.append(Line(BETTER_ACTION_LABEL, scale_label(float(reference[PREFERENCE]))))
    elif template == "ranking":
        ranks = reference.get("ranks") or {}
        names = slot_names(template, len(order))
        placed = [
            (ranks[str(answer)], name)
            for name, answer in zip(names, order, strict=True)
            if str(answer) in ranks
        ]
        lines += [Line(f"Answer {name}", f"rank {rank}") for rank, name in sorted(placed)]
    else:
        fields = reference.get(FIELDS) or {}
        for rating in rating_fields(preset):
            if rating.choices and rating.code in fields:
                value = fields[rating.code]
                lines.append(Line(rating.label, dict(rating.choices).get(value, str(value))))
    return lines


def _slots(task: Assignment, answers: Mapping[int, Answer]) -> list[Slot]:
    batch = task.item.batch
    minimal = batch.template == "minimal_comparison"
    slots = []
    for name, answer_id in zip(slot_names(batch.template, len(task.order)), task.order, strict=True):
        answer = answers.get(answer_id)
        if answer is None:
            continue
        quotes = [] if minimal else [{key: str(q.get(key, "")) for key in QUOTE_KEYS} for q in answer.quotes]
        slots.append(Slot(name, CITATION.sub("", answer.text) if minimal else answer.text, quotes))
    return slots


def can_still_revise(task: Assignment, user: AnyUser, now: datetime) -> bool:
    """Whether the person may still revise the task: its revision window is open and their state lets them
    (``gate.refusal``). A reference is shown only once this is False, so that seeing it cannot change the
    judgement a dataset holds (the score cannot change anyway: it reads the first submission)."""
    batch = task.item.batch
    until = task.revisable_until
    return until is not None and now <= until and not refusal(user, batch.template, batch.preset, False)


@dataclass(frozen=True)
class Disagreements:
    shown: list[GoldDisagreement]
    withheld: int  # missed gold items still revisable: their reference comes when that ends
    next_at: datetime | None  # when the first of them is shown


def disagreements(user: AnyUser, checks: Sequence[GoldCheck], now: datetime | None = None) -> Disagreements:
    """The person's gold judgements that scored under 1, newest first, each shown as they saw it with what
    they first submitted (the judgement scored), once they can no longer revise it."""
    now = now or timezone.now()
    missed = {check.assignment_id: check for check in checks if check.score < 1}
    if not missed:
        return Disagreements([], 0, None)
    tasks = list(
        Assignment.objects.filter(pk__in=missed, labeler=user)
        .select_related("item__batch", "item__question")
        .order_by("-first_submitted_at", "-id")
    )
    waiting = [task.revisable_until for task in tasks if can_still_revise(task, user, now)]
    tasks = [task for task in tasks if not can_still_revise(task, user, now)]
    answers = Answer.objects.in_bulk({pk for task in tasks for pk in task.order})
    shown = []
    for task in tasks:
        item, batch = task.item, task.item.batch
        names = slot_names(batch.template, len(task.order))
        kind = work_kind(batch.template, batch.preset)
        shown.append(
            GoldDisagreement(
                assignment_id=task.pk,
                kind=kind,
                kind_label=kind_label(kind),
                submitted_at=task.first_submitted_at,
                score=missed[task.pk].score,
                question=item.question.text,
                answers=_slots(task, answers),
                mine=response_lines(batch.template, batch.preset, task.scored_response, names),
                reference=reference_lines(batch.template, batch.preset, item.gold_expected or {}, task.order),
                explanation=item.gold_explanation,
                revised=task.revised,
            )
        )
    return Disagreements(shown, len(waiting), min(waiting, default=None))
