"""Step-level review of a browsing episode (issue 38; PRODUCT.md 6b): what a labeler's response is, how it is
checked, and how labelers' step labels agree. Plain Python, no Django: the task kind's pages, API, exports and
the process reward model build on these rules.

Two forms, after the papers:

- **Step ratings** (PRM800K, Lightman et al. 2023: every step of a solution rated positive, neutral or
  negative, the labeler stopping at the first mistake): each action of the episode is rated good, neutral
  or bad; a bad rating names a reason (``STEP_REASONS``; "other" with a note), and the labeler marks the
  first bad step. The response::

      {"steps": {"0": {"rating": "good"}, "3": {"rating": "bad", "reason": "wrong_link", "note": ""}},
       "first_bad": 3, "comment": ""}

  Every step up to the first bad one must be rated (all of them when there is none); the steps after it
  may be left unrated, as PRM800K's labelers stopped there, unless the batch's required-field draw asks
  for everything (``required_all``). The first bad step must be the first step rated bad: a bad step
  before it, or a first bad step not rated bad, is an error, so the mark and the ratings never disagree.
- **Step preference** (Web-Shepherd, Chae et al. 2025: a chosen and a rejected action at one state): at one
  state of an episode, two candidate next actions, shown as A and B, rated on the comparison scale
  (``COMPARISON_SCALE``) with an optional reason.

Steps are keyed by their index from 0 (the episode's action index); messages for people number them from 1,
as the page does.

Agreement (``step_agreement``): Krippendorff's alpha on the step ratings (ordinal, bad < neutral < good; a
unit is one step of one item, the bootstrap draws items) and on the first bad step's position (ordinal, no
bad step counting as after the last), with the share of labeler pairs that marked the same first bad step.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from annotation.feedback.alpha import DEFAULT_RESAMPLES, Alpha, krippendorff_alpha
from annotation.feedback.scales import COMPARISON_SCALE, Choices
from annotation.feedback.validation_comparison import Checker, as_int, choice, is_blank, mapping, text

STEP_RATINGS: Choices = (("good", "Good"), ("neutral", "Neutral"), ("bad", "Bad"))
# Why a step is bad: what goes wrong in a WebGPT episode (issue 38's list), "other" with a note.
STEP_REASONS: Choices = (
    ("no_result", "No result: the search or find found nothing useful"),
    ("wrong_link", "Wrong link: a click on a result that does not help"),
    ("unsupported_quote", "Unsupported quote: the quote does not support the answer"),
    ("repeated_action", "Repeated action: the same action again, to no effect"),
    ("premature_answer", "Premature answer: it answered before it had the evidence"),
    ("other", "Other (say what in the note)"),
)
ORDINAL = ("bad", "neutral", "good")  # the ratings' order, worst first
NO_BAD_STEP = "none"  # the first bad step's value when there is none: after the last step


@dataclass(frozen=True)
class StepCheck:
    """A checked response: ``errors`` by field path (empty when it can be stored), the cleaned response."""

    errors: dict[str, str]
    cleaned: dict[str, Any]

    @property
    def complete(self) -> bool:
        return not self.errors


def check_step_ratings(response: Any, step_count: int, *, required_all: bool = False) -> StepCheck:
    """Checks a step-ratings response for an episode of ``step_count`` actions (module docstring). Never
    raises: whatever arrives, the errors say what is wrong with it."""
    check = Checker()
    if not isinstance(response, Mapping):
        return StepCheck({"response": "The response must be a set of named fields."}, {})
    steps = mapping(check, response.get("steps"), "steps", "Step ratings must be given by step number.")
    rated: dict[int, dict[str, str]] = {}
    for key, value in steps.items():
        index = as_int(key)
        path = f"steps.{key}"
        if index is None or not 0 <= index < step_count:
            check.error(path, f"There is no step {key!r}: the episode has steps 0 to {step_count - 1}.")
            continue
        rating = _step_rating(check, value, path)
        if rating is not None:
            rated[index] = rating
    first_bad = _first_bad(check, response.get("first_bad"), step_count)
    bad = sorted(index for index, rating in rated.items() if rating["rating"] == "bad")
    if bad and first_bad is None and "first_bad" not in check.errors:
        check.error("first_bad", f"Mark the first bad step (step {bad[0] + 1} is rated bad).")
    if first_bad is not None:
        if first_bad in rated and rated[first_bad]["rating"] != "bad":
            check.error("first_bad", f"The first bad step, step {first_bad + 1}, must be rated bad.")
        earlier = [index for index in bad if index < first_bad]
        if earlier:
            check.error("first_bad", f"Step {earlier[0] + 1} is rated bad, before the step marked first bad.")
    last = step_count - 1 if required_all or first_bad is None else first_bad
    for index in range(last + 1):
        if index not in rated:
            check.error(f"steps.{index}", f"Rate step {index + 1}.")
    cleaned = {
        "steps": {str(index): rated[index] for index in sorted(rated)},
        "first_bad": first_bad,
        "comment": text(check, response.get("comment"), "comment", "The comment"),
    }
    return StepCheck(dict(check.errors), cleaned)


def _step_rating(check: Checker, value: Any, path: str) -> dict[str, str] | None:
    """One step's rating, reason and note, cleaned; None when it is not rated (or not readable)."""
    fields = mapping(check, value, path, "A step's rating must be a set of named fields.")
    rating = choice(check, fields.get("rating"), STEP_RATINGS, f"{path}.rating", "Rating")
    reason = choice(check, fields.get("reason"), STEP_REASONS, f"{path}.reason", "Reason")
    note = text(check, fields.get("note"), f"{path}.note", "The note")
    if rating is None:
        if reason or note:
            check.error(f"{path}.rating", "Rate the step as well as giving a reason.")
        return None
    if rating != "bad":
        if reason:  # a reason says what is wrong: only a bad step has one
            check.error(f"{path}.reason", "Only a bad step takes a reason.")
        return {"rating": rating, "note": note} if note else {"rating": rating}
    if reason is None:
        check.error(f"{path}.reason", "Say why the step is bad.")
    elif reason == "other" and not note:
        check.error(f"{path}.note", "Say in the note what is wrong with the step.")
    return {"rating": rating, "reason": reason or "", "note": note}


