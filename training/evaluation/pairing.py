"""Feedback batches from sampling runs (the loop's code, above annotation: it hands ``pair_runs`` to
annotation's batch service when the apps are ready, ``annotation.feedback.run_source``): per question,
which answers of one or two runs (or of a run and the human demonstrations) are judged together, which side
of the measured comparison each is on, and which questions are skipped, and why (docs/loop.md, "Batches
from samples").

A sample *has an answer* when its episode finished with a non-empty answer. A run *declined* a question when
its samples say so (the best score was under the run's threshold: nothing was chosen); the question's
*declined answer* is then its best-scored answered sample. Declined answers are paired only when asked for.

- Comparisons, one run: two samples of the same question (WebGPT's usual comparisons), up to
  ``pairs_per_question`` distinct pairs. A is the sample the run's reward model scored higher, so the
  preference for A is how often labelers agree with the reward model; unscored or equal: the lower index.
- Comparisons, two runs: run 1's chosen answer (A) against run 2's (B), one pair per question both cover.
- Comparisons, one run against the demonstrations: the run's chosen answer (A) against finished human
  demonstrations of the question (B), up to ``pairs_per_question`` of them.
- Rankings: the question's answered samples as one group (the 9 lowest indices of more; fewer than 4: skip).
- Ratings: each run's chosen answer to each question (and its declined answer when asked for).

Labelers never see any of this: the answers' sources stay in ``Answer.source`` and the order shown is drawn
per assignment (``annotation.feedback.assignment``).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from annotation.feedback.answers_import import answer_from_episode
from annotation.feedback.batches import GROUP_SIZES, BatchError, BatchSettings
from annotation.feedback.run_source import Pairing, run_label
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.models import Episode, EpisodeStatus, Question, Template
from training.models import Sample, SamplingRun

DEMONSTRATION_SIDE = "human demonstrations"
SKIPPED_SHOWN = 20  # skipped questions named in the error when every question is skipped


def has_answer(sample: Sample) -> bool:
    return sample.episode.status == EpisodeStatus.FINISHED and bool(sample.episode.answer.strip())


@dataclass
class RunQuestion:
    """One run's samples of one question, by index."""

    run: SamplingRun
    samples: list[Sample] = field(default_factory=list)

    @property
    def answered(self) -> list[Sample]:
        return [sample for sample in self.samples if has_answer(sample)]

    @property
    def declined(self) -> bool:
        return any(sample.declined for sample in self.samples)

    def declined_answer(self) -> Sample | None:
        """The best-scored answered sample (the lowest index among equals)."""
        scored = [sample for sample in self.answered if sample.score is not None]
        return min(scored, key=lambda sample: (-sample.score, sample.index), default=None)

    def answer(self, include_declined: bool) -> tuple[Sample | None, str]:
        """The run's answer to the question (its chosen sample, or its declined answer when asked for),
        or None and the reason there is none."""
        if not self.samples:
            return None, f"run {self.run.pk} has no samples of it"
        if self.declined and not include_declined:
            return None, f"run {self.run.pk} declined it"
        if self.declined:
            best = self.declined_answer()
        else:
            best = next((s for s in self.samples if s.chosen and has_answer(s)), None)
        return best, "" if best is not None else f"run {self.run.pk} has no answer to it"

    def candidates(self, include_declined: bool) -> tuple[list[Sample], str]:
        """The answered samples that may be paired or grouped, or [] and the reason."""
        if not self.samples:
            return [], f"run {self.run.pk} has no samples of it"
        if self.declined and not include_declined:
            return [], f"run {self.run.pk} declined it"
        return self.answered, ""


# What one question gives: its groups (each a list of samples and demonstrations; A first where there are
# sides) and, when something is missing, why (a question with no group is skipped for that reason).
Found = tuple[list[list[Sample | Episode]], str]


