"""A batch's judge runs beside its labelers, as the results page, its CSVs and the API show them: for each
run, its agreement with the labelers next to the labelers' own, per labeler, its position bias, a confusion
table per measure and, for a routed run, its paths (``routed``). Every figure is a mean with its 95%
bootstrap interval over questions (``reading.figure_of``); the labelers' judgements are read as exports
read them (``reading.human_judgements``).

The judge's verdict counts only where both orders agree (``verdicts``). The agreement figures, the judge's
and the labelers' alike, are over the items labelers judged where it does, so both sides are measured on
the same items; how many that is, and how many flipped, is said beside them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from annotation.feedback.result_stats import Judgement, side_a_answer
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.judging import confusion
from annotation.judging.agreement import majority_agreement, pair_agreement, slot_a_score
from annotation.judging.reading import Figure, Human, Item, batch_items, figure_of, human_judgements, scored
from annotation.judging.routed import routing_section
from annotation.judging.routing import HOLDING
from annotation.judging.verdicts import Asked, Verdict, run_judgements, verdict_counts, verdicts
from annotation.models import FeedbackBatch, JudgeRun


def judge_sections(
    batch: FeedbackBatch,
    *,
    seed: int,
    resamples: int,
    human_preference: Sequence[Judgement] | None = None,
) -> list[dict[str, Any]]:
    """A section per judge run of ``batch``, oldest first (none without runs). ``human_preference``: the
    results' overall preference judgements (question, score for side A), given when the researcher asks
    for the preference with the judge's verdicts on the items routed to it."""
    runs = list(batch.judge_runs.select_related("batch").order_by("id"))
    if not runs:
        return []
    humans, items = human_judgements(batch), batch_items(batch)
    figure = figure_of(seed=seed, resamples=resamples)
    return [_section(run, humans, items, figure, human_preference) for run in runs]


def _section(
    run: JudgeRun,
    humans: Mapping[int, list[Human]],
    items: Mapping[int, Item],
    figure: Figure,
    human_preference: Sequence[Judgement] | None,
) -> dict[str, Any]:
    template, preset = run.batch.template, run.batch.preset
    asked = [(item, one) for item, one in run_judgements(run) if item in items]
    found = verdicts(template, asked, preset)
    compared = {item: found[item] for item in humans if item in found and found[item].counts}
    return {
        "run": {
            "id": run.pk,
            "judge": run.judge_name,
            "prompt_version": run.prompt_version,
            "status": run.status,
            "route": run.route,
            "holding": run.route and run.status in HOLDING,
        },
        "counts": {**verdict_counts(found), "human_items": len(humans), "compared": len(compared)},
        "agreement": _agreement(run.judge_name, template, humans, items, compared, figure),
        "labelers": _per_labeler(template, humans, items, compared, figure),
        "position_bias": _position_bias(template, asked, found, items, figure),
        "confusion": _confusion(template, preset, asked, humans, items),
        "routing": routing_section(run, humans, items, found, figure, human_preference),
    }


def _agreement(
    judge: str,
    template: str,
    humans: Mapping[int, list[Human]],
    items: Mapping[int, Item],
    compared: Mapping[int, Verdict],
    figure: Figure,
) -> list[dict[str, Any]]:
    """The judge and the labelers side by side, on the same items (``compared``)."""
    labelers_majority, judge_majority, labelers_pairs, judge_pairs = [], [], [], []
    for item, found in compared.items():
        question, judged, verdict = items[item].question, humans[item], found.judgement or {}
        for human in judged:
            others = [other.judgement for other in judged if other is not human]
            labelers_majority.append((question, majority_agreement(template, human.judgement, others)))
            judge_pairs.append((question, pair_agreement(template, verdict, human.judgement)))
        judge_majority.append(
            (question, majority_agreement(template, verdict, [h.judgement for h in judged]))
        )
        for first, second in combinations(judged, 2):
            labelers_pairs.append((question, pair_agreement(template, first.judgement, second.judgement)))
    rows = (
        ("labelers_majority", "Labelers, each with the majority of the other labelers", labelers_majority),
        ("judge_majority", f"{judge}, with the labelers' majority", judge_majority),
        ("labelers_pairs", "Labelers with each other (every pair on an item)", labelers_pairs),
        ("judge_pairs", f"{judge} with each labeler (every pair on an item)", judge_pairs),
    )
    return [{"figure": code, "label": label, **figure(scored(scores))} for code, label, scores in rows]


