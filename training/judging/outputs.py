"""A judge's verdict read and checked like a labeler's submission: the JSON object found in the output,
``input_errors`` then ``validate_response`` (the task page's and the API's own checks), the cleaned response
kept only when it is complete. What cannot be read is a ``ReadOutput`` with the reason, never an exception:
the raw output is stored beside it either way."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from annotation.feedback.validation import AnswerShape, input_errors, validate_response

MAX_ERROR = 1000  # characters of a reason kept on a judgement
# What a judge cannot give: trust levels and claim annotations are a labeler's work on the page, never
# asked of a judge, so a batch that always requires them does not require them of a judge.
NOT_ASKED = frozenset({"trust", "claims"})


@dataclass(frozen=True)
class ReadOutput:
    """A judge's answer on one item in one order: the cleaned response (None with ``error`` when it could
    not be read as a complete one), the raw output, the judge's confidence in [0, 1] where it gave one,
    and details (scores, tokens, the constraint used)."""

    response: dict | None
    raw_output: str
    error: str = ""
    confidence: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


def find_json(text: str) -> tuple[Any, str]:
    """The first JSON object in ``text`` (a model may wrap it in a code fence or words) and "", or None and
    why there is none."""
    start = text.find("{")
    if start < 0:
        return None, "the output holds no JSON object"
    # strict=False: a raw newline or tab inside a string is kept, as llama.cpp's JSON grammar lets a model
    # write them and nothing is ambiguous about them (JSON's own rule is for transport).
    decoder = json.JSONDecoder(strict=False)
    try:
        value, _ = decoder.raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        return None, f"the output's JSON could not be read ({exc.msg} at character {start + exc.pos})"
    return value, ""


def judge_requires(always_required: Sequence[str]) -> list[str]:
    """A batch's always-required fields that a judge is asked for."""
    return [code for code in always_required or () if code not in NOT_ASKED]


def check_verdict(
    template: str,
    preset: str,
    value: Any,
    answers: Sequence[AnswerShape],
    always_required: Sequence[str],
) -> tuple[dict | None, str]:
    """The cleaned response and "", or None and every reason (by field path) it is refused."""
    if isinstance(value, Mapping):
        value = {key: part for key, part in value.items() if key != "confidence"}
    errors = input_errors(value)
    if not errors:
        checked = validate_response(
            template,
            value,
            answers=answers,
            required_all=False,
            always_required=judge_requires(always_required),
            preset=preset or None,
        )
        if checked.complete:
            return checked.cleaned, ""
        errors = checked.errors
    reasons = "; ".join(f"{path}: {message}" for path, message in errors.items())
    return None, f"not a valid response: {reasons}"[:MAX_ERROR]


def read_confidence(value: Any) -> float | None:
    """The verdict's ``confidence`` when it is a number in [0, 1]; None otherwise (it is optional)."""
    confidence = value.get("confidence") if isinstance(value, Mapping) else None
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        return None
    confidence = float(confidence)
    return confidence if math.isfinite(confidence) and 0.0 <= confidence <= 1.0 else None


def read_verdict(
    text: str,
    template: str,
    preset: str,
    answers: Sequence[AnswerShape],
    always_required: Sequence[str],
    details: dict[str, Any] | None = None,
) -> ReadOutput:
    """A language model's output as a verdict (``error`` says why none could be read)."""
    value, problem = find_json(text)
    if problem:
        return ReadOutput(None, text, problem, None, details or {})
    response, problem = check_verdict(template, preset, value, answers, always_required)
    return ReadOutput(response, text, problem, read_confidence(value), details or {})
