"""What a task page shows: the answers in the order drawn for this labeler (no sources: blinding), the
scales with the labeler's draft filled in, and what is required for this task."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from annotation.feedback.assignment import answer_shapes
from annotation.feedback.scales import (
    CITATION,
    CLAIM_RELEVANCE,
    CLAIM_SUPPORT,
    COMPARISON_SCALE,
    COMPARISON_TEMPLATES,
    LIKERT_7,
    QUESTION_FLAGS,
    TRUST_LEVELS,
    RatingField,
    dimensions_for,
    ranking_tags,
    rating_fields,
)
from annotation.feedback.step_presenter import preference_context, section, step_context
from annotation.feedback.validation import required_fields
from annotation.models import Answer, Assignment, AssignmentStatus


def _options(choices: Any, value: Any) -> list[dict[str, Any]]:
    return [
        {"code": str(code), "label": label, "checked": str(code) == str(value)} for code, label in choices
    ]


def _required_label(path: str, batch: Any) -> str:
    """A required field's dotted path in words ("ratings.overall" -> "Overall usefulness")."""
    parts = path.split(".")
    labels = dict(dimensions_for(batch.template)) | {
        f.code: f.label for f in rating_fields(batch.preset or None)
    }
    if parts[0] == "ratings":
        return labels.get(parts[1], parts[1])
    if parts[0] == "answers" and parts[2] == "trust":
        return f"trust in reference {int(parts[3]) + 1} of answer {parts[1]}"
    if parts[0] == "answers":
        return f"claims in answer {parts[1]}"
    if parts[0] == "steps":
        return f"a rating of step {int(parts[1]) + 1}"
    if path == "preference":
        return "which action is better"
    if parts[0] in ("ranks", "likert"):
        return f"{'rank' if parts[0] == 'ranks' else '1-7 rating'} of answer {parts[1]}"
    return labels.get(path, path)


def _rule(field: RatingField) -> str:
    """What a free-text field asks of any text written in it ("at least 7 words"), or ""."""
    return f"at least {field.min_words} words" if field.min_words else ""


def _scale_keys(batch: Any) -> int:
    """The most options of one keyboard-driven radio group on the page: its digit keys run 1..this."""
    if batch.template in (*COMPARISON_TEMPLATES, "step_preference"):
        return len(COMPARISON_SCALE)
    return max((len(f.choices) for f in rating_fields(batch.preset or None)), default=0)


@dataclass(frozen=True)
class RevisionWindow:
    """When a submitted task was submitted and until when its labeler may still revise it."""

    submitted_at: datetime
    revisable_until: datetime
    revisable: bool


def revision_window(assignment: Assignment, now: datetime | None = None) -> RevisionWindow | None:
    """The revision window of a submitted (or late) task, from its first submission; None while it was
    never submitted. The bound is inclusive, as ``assignment.submit`` refuses only once ``now`` is past
    ``revisable_until``."""
    until = assignment.revisable_until
    if until is None or assignment.status not in (AssignmentStatus.SUBMITTED, AssignmentStatus.LATE):
        return None
    return RevisionWindow(assignment.submitted_at, until, (now or timezone.now()) <= until)


