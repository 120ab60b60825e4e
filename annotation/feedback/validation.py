"""Validation of a labeler's response, for every feedback template (plain Python, no Django).

``validate_response`` never raises: any JSON-like value gives a ``Validation`` whose ``errors`` map a dotted
field path ("ratings.coherence", "answers.A.claims.0.start", "ranks.3", "justification") to a message for
the labeler, whose ``cleaned`` is the normalised response (known keys only, proper types) and whose
``complete`` is True when there are no errors. Unknown keys are dropped; blank values (None, "") count as
unanswered. Answers are named by display slot: "A"/"B" in comparisons, "1".."K" in rankings.

Required policy (``required_fields`` lists the paths the page marks): with ``required_all`` every part is
required — every comparison dimension, a trust level for every reference and at least one claim per answer
(WebGPT comparison), every rank and 1-7 rating (ranking), every preset field (rating); otherwise only the
field codes in ``always_required``: a dimension code ("overall"), "trust", "claims", "ranks", "likert" or a
preset field code. Comments are always optional. A WebGPT comparison with a question flag set ends early:
nothing else is required or kept, and it is complete.

Shapes: claims need 0 <= start < end <= the answer's length, a support level and a relevance, and quote
indexes in 0..quote_count-1 (overlapping claims are fine, two claims on the very same span are not). Ranks
are whole numbers in 1..K with ties allowed, K = 4..9, stored as dense ranks (1, 1, 3 -> 1, 1, 2); ranking
tags come from the batch preset's set (``scales.ranking_tags``). GopherCite's justification needs at least
7 words whenever it is given. Contradictions between the overall rating and the other dimensions are
reported in ``flags`` for review, never refused (``contradiction_flags`` states the rules).

What arrives from the task page and the API first passes ``input_errors`` (and a skip reason
``skip_reason_error``): both callers run these same checks, so the page and the API refuse the same input.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.feedback.scales import (
    ALL_STEPS,
    COMPARISON_SLOTS,
    COMPARISON_TEMPLATES,
    LIKERT_MAX,
    LIKERT_MIN,
    RANKING_MAX_K,
    RANKING_MIN_K,
    TEMPLATES,
    Choices,
    codes,
    dimensions_for,
    label_for,
    ranking_tags,
    rating_fields,
)
from annotation.feedback.steps import check_step_preference, check_step_ratings
from annotation.feedback.validation_comparison import (
    MAX_TEXT,
    OVERALL_CONTRADICTS,
    OVERALL_EQUAL_BUT_AGREE,
    AnswerShape,
    Checker,
    as_int,
    choice,
    contradiction_flags,
    is_blank,
    mapping,
    text,
    validate_comparison,
)
from core.inputs import json_depth, nul_path, path_of

__all__ = [
    "OVERALL_CONTRADICTS",
    "OVERALL_EQUAL_BUT_AGREE",
    "AnswerShape",
    "Validation",
    "contradiction_flags",
    "draw_required_all",
    "input_errors",
    "required_fields",
    "skip_reason_error",
    "validate_response",
]

UNREADABLE = "This response could not be read. Reload the page and try again."
MAX_RESPONSE_CHARS = 200_000  # a whole response or draft, as JSON
MAX_RESPONSE_DEPTH = 8  # response > answers > A > claims > claim > quotes > index is 6
MAX_SKIP_REASON = 1000
SECTIONS = ("ratings", "flags", "answers", "ranks", "likert", "tags", "steps")


@dataclass(frozen=True)
class Validation:
    errors: dict[str, str]
    flags: tuple[str, ...]
    cleaned: dict
    complete: bool


def validate_response(
    template: str,
    response: Any,
    *,
    answers: Sequence[AnswerShape],
    required_all: bool,
    always_required: Sequence[str],
    preset: str | None = None,
    steps: int = 0,
) -> Validation:
    """Check and normalise one response under the template's rules and the required-field policy;
    ``steps``: a step review's number of steps (its episode's actions)."""
    try:
        if template == "step_review":
            required = required_all or ALL_STEPS in (always_required or ())
            checked = check_step_ratings(response, steps, required_all=required)
            return Validation(checked.errors, (), checked.cleaned, checked.complete)
        if template == "step_preference":
            checked = check_step_preference(response)
            return Validation(checked.errors, (), checked.cleaned, checked.complete)
        return _validate(template, response, answers, required_all, always_required, preset or None)
    except Exception:  # a safety net only: the checks themselves do not raise
        return Validation({"response": UNREADABLE}, (), {}, False)


def input_errors(value: Any) -> dict[str, str]:
    """Why a response or a draft cannot be taken at all (empty when it can), by field path: the one check
    that the task page and the API run on what they receive, before a draft is kept as sent and before the
    template's rules (``validate_response``). Refuses anything that is not an object, too deep or too large,
    any text with U+0000 (PostgreSQL cannot store it) or over ``MAX_TEXT`` characters, NaN and infinities,
    and sections the task page could not read a draft back from. Never raises."""
    if not isinstance(value, Mapping):
        return {"response": "The response must be a set of named fields."}
    if json_depth(value) > MAX_RESPONSE_DEPTH:
        return {"response": f"The response is nested more than {MAX_RESPONSE_DEPTH} levels deep."}
    path = nul_path(value)
    if path is not None:
        return {".".join(path) or "response": "Text may not contain NUL characters (U+0000)."}
    path = path_of(value, lambda node: isinstance(node, str) and len(node) > MAX_TEXT)
    if path is not None:
        return {".".join(path): f"This text is too long (at most {MAX_TEXT} characters)."}
    path = path_of(value, lambda node: isinstance(node, float) and not math.isfinite(node))
    if path is not None:  # the JSON parser refuses these already; a jsonb column cannot hold them
        return {".".join(path): "Numbers must be finite."}
    size = len(json.dumps(value, default=str))
    if size > MAX_RESPONSE_CHARS:
        return {"response": f"The response is too large ({size} characters; at most {MAX_RESPONSE_CHARS})."}
    return _shape_errors(value)


def _shape_errors(value: Mapping) -> dict[str, str]:
    """Sections that must be objects or lists: the task page reads drafts back through them."""
    errors = {
        key: "Must be an object." for key in SECTIONS if value.get(key) and not isinstance(value[key], dict)
    }
    answers = value.get("answers")
    for slot, part in answers.items() if isinstance(answers, dict) else ():
        if not isinstance(part, dict):
            continue
        if part.get("trust") and not isinstance(part["trust"], dict):
            errors[f"answers.{slot}.trust"] = "Must be an object."
        if part.get("claims") and not isinstance(part["claims"], list):
            errors[f"answers.{slot}.claims"] = "The claims must be a list of marked spans."
    tags = value.get("tags")
    for slot, chosen in tags.items() if isinstance(tags, dict) else ():
        if chosen and not isinstance(chosen, list | str):
            errors[f"tags.{slot}"] = "Must be a list."
    return errors


def skip_reason_error(reason: Any) -> str | None:
    """Why a skip reason cannot be taken (None when it can): the task page and the API both ask."""
    if not isinstance(reason, str) or not reason.strip():
        return "Say why you skip this task."
    if "\x00" in reason:
        return "The reason may not contain NUL characters (U+0000)."
    if len(reason) > MAX_SKIP_REASON:
        return f"The reason is too long ({len(reason)} characters; at most {MAX_SKIP_REASON})."
    return None


def required_fields(
    template: str,
    *,
    answers: Sequence[AnswerShape],
    required_all: bool,
    always_required: Sequence[str],
    preset: str | None = None,
    steps: int = 0,
) -> list[str]:
    """The dotted paths the page marks as required (before any question flag is set), in page order. A step
    review's: every step when all are required, else the first one (the steps up to the first bad one,
    which only the labeler's marks decide: ``steps.check_step_ratings``)."""
    always = set(always_required or ())

    def wanted(code: str) -> bool:
        return required_all or code in always

    paths: list[str] = []
    if template == "webgpt_comparison":
        for shape in sorted((a for a in answers if a.slot in COMPARISON_SLOTS), key=lambda a: a.slot):
            if wanted("trust"):
                paths += [f"answers.{shape.slot}.trust.{i}" for i in range(shape.quote_count)]
            if wanted("claims"):
                paths.append(f"answers.{shape.slot}.claims")
    if template in COMPARISON_TEMPLATES:
        paths += [f"ratings.{code}" for code, _ in dimensions_for(template) if wanted(code)]
    elif template == "ranking":
        slots = _ranking_slots(answers)
        paths += [f"ranks.{slot}" for slot in slots if wanted("ranks")]
        paths += [f"likert.{slot}" for slot in slots if wanted("likert")]
    elif template == "rating":
        paths += [field.code for field in rating_fields(preset) if wanted(field.code)]
    elif template == "step_review":
        paths += [f"steps.{index}" for index in range(steps if wanted(ALL_STEPS) else min(steps, 1))]
    elif template == "step_preference":
        paths.append("preference")
    return paths


