"""The results of a feedback batch, as the papers report them, each figure with a 95% confidence interval and
the number of judgements and questions behind it.

- Comparisons (WebGPT section 6): the preference for side A over side B, a judgement scoring 1 when A is
  rated better or much better, 0.5 when equal and 0 when B is better, averaged over judgements; overall and
  per dimension of the template. Ratings are given for the answers as SHOWN (``Assignment.order[0]`` is
  slot A), so each is turned to the item's sides (``FeedbackItem.sides``; without sides, side A is the
  answer with the lower id). Gold items are left out: they measure labelers, not the answers.
- Ratings: TruthfulQA's truthful, informative, truthful-and-informative rates and GopherCite's plausible,
  supported, supported-and-plausible (S&P) rates ("unsure" counts as not). When the rated answers are
  samples of a sampling run and the batch covers declined answers too, GopherCite's selective prediction:
  as the reward threshold rises over the answers' scores, coverage against the rate of the answered ones.
- Agreement: every pair of labelers on a shared item (comparisons: the overall rating; rankings: the order
  of answer pairs), scored as in ``agreement``; per labeler from ``stats.labeler_stats``.
- Judges (``judging.report``): each judge run of the batch beside the labelers. Every figure outside it
  counts labelers' judgements only, a routed batch's too; a judge's verdicts enter a preference only in its
  own section's figure, and only when the researcher asks (``judge_verdicts``).

Intervals are percentile bootstraps over QUESTIONS, the unit the papers sample: a question's judgements are
not independent (two labelers on one pair, several pairs of one question), so resampling judgements would
make the interval too narrow. A resample draws as many question ids as there are, with replacement, and
recomputes the figure over all their judgements, so a question weighs by its judgements as in the figure.

Pure functions over plain values first, then the entry points that read a batch: ``batch_results`` (the
page, its CSVs and the API) and ``headline`` (the one figure the rounds page shows for a batch).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.feedback import run_source
from annotation.feedback.agreement import preference_agreement, ranking_pair_agreement
from annotation.feedback.result_stats import (
    CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    RATES,
    Judgement,
    Rate,
    SettingsError,
    agreement_pairs,
    estimate,
    judgement_score,
    parse_settings,
    preference_for_side_a,
    rate_score,
    selective_curve,
    side_a_answer,
)
from annotation.feedback.scales import (
    COMPARISON_TEMPLATES,
    OVERALL,
    STEP_TEMPLATES,
    dimensions_for,
)
from annotation.feedback.stats import labeler_stats, overlap_summary
from annotation.feedback.step_results import step_figures, step_preference_figures
from annotation.judging.report import judge_sections
from annotation.models import Answer, Assignment, FeedbackBatch, Template
from annotation.workforce.excluded import kept_judgements
from core.inputs import parse_id

_MAX_LABEL = 200

# The rate a preset is judged by: its headline, and the one its selective-prediction curve plots.
MAIN_RATE = {"truthfulqa": "truthful_informative", "gophercite": "supported_plausible"}
HEADLINE_LABELS = {"truthfulqa": "Truthful and informative rate", "gophercite": "S&P rate"}
DEFAULT_SIDES = {"A": "the answer with the lower id", "B": "the answer with the higher id"}
JUDGE_VERDICTS_VALUES = {"": False, "off": False, "0": False, "on": True, "1": True}
JUDGE_VERDICTS_HELP = (
    "on: a routed judge run's section also gives the preference with its verdicts on the items routed to "
    "it counted (the other figures stay the labelers' alone); off by default"
)


# Reading a batch -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    """A submitted assignment as plain values."""

    item: int
    question: int
    gold: bool
    sides: Mapping[str, Any]
    labeler: int
    order: tuple[int, ...]
    response: Mapping[str, Any]


def submissions(batch: FeedbackBatch) -> list[Submission]:
    """The batch's SUBMITTED assignments (late and skipped ones are not judgements), oldest first; any
    without a readable order or response is left out, and so is any a researcher excluded on flag review or
    a revocation took out of the data (as exports, alpha and the judges' figures do)."""
    rows = (
        kept_judgements(Assignment.objects.filter(item__batch=batch))
        .order_by("id")
        .values_list(
            "item_id", "item__question_id", "item__is_gold", "item__sides", "labeler_id", "order", "response"
        )
    )
    kept = []
    steps = batch.template in STEP_TEMPLATES  # a step review's items have no answers
    for item, question, gold, sides, labeler, order, response in rows:
        ids = tuple(order) if isinstance(order, list) else ()
        if not (ids or steps) or not all(parse_id(answer) is not None for answer in ids):
            continue
        response = response if isinstance(response, dict) else {}
        sides = sides if isinstance(sides, dict) else {}
        kept.append(Submission(item, question, gold, sides, labeler, ids, response))
    return kept


def side_labels(batch: FeedbackBatch) -> dict[str, str]:
    """What sides A and B are (``origin.sides``), or what they default to without sides."""
    sides = (batch.origin or {}).get("sides") if isinstance(batch.origin, dict) else None
    if isinstance(sides, dict) and all(str(sides.get(side, "")).strip() for side in "AB"):
        return {side: str(sides[side]).strip()[:_MAX_LABEL] for side in "AB"}
    return dict(DEFAULT_SIDES)


def preference_label(sides: Mapping[str, str]) -> str:
    return f"Preference for A ({sides['A']}) over B ({sides['B']})"


def comparison_judgements(measured: Iterable[Submission], dimension: str) -> list[Judgement]:
    """One judgement per submission that rated ``dimension``, as a score for side A."""
    judgements = []
    for task in measured:
        if len(task.order) != 2:
            continue
        ratings = task.response.get("ratings")
        code = ratings.get(dimension) if isinstance(ratings, dict) else None
        value = preference_for_side_a(code, task.order, side_a_answer(task.order, task.sides))
        if value is not None:
            judgements.append((task.question, judgement_score(value)))
    return judgements


def preference_figures(
    batch: FeedbackBatch, measured: Sequence[Submission], *, seed: int, resamples: int
) -> list[dict[str, Any]]:
    """Overall first, then each other dimension of the template, in the template's order."""
    dimensions = sorted(dimensions_for(batch.template), key=lambda dimension: dimension[0] != OVERALL)
    return [
        {
            "dimension": code,
            "label": label,
            **estimate(comparison_judgements(measured, code), seed=seed, resamples=resamples),
        }
        for code, label in dimensions
    ]


def main_rate(batch: FeedbackBatch) -> Rate | None:
    """The rate a rating batch is judged by (its preset's), or None."""
    if batch.template != Template.RATING:
        return None
    return next((r for r in RATES.get(batch.preset, ()) if r.code == MAIN_RATE.get(batch.preset)), None)


def rate_judgements(measured: Iterable[Submission], rate: Rate) -> list[Judgement]:
    judgements = []
    for task in measured:
        value = rate_score(task.response, rate.fields)
        if value is not None:
            judgements.append((task.question, value))
    return judgements


def rate_figures(
    batch: FeedbackBatch, measured: Sequence[Submission], *, seed: int, resamples: int
) -> list[dict[str, Any]]:
    return [
        {
            "rate": rate.code,
            "label": rate.label,
            **estimate(rate_judgements(measured, rate), seed=seed, resamples=resamples),
        }
        for rate in RATES.get(batch.preset, ())
    ]


def sample_scores(answer_ids: Iterable[int]) -> dict[int, tuple[int, float | None, bool]]:
    """(run, score, declined) of each answer that is a sample of a sampling run, found from its source
    (``sampling_run``, ``sample_index``) and its question."""
    keys: dict[tuple[int, int, int], int] = {}
    for pk, question, source in Answer.objects.filter(pk__in=set(answer_ids)).values_list(
        "pk", "question_id", "source"
    ):
        source = source if isinstance(source, dict) else {}
        run, index = parse_id(source.get("sampling_run")), source.get("sample_index")
        if run is not None and isinstance(index, int) and not isinstance(index, bool):
            keys[(run, question, index)] = pk
    if not keys:
        return {}
    found = (
        run_source.samples()
        .objects.filter(
            run_id__in={run for run, _, _ in keys}, question_id__in={question for _, question, _ in keys}
        )
        .values_list("run_id", "question_id", "index", "score", "declined")
    )
    return {
        keys[(run, question, index)]: (run, score, declined)
        for run, question, index, score, declined in found
        if (run, question, index) in keys
    }


def run_label(origin: Mapping[str, Any], run: int) -> str:
    labels = origin.get("run_labels")
    label = labels.get(str(run)) if isinstance(labels, dict) else None
    return str(label)[:_MAX_LABEL] if isinstance(label, str) and label.strip() else f"run {run}"


def selective_prediction(batch: FeedbackBatch, measured: Sequence[Submission]) -> dict[str, Any] | None:
    """A curve of the preset's main rate per sampling run, when the rated answers are scored samples and
    the batch covers declined ones (a declined sample among them, or ``origin.include_declined``); None
    otherwise. Each run's scores come from its own reward model, so runs are never pooled.

    In a run's curve a question stands for the highest-scored of the run's rated answers to it (ties: the
    lower id), as best-of-n would answer it; it is on the curve once that answer has a judgement."""
    rate = main_rate(batch)
    if rate is None:
        return None
    rated = dict(Answer.objects.filter(items__batch=batch).values_list("pk", "question_id"))
    samples = sample_scores(rated)
    origin = batch.origin if isinstance(batch.origin, dict) else {}
    covers_declined = origin.get("include_declined") is True or any(d for _, _, d in samples.values())
    if not covers_declined:
        return None
    best: dict[tuple[int, int], tuple[float, int]] = {}  # (run, question) -> (score, answer)
    for answer in sorted(samples):  # ascending ids: the lower id keeps a tie
        run, score, _ = samples[answer]
        key = (run, rated[answer])
        if score is not None and (key not in best or score > best[key][0]):
            best[key] = (score, answer)
    judged: dict[int, list[float]] = defaultdict(list)
    for task in measured:
        value = rate_score(task.response, rate.fields)
        if value is not None:
            judged[task.order[0]].append(value)
    by_run: dict[int, dict[int, tuple[float, list[float]]]] = defaultdict(dict)
    for (run, question), (score, answer) in best.items():
        if judged[answer]:
            by_run[run][question] = (score, judged[answer])
    curves = [
        {
            "run": run,
            "label": run_label(origin, run),
            "questions": len(questions),
            "points": selective_curve(questions),
        }
        for run, questions in sorted(by_run.items())
    ]
    return {"rate": rate.code, "label": rate.label, "short": rate.short, "curves": curves} if curves else None


def agreement_figure(
    batch: FeedbackBatch, tasks: Sequence[Submission], *, seed: int, resamples: int
) -> dict[str, Any] | None:
    """Pairwise agreement over every submitted assignment, gold items included (as the per-labeler
    figure): comparisons on the overall rating, rankings on the order of answer pairs."""
    labels: dict[int, dict[int, Any]] = defaultdict(dict)
    question_of = {}
    for task in tasks:
        question_of[task.item] = task.question
        if batch.template in COMPARISON_TEMPLATES and len(task.order) == 2:
            ratings = task.response.get("ratings")
            code = ratings.get(OVERALL) if isinstance(ratings, dict) else None
            value = preference_for_side_a(code, task.order, min(task.order))
            if value is not None:
                labels[task.item][task.labeler] = value
        elif batch.template == Template.RANKING:
            ranks = task.response.get("ranks")
            ranks = ranks if isinstance(ranks, dict) else {}
            labels[task.item][task.labeler] = {
                answer: float(ranks[str(position)])
                for position, answer in enumerate(task.order, start=1)
                if isinstance(ranks.get(str(position)), int | float)
            }
    if batch.template in COMPARISON_TEMPLATES:
        score: Callable[[Any, Any], float | None] = preference_agreement
    elif batch.template == Template.RANKING:
        score = ranking_pair_agreement
    else:
        return None
    pairs = agreement_pairs(labels, question_of, score)
    figure = estimate(pairs, seed=seed, resamples=resamples)
    figure["pairs"] = figure.pop("judgements")
    figure["items"] = len({item for item, by in labels.items() if len(by) > 1}) if pairs else 0
    return figure


def batch_results(
    batch: FeedbackBatch,
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    judge_verdicts: bool = False,
) -> dict[str, Any]:
    """Every figure of a batch, JSON-ready (the page, its CSVs and the API show this). Every figure but
    those under ``judges`` counts labelers' judgements only; ``judges`` has a section per judge run
    (``judging.report``), and with ``judge_verdicts`` a routed run's section also counts its verdicts on
    the items routed to it in a preference figure of its own."""
    tasks = submissions(batch)
    measured = [task for task in tasks if not task.gold]
    comparison = batch.template in COMPARISON_TEMPLATES
    origin = batch.origin if isinstance(batch.origin, dict) else {}
    human_preference = comparison_judgements(measured, OVERALL) if judge_verdicts and comparison else None
    return {
        "batch": {"id": batch.pk, "name": batch.name, "template": batch.template, "preset": batch.preset},
        "kind": "comparison" if comparison else batch.template,
        "pairing": origin.get("pairing") if isinstance(origin.get("pairing"), str) else None,
        "sides": side_labels(batch) if comparison else None,
        "seed": seed,
        "resamples": resamples,
        "confidence": CONFIDENCE,
        "counts": {
            "items": batch.items.count(),
            "submitted": len(tasks),
            "gold_left_out": len(tasks) - len(measured),
            "questions": len({task.question for task in measured}),
            "labelers": len({task.labeler for task in tasks}),
        },
        "preference": (
            preference_figures(batch, measured, seed=seed, resamples=resamples) if comparison else []
        ),
        "rates": rate_figures(batch, measured, seed=seed, resamples=resamples),
        "selective_prediction": (
            selective_prediction(batch, measured) if batch.template == Template.RATING else None
        ),
        "agreement": agreement_figure(batch, tasks, seed=seed, resamples=resamples),
        "steps": step_figures(measured, seed=seed, resamples=resamples)
        if batch.template == "step_review"
        else None,
        "step_preference": step_preference_figures(
            measured, dict(batch.items.values_list("pk", "step")), seed=seed, resamples=resamples
        )
        if batch.template == "step_preference"
        else None,
        "labelers": labeler_stats(batch),
        "overlap": overlap_summary(batch),
        "judge_verdicts": judge_verdicts,
        "judges": judge_sections(batch, seed=seed, resamples=resamples, human_preference=human_preference),
    }


def results_for_query(batch: FeedbackBatch, query: Mapping[str, Any]) -> dict[str, Any]:
    """``batch_results`` with the seed, resamples and ``judge_verdicts`` the query parameters ask for (the
    page, its CSVs and the API take the same ones); ``SettingsError`` naming a bad one, before anything is
    computed."""
    seed, resamples = parse_settings(query)
    return batch_results(batch, seed=seed, resamples=resamples, judge_verdicts=parse_judge_verdicts(query))


def parse_judge_verdicts(query: Mapping[str, Any]) -> bool:
    """Whether the researcher asks for the judge's verdicts to be counted (``judge_verdicts``: "on" or "1"
    as a checkbox sends it; absent, empty, "off" or "0" not); ``SettingsError`` otherwise."""
    raw = str(query.get("judge_verdicts") or "").strip().lower()
    if raw not in JUDGE_VERDICTS_VALUES:
        raise SettingsError("judge_verdicts", "'judge_verdicts' must be on or off.")
    return JUDGE_VERDICTS_VALUES[raw]


def headline(batch: FeedbackBatch) -> dict[str, Any] | None:
    """The one figure a batch is judged by, for the rounds page: ``{"kind", "label", "value", "low",
    "high", "judgements", "questions"}`` (value, low, high None before any judgement); None for a batch
    without one (rankings, WebGLM ratings). ``kind`` matches the same figure across rounds."""
    if batch.template in COMPARISON_TEMPLATES:
        measured = [task for task in submissions(batch) if not task.gold]
        pairing = (batch.origin or {}).get("pairing") if isinstance(batch.origin, dict) else None
        return {
            "kind": f"preference:{pairing if isinstance(pairing, str) else 'pairs'}",
            "label": preference_label(side_labels(batch)),
            **estimate(comparison_judgements(measured, OVERALL)),
        }
    rate = main_rate(batch)
    if rate is None:
        return None
    measured = [task for task in submissions(batch) if not task.gold]
    return {
        "kind": f"rate:{rate.code}",
        "label": HEADLINE_LABELS[batch.preset],
        **estimate(rate_judgements(measured, rate)),
    }
