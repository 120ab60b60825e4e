"""Krippendorff's alpha of a batch's judgements, measure by measure, and of a template's across its
production batches (``alpha.krippendorff_alpha`` on what the labelers submitted).

Read: SUBMITTED assignments only (a researcher's reference is REFERENCE, never here), less those excluded
on flag review and the work a revocation excluded (``workforce.excluded``, as exports); gold items count like
any other (several labelers judge them too). The coders are the
labelers. The measures:

- comparisons: each dimension's 5-point preference (overall first), ordinal, a unit per item, the value
  the preference for the answer with the LOWER id (the display order undone, as ``stats`` does), so two
  labelers who saw the answers in opposite orders are compared on the same answer;
- WebGPT comparisons' question flags: a unit per item and flag code, nominal yes/no (every submitted
  WebGPT comparison says yes or no to each flag); a flag stays a decision of its own, and the units of one
  item are drawn together by the bootstrap;
- rankings: the 1-7 Likert and the (dense) rank of each answer, ordinal, a unit per item and answer, the
  answers of one item drawn together;
- ratings: each choice field of the preset, a unit per item; ordinal when the choices are the 0-3 points
  of a scale, nominal otherwise (yes/no, yes/no/unsure).
Measures with no pairable unit are left out, except the main one (overall preference, ranks, each rating
field), which is always listed so a page can say there is nothing yet.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache

from annotation.feedback.alpha import DEFAULT_RESAMPLES, DEFAULT_SEED, Alpha, Level, krippendorff_alpha
from annotation.feedback.scales import (
    COMPARISON_SCALE,
    COMPARISON_TEMPLATES,
    LIKERT_MAX,
    LIKERT_MIN,
    OVERALL,
    QUESTION_FLAGS,
    RANKING_MAX_K,
    STEP_TEMPLATES,
    codes,
    dimensions_for,
    preference_value,
    rating_fields,
)
from annotation.feedback.steps import step_agreement
from annotation.models import Assignment, FeedbackBatch
from annotation.workforce.excluded import kept_judgements

# Results are cached by a digest of the judgements read; CACHE_VERSION is part of it (raise it when the
# computation changes, so a shared cache never serves a figure computed the old way).
CACHE_VERSION = 2  # 2: step reviews
CACHE_SECONDS = 24 * 3600
PREFERENCE_DOMAIN = sorted(preference_value(code) for code in codes(COMPARISON_SCALE))
LEVEL_LABELS = {"nominal": "nominal", "ordinal": "ordinal"}


@dataclass(frozen=True)
class AlphaRow:
    """One measure's alpha: ``measure`` a stable code ("overall", "flags", "likert", "ranks", a rating
    field), ``label`` how a page names it."""

    measure: str
    label: str
    result: Alpha

    @property
    def level(self) -> Level:
        return self.result.level

    @property
    def text(self) -> str:
        return alpha_text(self)


@dataclass
class _Measure:
    code: str
    label: str
    level: Level
    domain: list
    always: bool = False
    units: dict[Any, dict[int, Any]] = field(default_factory=lambda: defaultdict(dict))
    clusters: dict[Any, int] = field(default_factory=dict)

    def add(self, unit: Any, item: int, labeler: int, value: Any) -> None:
        self.units[unit][labeler] = value
        self.clusters[unit] = item


def batch_alpha(
    batch: FeedbackBatch, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> list[AlphaRow]:
    """One row per measure of ``batch`` (see the module's docstring)."""
    return _rows(batch.template, batch.preset, [batch.pk], resamples=resamples, seed=seed)


def template_alpha(
    template: str,
    preset: str = "",
    *,
    include_screening: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[AlphaRow]:
    """One row per measure over every batch of ``template`` (for ratings: of ``preset``, whose fields
    differ), screening tests left out unless ``include_screening``: an item is still one batch's, so
    only labelers of the same batch are compared."""
    batches = FeedbackBatch.objects.filter(template=template)
    if template == "rating":
        batches = batches.filter(preset=preset)
    if not include_screening:
        batches = batches.filter(is_screening=False)
    ids = list(batches.values_list("pk", flat=True))
    return _rows(template, preset if template == "rating" else "", ids, resamples=resamples, seed=seed)


def _rows(template: str, preset: str, batch_ids: list[int], *, resamples: int, seed: int) -> list[AlphaRow]:
    """The alphas of what the batches hold now, from the cache when exactly these judgements were measured
    before: the bootstrap (``resamples`` draws per measure) is the cost, the read is cheap, so the key is a
    digest of everything read. A new, revised or excluded judgement is another key: never a stale figure."""
    tasks = list(
        kept_judgements(Assignment.objects.filter(item__batch_id__in=batch_ids))
        .order_by("id")
        .values_list("item_id", "labeler_id", "order", "response")
    )
    key = cache_key(template, preset, tasks, resamples=resamples, seed=seed)
    rows = cache.get(key)
    if rows is None:
        rows = _measured(template, preset, tasks, resamples=resamples, seed=seed)
        cache.set(key, rows, CACHE_SECONDS)
    return rows


def cache_key(template: str, preset: str, tasks: list[tuple], *, resamples: int, seed: int) -> str:
    """The cache key of the alphas of ``tasks`` (item, labeler, order, response rows, in id order)."""
    read = json.dumps([CACHE_VERSION, template, preset, resamples, seed, tasks], sort_keys=True, default=str)
    return f"alpha:{hashlib.sha256(read.encode()).hexdigest()}"


def _measured(template: str, preset: str, tasks: list[tuple], *, resamples: int, seed: int) -> list[AlphaRow]:
    if template == "step_preference":  # one 5-point preference per item, A and B the same for everyone
        measure = _Measure(
            "preference", "Which next action (5-point preference)", "ordinal", PREFERENCE_DOMAIN
        )
        for item, labeler, _, response in tasks:
            code = response.get("preference") if isinstance(response, dict) else None
            if code in codes(COMPARISON_SCALE):
                measure.add(item, item, labeler, preference_value(code))
        result = krippendorff_alpha(
            measure.units, "ordinal", domain=PREFERENCE_DOMAIN, resamples=resamples, seed=seed
        )
        return [AlphaRow(measure.code, measure.label, result)]
    if template in STEP_TEMPLATES:
        return _step_rows(tasks, resamples=resamples, seed=seed)
    measures = _measures(template, preset)
    for item, labeler, order, response in tasks:
        if isinstance(response, dict) and isinstance(order, list):
            _collect(template, measures, item, labeler, order, response)
    rows = []
    for measure in measures.values():
        if not measure.always and not any(len(by) >= 2 for by in measure.units.values()):
            continue
        result = krippendorff_alpha(
            measure.units,
            measure.level,
            domain=measure.domain,
            clusters=measure.clusters,
            resamples=resamples,
            seed=seed,
        )
        rows.append(AlphaRow(measure.code, measure.label, result))
    return rows


def _step_rows(tasks: list[tuple], *, resamples: int, seed: int) -> list[AlphaRow]:
    """A step review's two measures (``steps.step_agreement``): the step ratings, and the first bad step's
    position (no bad step counting as after the last)."""
    responses: dict[int, dict[int, dict]] = defaultdict(dict)
    for item, labeler, _, response in tasks:
        if isinstance(response, dict) and isinstance(response.get("steps"), dict):
            responses[item][labeler] = response
    agreement = step_agreement(responses, resamples=resamples, seed=seed)
    return [
        AlphaRow("step_ratings", "Step ratings (bad < neutral < good)", agreement.ratings),
        AlphaRow("first_bad", "First bad step (its position)", agreement.first_bad),
    ]


def _measures(template: str, preset: str) -> dict[str, _Measure]:
    if template in COMPARISON_TEMPLATES:
        dimensions = sorted(dimensions_for(template), key=lambda pair: pair[0] != OVERALL)
        measures = {
            code: _Measure(
                code, f"{label} (5-point preference)", "ordinal", PREFERENCE_DOMAIN, code == OVERALL
            )
            for code, label in dimensions
        }
        if template == "webgpt_comparison":
            measures["flags"] = _Measure("flags", "Question flags (each yes or no)", "nominal", [False, True])
        return measures
    if template == "ranking":
        return {
            "ranks": _Measure("ranks", "Ranks", "ordinal", list(range(1, RANKING_MAX_K + 1)), True),
            "likert": _Measure("likert", "1-7 ratings", "ordinal", list(range(LIKERT_MIN, LIKERT_MAX + 1))),
        }
    measures = {}
    for spec in rating_fields(preset):
        if spec.choices:
            choices = list(codes(spec.choices))
            level: Level = "ordinal" if all(code.isdigit() for code in choices) else "nominal"
            measures[spec.code] = _Measure(spec.code, spec.label, level, choices, True)
    return measures


def _collect(
    template: str, measures: Mapping[str, _Measure], item: int, labeler: int, order: list, response: dict
) -> None:
    if template in COMPARISON_TEMPLATES:
        ratings = response.get("ratings")
        flip = len(order) == 2 and order[0] != min(order)  # the value for the lower id, whatever was shown
        for code, value in (ratings if isinstance(ratings, dict) else {}).items():
            if code in measures and isinstance(value, str) and value in codes(COMPARISON_SCALE):
                preference = preference_value(value)
                measures[code].add(item, item, labeler, -preference if flip else preference)
        flags = response.get("flags")
        if "flags" in measures and isinstance(flags, dict):
            for code, _ in QUESTION_FLAGS:
                measures["flags"].add((item, code), item, labeler, flags.get(code) is True)
    elif template == "ranking":
        for name in ("ranks", "likert"):
            values = response.get(name)
            for position, answer in enumerate(order, start=1):
                value = values.get(str(position)) if isinstance(values, dict) else None
                if isinstance(value, int) and not isinstance(value, bool) and value in measures[name].domain:
                    measures[name].add((item, answer), item, labeler, value)
    else:
        for code, measure in measures.items():
            value = response.get(code)
            if value in measure.domain:
                measure.add(item, item, labeler, value)


def alpha_text(row: AlphaRow) -> str:
    """How a page says it: "Krippendorff's alpha (ordinal) 0.41 [0.22, 0.58], 40 items"."""
    result = row.result
    head = f"Krippendorff's alpha ({LEVEL_LABELS[result.level]})"
    items = f"{result.items} item{'s' if result.items != 1 else ''}"
    if result.alpha is None:
        why = "no variation: every value the same" if result.no_variation else "no item judged twice yet"
        return f"{head} undefined ({why}), {items}"
    interval = f" [{result.low:.2f}, {result.high:.2f}]" if result.low is not None else ""
    return f"{head} {result.alpha:.2f}{interval}, {items}"


def rows_as_dicts(rows: Iterable[AlphaRow]) -> list[dict[str, Any]]:
    """JSON-ready rows (for an API or a template that prefers plain values)."""
    return [
        {
            "measure": row.measure,
            "label": row.label,
            "text": row.text,
            **row.result.__dict__,
        }
        for row in rows
    ]