def _first_bad(check: Checker, value: Any, step_count: int) -> int | None:
    if is_blank(value):
        return None
    index = as_int(value)
    if index is None or not 0 <= index < step_count:
        check.error("first_bad", f"The first bad step must be one of steps 0 to {step_count - 1}.")
        return None
    return index


def check_step_preference(response: Any) -> StepCheck:
    """Checks a step-preference response: the two candidate actions, as shown (A, B), on the comparison
    scale, with an optional reason (why the worse one is worse) and comment."""
    check = Checker()
    if not isinstance(response, Mapping):
        return StepCheck({"response": "The response must be a set of named fields."}, {})
    preference = choice(check, response.get("preference"), COMPARISON_SCALE, "preference", "Which is better")
    if preference is None and "preference" not in check.errors:
        check.error("preference", "Say which action is better.")
    reason = choice(check, response.get("reason"), STEP_REASONS, "reason", "Reason")
    if reason == "other" and is_blank(response.get("comment")):
        check.error("comment", "Say in the comment what is wrong with the worse action.")
    cleaned = {
        "preference": preference,
        "reason": reason or "",
        "comment": text(check, response.get("comment"), "comment", "The comment"),
    }
    return StepCheck(dict(check.errors), cleaned)


def first_bad_value(cleaned: Mapping[str, Any]) -> int | str:
    """The first bad step of a checked step-ratings response: its index, or ``NO_BAD_STEP``."""
    first_bad = cleaned.get("first_bad")
    return NO_BAD_STEP if first_bad is None else int(first_bad)


