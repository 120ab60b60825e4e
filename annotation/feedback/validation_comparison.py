"""Field checks shared by the templates, and the two comparison templates (see ``validation``).

Every check here records problems in a ``Checker`` under a dotted field path and returns the cleaned value;
none of them raises on any JSON-like input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.feedback.scales import (
    CLAIM_RELEVANCE,
    CLAIM_SUPPORT,
    COMPARISON_SCALE,
    COMPARISON_SLOTS,
    OVERALL,
    QUESTION_FLAGS,
    TRUST_LEVELS,
    Choices,
    codes,
    dimensions_for,
    preference_value,
)

MAX_TEXT = 20_000
OVERALL_CONTRADICTS = "overall_contradicts_dimensions"
OVERALL_EQUAL_BUT_AGREE = "overall_equal_but_dimensions_agree"
_INTEGER = re.compile(r"\s*[0-9]{1,9}\s*")


@dataclass(frozen=True)
class AnswerShape:
    """What validation needs to know about one displayed answer."""

    slot: str
    text_length: int
    quote_count: int


class Checker:
    """Collects errors by dotted field path (the first message for a path wins)."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}

    def error(self, path: str, message: str) -> None:
        self.errors.setdefault(path, message)


def is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def as_int(value: Any) -> int | None:
    """A whole number from an int, an integral float or a digit string (form fields); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    return None


def mapping(check: Checker, value: Any, path: str, message: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        check.error(path, message)
        return {}
    return value


def choice(check: Checker, value: Any, choices: Choices, path: str, what: str) -> str | None:
    """The code when ``value`` is one of ``choices``; None when blank; an error otherwise."""
    if is_blank(value):
        return None
    if isinstance(value, str) and value in codes(choices):
        return value
    check.error(path, f"{what}: choose one of {', '.join(label for _, label in choices)}.")
    return None


def text(check: Checker, value: Any, path: str, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        check.error(path, f"{what} must be text.")
        return ""
    if len(value) > MAX_TEXT:
        check.error(path, f"{what} is too long ({len(value)} characters; at most {MAX_TEXT}).")
        return ""
    return value.strip()


def contradiction_flags(ratings: Mapping[str, str]) -> tuple[str, ...]:
    """Review flags for comparison ratings (accepted, never errors). With o = the overall preference and
    d = the preferences of the other rated dimensions (all from A's view, ``preference_value``):

    - ``overall_contradicts_dimensions``: o != 0, some d has the opposite sign to o and no d has o's sign
      (overall picks an answer that only loses, or ties, on the details);
    - ``overall_equal_but_dimensions_agree``: o == 0 while at least two dimensions are rated and all of them
      are non-zero with one sign (every detail favours the same answer, yet overall says equal).
    """
    valid = codes(COMPARISON_SCALE)
    if ratings.get(OVERALL) not in valid:
        return ()
    overall = preference_value(ratings[OVERALL])
    others = [preference_value(c) for d, c in ratings.items() if d != OVERALL and c in valid]
    if overall != 0:
        if any(v * overall < 0 for v in others) and not any(v * overall > 0 for v in others):
            return (OVERALL_CONTRADICTS,)
    elif len(others) >= 2 and (all(v > 0 for v in others) or all(v < 0 for v in others)):
        return (OVERALL_EQUAL_BUT_AGREE,)
    return ()


def validate_comparison(
    template: str, response: Mapping, check: Checker, answers: Sequence[AnswerShape]
) -> dict:
    """The cleaned comparison; for a WebGPT comparison with a question flag set, only flags and comment."""
    shapes = {shape.slot: shape for shape in answers}
    if len(answers) != 2 or set(shapes) != set(COMPARISON_SLOTS):
        check.error("answers", "A comparison needs exactly two answers, A and B.")
    cleaned: dict[str, Any] = {}
    if template == "webgpt_comparison":
        raw_flags = mapping(
            check, response.get("flags"), "flags", "The question flags must be yes/no choices."
        )
        flags = {}
        for code, label in QUESTION_FLAGS:
            value = raw_flags.get(code, False)
            if not isinstance(value, bool) and value is not None:
                check.error(f"flags.{code}", f"“{label}” must be ticked or not.")
            flags[code] = value is True
        cleaned["flags"] = flags
        if any(flags.values()):  # the rest of the task is skipped
            cleaned["comment"] = text(check, response.get("comment"), "comment", "The comment")
            return cleaned
        raw_answers = mapping(
            check, response.get("answers"), "answers", "The answers part must be an object."
        )
        cleaned["answers"] = {
            slot: _answer(check, raw_answers.get(slot), shapes.get(slot, AnswerShape(slot, 0, 0)))
            for slot in COMPARISON_SLOTS
        }
    raw = mapping(check, response.get("ratings"), "ratings", "The ratings must be one choice per dimension.")
    ratings = {}
    for code, label in dimensions_for(template):
        value = choice(check, raw.get(code), COMPARISON_SCALE, f"ratings.{code}", label)
        if value is not None:
            ratings[code] = value
    cleaned["ratings"] = ratings
    cleaned["comment"] = text(check, response.get("comment"), "comment", "The comment")
    return cleaned


def _answer(check: Checker, value: Any, shape: AnswerShape) -> dict:
    slot, path = shape.slot, f"answers.{shape.slot}"
    raw = mapping(check, value, path, f"The annotations of answer {slot} must be an object.")
    raw_trust = mapping(check, raw.get("trust"), f"{path}.trust", "Trust levels must be one per reference.")
    trust = {}
    for key, level in raw_trust.items():
        index = as_int(key)
        if index is None:
            continue  # not a reference number: ignored like any unknown key
        where = f"{path}.trust.{index}"
        if not 0 <= index < shape.quote_count:
            check.error(where, f"Answer {slot} has only {shape.quote_count} references.")
            continue
        code = choice(check, level, TRUST_LEVELS, where, f"Trust in reference {index + 1}")
        if code is not None:
            trust[str(index)] = code
    claims = []
    raw_claims = raw.get("claims")
    if raw_claims is not None and not isinstance(raw_claims, list | tuple):
        check.error(f"{path}.claims", "The claims must be a list of marked spans.")
        raw_claims = None
    spans: dict[tuple[int, int], int] = {}  # a span's first claim number
    for number, claim in enumerate(raw_claims or ()):
        cleaned = _claim(check, claim, shape, f"{path}.claims.{number}")
        if cleaned is None:
            continue
        span = (cleaned["start"], cleaned["end"])
        if span in spans:  # one span has one support level: a second claim on it is a slip, not a view
            check.error(
                f"{path}.claims.{number}",
                f"Claim {number + 1} of answer {slot} marks the same span as claim {spans[span] + 1}: "
                "keep one (edit it to change its support).",
            )
            continue
        spans[span] = number
        claims.append(cleaned)
    return {"trust": trust, "claims": claims}


def _claim(check: Checker, claim: Any, shape: AnswerShape, path: str) -> dict | None:
    if not isinstance(claim, Mapping):
        check.error(path, "Each claim must be a marked span of the answer.")
        return None
    before = len(check.errors)
    length = shape.text_length
    start, end = as_int(claim.get("start")), as_int(claim.get("end"))
    if start is None or not 0 <= start < length:
        check.error(
            f"{path}.start", f"The claim must start inside answer {shape.slot} ({length} characters)."
        )
    if end is None or end > length or end <= (start if start is not None else 0):
        check.error(f"{path}.end", f"The claim must end after its start, within answer {shape.slot}.")
    support = choice(check, claim.get("support"), CLAIM_SUPPORT, f"{path}.support", "Support")
    if support is None:
        check.error(f"{path}.support", "Choose how well this claim is supported.")
    relevance = choice(check, claim.get("relevance"), CLAIM_RELEVANCE, f"{path}.relevance", "Relevance")
    if relevance is None:
        check.error(f"{path}.relevance", "Choose whether this claim is relevant.")
    raw_quotes = claim.get("quotes")
    quotes: list[int] = []
    if raw_quotes is not None and not isinstance(raw_quotes, list | tuple):
        check.error(f"{path}.quotes", "The claim's references must be a list.")
    for value in raw_quotes if isinstance(raw_quotes, list | tuple) else ():
        index = as_int(value)
        if index is None or not 0 <= index < shape.quote_count:
            check.error(f"{path}.quotes", f"Answer {shape.slot} has only {shape.quote_count} references.")
        elif index not in quotes:
            quotes.append(index)
    if len(check.errors) > before:
        return None
    return {"start": start, "end": end, "support": support, "relevance": relevance, "quotes": sorted(quotes)}
