"""Confusion tables of a judge against the labelers' majority, one per measure (plain Python): a comparison
template's dimensions on the 5-point scale, turned to the batch's sides (A: side A, as the results page
reads them), and a rating preset's choice fields. Rankings have none.

A row is what the judge said, a column what the labelers' majority said (``agreement.majority``: more than
half of the item's labelers who answered the measure), or "No majority". Each of the judge's judgements
counts once, both orders apart, so a judge that changes its rating with the order shows it off the diagonal
(a judge without position bias puts an item's two judgements in the same cell)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from annotation.feedback.scales import (
    COMPARISON_SCALE,
    COMPARISON_TEMPLATES,
    OVERALL,
    Choices,
    codes,
    dimensions_for,
    preference_value,
    rating_fields,
)
from annotation.judging.agreement import majority

NO_MAJORITY = "none"
NO_MAJORITY_LABEL = "No majority"
_CODE_OF = {preference_value(code): code for code in codes(COMPARISON_SCALE)}


def measures(template: str, preset: str = "") -> list[tuple[str, str, Choices]]:
    """(code, label, choices) of each measure with a table, overall first for comparisons."""
    if template in COMPARISON_TEMPLATES:
        dimensions = sorted(dimensions_for(template), key=lambda dimension: dimension[0] != OVERALL)
        return [(code, label, COMPARISON_SCALE) for code, label in dimensions]
    if template == "ranking":
        return []
    return [(spec.code, spec.label, spec.choices) for spec in rating_fields(preset) if spec.choices]


def answered(
    template: str, measure: str, response: Mapping[str, Any] | None, order: Sequence[int], side_a: int
) -> str | None:
    """What a judgement says on ``measure``: a comparison's rating for the pair seen from side A (``side_a``
    the answer on side A; the rating was given for ``order`` as shown), a rating field's choice; None when
    unanswered."""
    response = response or {}
    if template in COMPARISON_TEMPLATES:
        ratings = response.get("ratings")
        code = ratings.get(measure) if isinstance(ratings, dict) else None
        if code not in _CODE_OF.values() or len(order) != 2:
            return None
        value = preference_value(code)
        return _CODE_OF[value if order[0] == side_a else -value]
    value = response.get(measure)
    return value if isinstance(value, str) else None


def table(
    measure: str,
    label: str,
    choices: Choices,
    items: Iterable[tuple[Sequence[str | None], Sequence[str | None]]],
) -> dict[str, Any]:
    """The confusion table of ``measure`` over ``items``: per item, (the judge's answers, the labelers'
    answers); JSON-ready: ``columns`` (key, label), and a ``rows`` entry per choice the judge may give,
    with its count under each column's key and its ``total``."""
    known = set(codes(choices))
    cells: Counter[tuple[str, str]] = Counter()
    for judged, humans in items:
        found = majority(value for value in humans if value in known)
        column = found if isinstance(found, str) else NO_MAJORITY
        for value in judged:
            if value in known:
                cells[(value, column)] += 1
    columns = [{"key": code, "label": text} for code, text in choices]
    columns.append({"key": NO_MAJORITY, "label": NO_MAJORITY_LABEL})
    rows = []
    for code, text in choices:
        counts = {column["key"]: cells[(code, column["key"])] for column in columns}
        rows.append({"judge": text, **counts, "total": sum(counts.values())})
    return {"measure": measure, "label": label, "columns": columns, "rows": rows}
