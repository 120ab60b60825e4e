"""A routed judge run on the results page: how many items each path decided, how many of them labelers
judged, the audit (the judge's verdicts on the audited items against the auditors' majority: the routed
verdicts' accuracy), and, only when the researcher asks, the batch's preference with the judge's verdicts
on the items routed to it counted as judgements (the headline stays the labelers' alone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from annotation.feedback.result_stats import Judgement, judgement_score, side_a_answer
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.judging.agreement import majority_agreement
from annotation.judging.reading import Figure, Human, Item, scored
from annotation.judging.routing import routing_counts
from annotation.judging.verdicts import Verdict
from annotation.models import JudgeRun, RoutePath, Routing

AUDIT_LABEL = "Routed verdicts on the audited items, against the auditors' majority"
PREFERENCE_LABEL = "Preference for A, the judge's verdicts on the items routed to it counted"


def routing_section(
    run: JudgeRun,
    humans: Mapping[int, list[Human]],
    items: Mapping[int, Item],
    found: Mapping[int, Verdict],
    figure: Figure,
    human_preference: Sequence[Judgement] | None,
) -> dict[str, Any] | None:
    """The run's routing figures (module docstring), or None when it routed nothing."""
    paths = dict(Routing.objects.filter(run=run).values_list("item_id", "path"))
    if not paths:
        return None
    template = run.batch.template
    audit = [
        (
            items[item].question,
            majority_agreement(template, verdict.judgement or {}, [h.judgement for h in humans[item]]),
        )
        for item, path in paths.items()
        if path == RoutePath.AUDIT
        and item in humans
        and (verdict := found.get(item)) is not None
        and verdict.counts
    ]
    section: dict[str, Any] = {
        "paths": routing_counts(run),
        "judged_by_labelers": {
            path: sum(1 for item, p in paths.items() if p == path and item in humans)
            for path in RoutePath.values
        },
        "audit": {"label": AUDIT_LABEL, **figure(scored(audit))},
        "preference": None,
    }
    if human_preference is not None and template in COMPARISON_TEMPLATES:
        decided = [
            (items[item].question, score)
            for item, path in paths.items()
            if path == RoutePath.JUDGE and (score := side_a_score(found.get(item), items[item])) is not None
        ]
        counted = f" ({len(human_preference)} labelers' judgements, {len(decided)} verdicts)"
        section["preference"] = {
            "label": PREFERENCE_LABEL + counted,
            "labeler_judgements": len(human_preference),
            "judge_verdicts": len(decided),
            **figure([*human_preference, *decided]),
        }
    return section


def side_a_score(found: Verdict | None, item: Item) -> float | None:
    """A comparison verdict scored as the results score a judgement: 1 side A preferred, 0.5 equal, 0 B."""
    if found is None or found.preference is None or len(found.answers) != 2:
        return None
    side_a = side_a_answer(found.answers, item.sides)
    return judgement_score(found.preference if side_a == found.answers[0] else -found.preference)