def rating_rows(
    cleaned: Mapping[str, Any],
    observations: Sequence[str],
    commands: Sequence[str],
    *,
    question_id: Hashable,
    episode_id: Hashable,
    labeler: Hashable,
) -> list[dict[str, Any]]:
    """The ``step-labels`` rows of one checked step-ratings response (``check_step_ratings(...).cleaned``)
    on an episode whose actions saw ``observations`` and wrote ``commands``: one row per rated step, in
    step order, each with the labeler's first bad step (the format ``training/runs/prm.py`` reads)."""
    rows = []
    for key, rating in sorted((cleaned.get("steps") or {}).items(), key=lambda pair: int(pair[0])):
        step = int(key)
        rows.append(
            {
                "kind": "rating",
                "question_id": question_id,
                "episode_id": episode_id,
                "labeler": labeler,
                "step": step,
                "observation": observations[step],
                "action": commands[step],
                "rating": rating["rating"],
                "reason": rating.get("reason", ""),
                "note": rating.get("note", ""),
                "first_bad": cleaned.get("first_bad"),
            }
        )
    return rows


def preference_row(
    cleaned: Mapping[str, Any],
    observation: str,
    shown: tuple[str, str],
    *,
    question_id: Hashable,
    episode_id: Hashable,
    step: int,
    labeler: Hashable,
) -> dict[str, Any]:
    """The ``step-labels`` row of one checked step-preference response (``check_step_preference``) on the
    two actions ``shown`` as A and B at ``observation``."""
    return {
        "kind": "preference",
        "question_id": question_id,
        "episode_id": episode_id,
        "labeler": labeler,
        "step": step,
        "observation": observation,
        "action_a": shown[0],
        "action_b": shown[1],
        "preference": cleaned["preference"],
        "reason": cleaned.get("reason", ""),
    }


@dataclass(frozen=True)
class StepAgreement:
    """How labelers' step ratings agree: alpha on the ratings and on the first bad step, and the share of
    pairs of labelers (on the same item) who marked the same first bad step (None without any pair)."""

    ratings: Alpha
    first_bad: Alpha
    first_bad_same: float | None
    first_bad_pairs: int


def step_agreement(
    responses: Mapping[Hashable, Mapping[Hashable, Mapping[str, Any]]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> StepAgreement:
    """``responses``: item -> {labeler: checked step-ratings response}. A step enters the ratings' alpha
    where at least two labelers rated it (a step after a labeler's first bad step is often unrated)."""
    units: dict[tuple[Hashable, int], dict[Hashable, str]] = {}
    clusters: dict[tuple[Hashable, int], Hashable] = {}
    positions: dict[Hashable, dict[Hashable, int | str]] = {}
    for item, by_labeler in responses.items():
        for labeler, cleaned in by_labeler.items():
            for key, rating in (cleaned.get("steps") or {}).items():
                unit = (item, int(key))
                units.setdefault(unit, {})[labeler] = rating["rating"]
                clusters[unit] = item
            positions.setdefault(item, {})[labeler] = first_bad_value(cleaned)
    ratings = krippendorff_alpha(
        units, "ordinal", domain=ORDINAL, clusters=clusters, resamples=resamples, seed=seed
    )
    longest = max((value for marks in positions.values() for value in marks.values() if value != NO_BAD_STEP),
                  default=-1)  # fmt: skip
    domain = [*range(longest + 1), NO_BAD_STEP]
    first_bad = krippendorff_alpha(positions, "ordinal", domain=domain, resamples=resamples, seed=seed)
    pairs = [(a, b) for marks in positions.values() for a, b in combinations(marks.values(), 2)]
    same = sum(a == b for a, b in pairs) / len(pairs) if pairs else None
    return StepAgreement(ratings, first_bad, same, len(pairs))


__all__ = [
    "NO_BAD_STEP",
    "ORDINAL",
    "STEP_RATINGS",
    "STEP_REASONS",
    "StepAgreement",
    "StepCheck",
    "check_step_preference",
    "check_step_ratings",
    "first_bad_value",
    "preference_row",
    "rating_rows",
    "step_agreement",
]