def pair_runs(config: BatchSettings) -> Pairing:
    """The groups of a batch from ``config.runs`` (checked by ``batches.check_batch_request``), creating
    the answers it needs; BatchError (nothing kept: the caller's transaction) if every question is skipped.
    """
    found = SamplingRun.objects.in_bulk(config.runs)
    for pk in config.runs:
        if pk not in found:  # deleted since the request was checked
            raise BatchError(f"There is no sampling run {pk}.", "runs")
    runs = [found[pk] for pk in config.runs]
    kind = _pairing_kind(config)
    by_question = _samples_by_question(runs)
    questions = _questions(runs)
    demonstrations = _demonstrations(questions) if kind == "vs_demonstrations" else {}
    pairing = Pairing()
    skipped: list[dict[str, Any]] = []
    declined: set[int] = set()
    for question_id in _question_order(runs):
        question = questions.get(question_id)
        if question is None:
            skipped.append({"question": question_id, "text": "", "reason": "it is no longer in the bank"})
            continue
        mine = [by_question[run.pk].get(question_id, RunQuestion(run)) for run in runs]
        groups, reason = PAIRERS[kind](mine, config, demonstrations.get(question_id, []))
        for group in groups:
            answers = [answer_from_episode(_episode_of(part)) for part in group]
            declined |= {a.pk for a, part in zip(answers, group, strict=True) if _is_declined(part)}
            pairing.add(answers, "AB" if kind in SIDED else "")
        if reason:
            skipped.append({"question": question_id, "text": question.text, "reason": reason})
    if not pairing.groups:
        raise BatchError(nothing_to_judge(skipped))
    pairing.origin = {
        "source": "runs",
        "pairing": kind,
        "runs": [run.pk for run in runs],
        "run_labels": {str(run.pk): run_label(run) for run in runs},
        "sides": _side_labels(kind, runs),
        "include_declined": config.include_declined,
        "pairs_per_question": config.pairs_per_question,
        "declined_answers": sorted(declined),  # answers to questions a run declined
        "skipped": skipped,
    }
    return pairing


def _episode_of(part: Sample | Episode) -> Episode:
    return part.episode if isinstance(part, Sample) else part


def _is_declined(part: Sample | Episode) -> bool:
    return isinstance(part, Sample) and part.declined


def _sample_pairs(mine: list[RunQuestion], config: BatchSettings, humans: list[Episode]) -> Found:
    samples, reason = mine[0].candidates(config.include_declined)
    if len(samples) < 2:
        return [], reason or _too_few(len(samples), "a pair needs 2")
    return [list(reward_model_order(*pair)) for pair in spread_pairs(samples, config.pairs_per_question)], ""


def _run_pair(mine: list[RunQuestion], config: BatchSettings, humans: list[Episode]) -> Found:
    (first, first_reason), (second, second_reason) = (rq.answer(config.include_declined) for rq in mine)
    if first is None or second is None:
        return [], "; ".join(reason for reason in (first_reason, second_reason) if reason)
    return [[first, second]], ""


def _demonstration_pairs(mine: list[RunQuestion], config: BatchSettings, humans: list[Episode]) -> Found:
    sample, reason = mine[0].answer(config.include_declined)
    if sample is None or not humans:
        return [], "; ".join(r for r in (reason, "" if humans else "no human demonstration") if r)
    return [[sample, human] for human in humans[: config.pairs_per_question]], ""


def _ranking_group(mine: list[RunQuestion], config: BatchSettings, humans: list[Episode]) -> Found:
    samples, reason = mine[0].candidates(config.include_declined)
    smallest, largest = GROUP_SIZES[config.template]
    if len(samples) < smallest:
        return [], reason or _too_few(len(samples), f"a ranking needs {smallest}")
    return [samples[:largest]], ""


def _rated_answers(mine: list[RunQuestion], config: BatchSettings, humans: list[Episode]) -> Found:
    """Each run's answer on its own; a run without one is the reason given, the others' are still rated."""
    picked = [rq.answer(config.include_declined) for rq in mine]
    groups = [[sample] for sample, _ in picked if sample is not None]
    return groups, "; ".join(reason for _, reason in picked if reason)


PAIRERS = {
    "samples": _sample_pairs,
    "runs": _run_pair,
    "vs_demonstrations": _demonstration_pairs,
    "group": _ranking_group,
    "chosen": _rated_answers,
}
SIDED = ("samples", "runs", "vs_demonstrations")  # pairings whose items have a side A and a side B


def _pairing_kind(config: BatchSettings) -> str:
    if config.template == Template.RANKING:
        return "group"
    if config.template not in COMPARISON_TEMPLATES:
        return "chosen"
    if config.vs_demonstrations:
        return "vs_demonstrations"
    return "runs" if len(config.runs) == 2 else "samples"