def task_context(
    assignment: Assignment, *, errors: dict[str, str] | None = None, refused: dict | None = None
) -> dict[str, Any]:
    """What a task page shows; ``refused`` is a response the page sent that was not stored (a stale tab, a
    closed task), shown back field by field so that nothing typed is lost."""
    batch = assignment.item.batch
    answers = Answer.objects.in_bulk(assignment.order)
    shapes = answer_shapes(assignment, answers)
    values = assignment.draft or assignment.response or {}
    if not isinstance(values, dict):
        values = {}
    steps: dict[str, Any] = {}
    if batch.template == "step_preference":
        steps = preference_context(assignment.item, values)
    elif assignment.item.episode_id is not None:
        steps = step_context(assignment.item.episode, values, errors or {})
    required_order = required_fields(
        batch.template,
        answers=shapes,
        required_all=assignment.required_all,
        always_required=batch.always_required,
        preset=batch.preset or None,
        steps=len(steps.get("steps", ())),
    )
    required = set(required_order)
    minimal = batch.template == "minimal_comparison"
    slots = []
    for shape, answer_id in zip(shapes, assignment.order, strict=True):
        answer = answers[answer_id]
        draft = section(section(values, "answers"), shape.slot)
        trust = section(draft, "trust")
        slots.append(
            {
                "slot": shape.slot,
                # The minimal comparison strips citations and references (WebGPT, Appendix F).
                "text": CITATION.sub("", answer.text) if minimal else answer.text,
                "quotes": []
                if minimal
                else [
                    {**quote, "index": index, "trust": _options(TRUST_LEVELS, trust.get(str(index)))}
                    for index, quote in enumerate(answer.quotes)
                ],
                "claims_json": json.dumps(draft.get("claims", [])),
                "rank_options": _options(
                    [(n, str(n)) for n in range(1, len(shapes) + 1)],
                    section(values, "ranks").get(shape.slot),
                ),
                "likert": _options(LIKERT_7, section(values, "likert").get(shape.slot)),
                "tags": [
                    {
                        "code": code,
                        "label": label,
                        "checked": code in (section(values, "tags").get(shape.slot) or []),
                    }
                    for code, label in ranking_tags(batch.preset)
                ],
            }
        )
    ratings = section(values, "ratings")
    return {
        "assignment": assignment,
        "batch": batch,
        "question": assignment.item.question.text,
        "slots": slots,
        # A ranking page shows its answers in the order of the saved ranks, so a reload keeps the order.
        "ranked_slots": in_rank_order(slots, section(values, "ranks"))
        if batch.template == "ranking"
        else slots,
        "scales": [
            {
                "code": code,
                "label": label,
                "options": _options(COMPARISON_SCALE, ratings.get(code)),
                "required": f"ratings.{code}" in required or code in required,
            }
            for code, label in dimensions_for(batch.template)
        ],
        "flags": [
            {"code": code, "label": label, "checked": bool(section(values, "flags").get(code))}
            for code, label in QUESTION_FLAGS
        ],
        "rating_fields": [
            {
                "code": f.code,
                "label": f.label,
                "help": f.help,
                "min_words": f.min_words,
                "rule": _rule(f),
                "options": _options(f.choices, values.get(f.code)),
                "value": values.get(f.code, ""),
                "required": f.code in required,
            }
            for f in rating_fields(batch.preset or None)
        ],
        # Optional fields still refuse what breaks their rule: the required note says so before a submit.
        "optional_rules": [
            f"the {f.label.lower()}, if you write one, needs {_rule(f)}"
            for f in rating_fields(batch.preset or None)
            if _rule(f) and f.code not in required
        ],
        "scale_keys": _scale_keys(batch),
        "claim_support": CLAIM_SUPPORT,
        "claim_relevance": CLAIM_RELEVANCE,
        "comment": values.get("comment", ""),
        "required": [_required_label(path, batch) for path in required_order],
        "required_paths": required_order,  # for the API's task view: computed once per task
        "errors": errors or {},
        "refused": sent_back(batch, refused, {slot["slot"]: slot["text"] for slot in slots})
        if refused
        else [],
        "submit_key": uuid.uuid4(),
        "version": assignment.version,
        "revision": revision_window(assignment),
        **steps,
    }


def in_rank_order(slots: list[dict[str, Any]], ranks: dict) -> list[dict[str, Any]]:
    """Ranking slots ("1".."K") by their rank (1 first; ties by slot number), the unranked last in slot
    order: the order ranking.js keeps on the page, so the page after a reload looks as it did before."""

    def key(slot: dict[str, Any]) -> tuple[int, int]:
        rank = str(ranks.get(slot["slot"], ""))
        return (int(rank) if rank.isdecimal() else len(slots) + 1, int(slot["slot"]))

    return sorted(slots, key=key)


def _value_words(path: str, value: Any, texts: dict[str, str]) -> str:
    if path.endswith(".claims") and isinstance(value, list):
        text = texts.get(path.split(".")[1], "")
        return "; ".join(
            f"“{text[claim['start'] : claim['end']]}” ({claim.get('support')}, {claim.get('relevance')})"
            if isinstance(claim, dict)
            and isinstance(claim.get("start"), int)
            and isinstance(claim.get("end"), int)
            else json.dumps(claim)
            for claim in value
        )
    if isinstance(value, list):
        return ", ".join(str(part) for part in value)
    if value is True:
        return "yes"
    return dict(COMPARISON_SCALE + TRUST_LEVELS).get(str(value), str(value))


def sent_back(batch: Any, response: dict, texts: dict[str, str]) -> list[tuple[str, str]]:
    """A refused response as (field in words, what was given) rows, leaving out what was left empty;
    ``texts`` are the answers' texts by slot, to quote the spans of claims."""
    flags = dict(QUESTION_FLAGS)
    rows: list[tuple[str, str]] = []

    def walk(path: str, value: Any) -> None:
        if isinstance(value, dict) and not path.endswith(".claims"):
            for key, part in value.items():
                walk(f"{path}.{key}" if path else str(key), part)
        elif value not in (None, "", [], {}, False):
            if path == "comment":
                label = "Comment"
            elif path.startswith("flags."):
                label = flags.get(path[6:], path)
            elif path.startswith("tags."):
                label = f"tags of answer {path[5:]}"
            else:
                try:
                    label = _required_label(path, batch)
                except (IndexError, ValueError):  # a path no page field has: shown as it is
                    label = path
            rows.append((label, _value_words(path, value, texts)))

    walk("", response)
    return rows