def _per_labeler(
    template: str,
    humans: Mapping[int, list[Human]],
    items: Mapping[int, Item],
    compared: Mapping[int, Verdict],
    figure: Figure,
) -> list[dict[str, Any]]:
    """Each labeler's agreement with the other labelers (per item the mean over them, as
    ``feedback.agreement.comparison_agreement``) and with the judge, on the same items."""
    with_others: dict[str, list[tuple[int, float | None]]] = defaultdict(list)
    with_judge: dict[str, list[tuple[int, float | None]]] = defaultdict(list)
    for item, found in compared.items():
        question, judged, verdict = items[item].question, humans[item], found.judgement or {}
        for human in judged:
            scores = [
                pair_agreement(template, human.judgement, o.judgement) for o in judged if o is not human
            ]
            kept = [score for score in scores if score is not None]
            with_others[human.labeler].append((question, sum(kept) / len(kept) if kept else None))
            with_judge[human.labeler].append((question, pair_agreement(template, human.judgement, verdict)))
    rows = []
    for labeler in sorted(with_judge):
        others, judge = figure(scored(with_others[labeler])), figure(scored(with_judge[labeler]))
        rows.append(
            {
                "labeler": labeler,
                **{f"others_{key}": value for key, value in others.items()},
                **{f"judge_{key}": value for key, value in judge.items()},
            }
        )
    return rows


def _position_bias(
    template: str,
    asked: Sequence[tuple[int, Asked]],
    found: Mapping[int, Verdict],
    items: Mapping[int, Item],
    figure: Figure,
) -> list[dict[str, Any]]:
    """Over every item the judge read in both orders (labelers' or not): how often its verdict flips with
    the order; for comparisons, how often it prefers the answer shown in slot A, in each order."""
    flips = [
        (items[item].question, 0.0 if verdict.consistent else 1.0)
        for item, verdict in found.items()
        if verdict.consistent is not None
    ]
    rows = [{"figure": "flips", "label": "Verdict flips with the order", **figure(flips)}]
    if template in COMPARISON_TEMPLATES:
        for swapped, name in ((False, "first"), (True, "reversed")):
            scores = [
                (items[item].question, slot_a_score(one.response, one.order))
                for item, one in asked
                if one.swapped == swapped
            ]
            label = f"Prefers the answer shown in slot A, {name} order (ties half)"
            rows.append({"figure": f"slot_a_{name}", "label": label, **figure(scored(scores))})
    return rows


def _confusion(
    template: str,
    preset: str,
    asked: Sequence[tuple[int, Asked]],
    humans: Mapping[int, list[Human]],
    items: Mapping[int, Item],
) -> list[dict[str, Any]]:
    """A confusion table per measure (``confusion``), over the items labelers judged."""
    judged: dict[int, list[Asked]] = defaultdict(list)
    for item, one in asked:
        if item in humans and one.order:
            judged[item].append(one)
    tables = []
    for measure, label, choices in confusion.measures(template, preset):
        cells = []
        for item, mine in judged.items():
            side_a = side_a_answer(mine[0].order, items[item].sides)
            cells.append(
                (
                    [confusion.answered(template, measure, one.response, one.order, side_a) for one in mine],
                    [
                        confusion.answered(template, measure, h.response, h.order, side_a)
                        for h in humans[item]
                    ],
                )
            )
        tables.append(confusion.table(measure, label, choices, cells))
    return tables