def _side_labels(kind: str, runs: Sequence[SamplingRun]) -> dict[str, str]:
    """What side A and side B stand for (researchers only), for the pairings that have sides."""
    if kind == "samples":
        label = run_label(runs[0])
        if runs[0].reward_model_name:
            higher = f"scored higher by {runs[0].reward_model_name}"
            return {"A": f"{label}, the sample {higher}", "B": f"{label}, the other sample"}
        return {"A": f"{label}, the lower sample index", "B": f"{label}, the higher sample index"}
    if kind == "runs":
        return {"A": run_label(runs[0]), "B": run_label(runs[1])}
    if kind == "vs_demonstrations":
        return {"A": run_label(runs[0]), "B": DEMONSTRATION_SIDE}
    return {}


def spread_pairs(samples: Sequence[Sample], count: int) -> list[tuple[Sample, Sample]]:
    """Up to ``count`` distinct pairs of the samples, each next pair the one whose samples are in the fewest
    pairs so far (lowest indices first among equals), so that no sample dominates the judgements."""
    remaining = list(itertools.combinations(samples, 2))
    used: Counter[int] = Counter()
    chosen = []
    while remaining and len(chosen) < count:
        pair = min(remaining, key=lambda p: used[p[0].index] + used[p[1].index])  # the first of the least
        remaining.remove(pair)
        chosen.append(pair)
        used.update(sample.index for sample in pair)
    return chosen


def reward_model_order(first: Sample, second: Sample) -> tuple[Sample, Sample]:
    """(side A, side B) of two samples of a question: A is the one the reward model scored higher; when
    either is unscored or the scores are equal, the lower index."""
    if first.score is not None and second.score is not None and first.score != second.score:
        return (first, second) if first.score > second.score else (second, first)
    return (first, second) if first.index < second.index else (second, first)


def _too_few(count: int, need: str) -> str:
    return f"only {count} answered sample{'' if count == 1 else 's'} ({need})"


def nothing_to_judge(skipped: Sequence[dict[str, Any]]) -> str:
    """Why a batch from runs would be empty: the reasons, most frequent first, with how many questions."""
    reasons = Counter(entry["reason"] for entry in skipped)
    summary = "; ".join(f"{reason} ({count})" for reason, count in reasons.most_common(SKIPPED_SHOWN))
    return (
        f"Every question was skipped, so there is nothing to judge: {summary or 'the runs hold no questions'}"
    )


def _question_order(runs: Sequence[SamplingRun]) -> list[int]:
    """The runs' questions in the first run's order, then the second run's others."""
    return list(dict.fromkeys(itertools.chain.from_iterable(run.question_ids for run in runs)))


def _questions(runs: Sequence[SamplingRun]) -> dict[int, Question]:
    return Question.objects.only("pk", "text").in_bulk(_question_order(runs))


def _samples_by_question(runs: Iterable[SamplingRun]) -> dict[int, dict[int, RunQuestion]]:
    """run id -> question id -> the run's samples of it, by index (each with its episode)."""
    grouped: dict[int, dict[int, RunQuestion]] = defaultdict(dict)
    for run in runs:
        samples = (
            Sample.objects.filter(run=run)
            .select_related("episode__question")
            # A browser state per sample adds up over a large run; only the samples used read theirs.
            .defer("episode__settings", "episode__state")
            .order_by("question", "index")
        )
        for sample in samples:
            sample.run = run  # the run's label and reward model, without a query per sample
            grouped[run.pk].setdefault(sample.question_id, RunQuestion(run)).samples.append(sample)
    return grouped


def _demonstrations(questions: dict[int, Question]) -> dict[int, list[Episode]]:
    """Finished human demonstrations with an answer, per question, the earliest first."""
    found = (
        Episode.objects.human()
        .filter(status=EpisodeStatus.FINISHED, question_id__in=questions)
        .exclude(answer="")
        .select_related("question")
        .defer("settings")
        .order_by("finished_at", "id")
    )
    by_question: dict[int, list[Episode]] = defaultdict(list)
    for episode in found:
        if episode.answer.strip():
            by_question[episode.question_id].append(episode)
    return by_question