def draw_required_all(seed: str, probability: float) -> bool:
    """Whether every part is required: True with ``probability``, drawn deterministically from ``seed``
    (the first 8 bytes of SHA-256 as a uniform number in [0, 1)), so the same seed always draws the same."""
    if not probability > 0:  # also NaN
        return False
    if probability >= 1:
        return True
    digest = hashlib.sha256(f"required-all:{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < probability


def _validate(
    template: str,
    response: Any,
    answers: Sequence[AnswerShape],
    required_all: bool,
    always_required: Sequence[str],
    preset: str | None,
) -> Validation:
    if template not in codes(TEMPLATES):
        return Validation({"template": f"Unknown task template {template!r}."}, (), {}, False)
    if not isinstance(response, Mapping):
        return Validation({"response": "The response must be a set of named fields."}, (), {}, False)
    check = Checker()
    flags: tuple[str, ...] = ()
    if template in COMPARISON_TEMPLATES:
        cleaned = validate_comparison(template, response, check, answers)
        flags = contradiction_flags(cleaned.get("ratings", {}))
    elif template == "ranking":
        cleaned = _ranking(response, check, answers, preset)
    else:
        cleaned = _rating(response, check, preset)
    ended_early = any(cleaned.get("flags", {}).values())
    if not ended_early:
        for path in required_fields(
            template,
            answers=answers,
            required_all=required_all,
            always_required=always_required,
            preset=preset,
        ):
            if path not in check.errors and not _present(cleaned, path):
                check.error(path, _required_message(template, path, preset))
    return Validation(dict(check.errors), flags, cleaned, not check.errors)


def _ranking_slots(answers: Sequence[AnswerShape]) -> list[str]:
    return [str(n) for n in range(1, len(answers) + 1)]


def _ranking(response: Mapping, check: Checker, answers: Sequence[AnswerShape], preset: str | None) -> dict:
    k = len(answers)
    if not RANKING_MIN_K <= k <= RANKING_MAX_K:
        check.error(
            "answers", f"A ranking needs {RANKING_MIN_K} to {RANKING_MAX_K} answers; this task has {k}."
        )
    slots = _ranking_slots(answers)
    raw_ranks = mapping(check, response.get("ranks"), "ranks", "The ranks must be one number per answer.")
    raw_likert = mapping(check, response.get("likert"), "likert", "The 1-7 ratings must be one per answer.")
    raw_tags = mapping(check, response.get("tags"), "tags", "The tags must be a list per answer.")
    ranks, likert, tags = {}, {}, {}
    for slot in slots:
        rank = _number(check, raw_ranks.get(slot), 1, k, f"ranks.{slot}", f"The rank of answer {slot}")
        if rank is not None:
            ranks[slot] = rank
        score = _number(check, raw_likert.get(slot), LIKERT_MIN, LIKERT_MAX, f"likert.{slot}", "The rating")
        if score is not None:
            likert[slot] = score
        chosen = _tags(check, raw_tags.get(slot), f"tags.{slot}", ranking_tags(preset))
        if chosen:
            tags[slot] = chosen
    dense = {value: n for n, value in enumerate(sorted(set(ranks.values())), start=1)}
    return {
        "ranks": {slot: dense[rank] for slot, rank in ranks.items()},
        "likert": likert,
        "tags": tags,
        "comment": text(check, response.get("comment"), "comment", "The comment"),
    }


def _number(check: Checker, value: Any, low: int, high: int, path: str, what: str) -> int | None:
    if is_blank(value):
        return None
    number = as_int(value)
    if number is None or not low <= number <= high:
        check.error(path, f"{what} must be a whole number from {low} to {high}.")
        return None
    return number


def _tags(check: Checker, value: Any, path: str, tags: Choices) -> list[str]:
    """The ticked metadata codes in the set's order; only the batch's own set (its preset's) is taken."""
    if value is None:
        return []
    known = codes(tags)
    if not isinstance(value, list | tuple) or not all(isinstance(tag, str) and tag in known for tag in value):
        check.error(path, f"Tags must be chosen from: {', '.join(label for _, label in tags)}.")
        return []
    return [tag for tag in known if tag in value]


def _rating(response: Mapping, check: Checker, preset: str | None) -> dict:
    fields = rating_fields(preset)
    if not fields:
        check.error("preset", f"Unknown rating preset {preset!r}.")
    cleaned: dict[str, Any] = {}
    for field in fields:
        value = response.get(field.code)
        if field.choices:
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)  # "0".."3" scales may arrive as numbers
            code = choice(check, value, field.choices, field.code, field.label)
            if code is not None:
                cleaned[field.code] = code
            continue
        written = text(check, value, field.code, field.label)
        if written and len(written.split()) < field.min_words:
            check.error(
                field.code, f"Write at least {field.min_words} words ({len(written.split())} so far)."
            )
        elif written:
            cleaned[field.code] = written
    cleaned["comment"] = text(check, response.get("comment"), "comment", "The comment")
    return cleaned


def _present(cleaned: Mapping, path: str) -> bool:
    node: Any = cleaned
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return node is not None and node != "" and node != [] and node != {}


def _required_message(template: str, path: str, preset: str | None) -> str:
    parts = path.split(".")
    if parts[0] == "ratings":
        return f"Rate “{label_for(dimensions_for(template), parts[1], parts[1])}”."
    if parts[0] == "answers" and parts[2] == "trust":
        return f"Rate how trustworthy reference {int(parts[3]) + 1} of answer {parts[1]} is."
    if parts[0] == "answers":
        return f"Mark at least one claim in answer {parts[1]}."
    if parts[0] == "ranks":
        return f"Give answer {parts[1]} a rank."
    if parts[0] == "likert":
        return f"Give answer {parts[1]} a rating from {LIKERT_MIN} to {LIKERT_MAX}."
    field = next((f for f in rating_fields(preset) if f.code == path), None)
    if field is not None and not field.choices:
        return f"Write the {field.label.lower()} (at least {field.min_words} words)."
    return f"“{field.label if field else path}” is required."
