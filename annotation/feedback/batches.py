"""Feedback batches: which answers are judged together, under which template and policy."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO

from django.db import transaction

from annotation.feedback import run_source
from annotation.feedback.answers_import import answer_from_episode, import_answers
from annotation.feedback.batch_settings import BatchError, BatchSettings, batch_fields
from annotation.feedback.scales import (
    COMPARISON_TEMPLATES,
    RATING_PRESETS,
    STEP_TEMPLATES,
    presets_for,
    requirable_fields,
)
from annotation.feedback.step_batches import check_step_source, create_step_batch
from annotation.models import Answer, Episode, EpisodeStatus, FeedbackBatch, FeedbackItem, Template
from core.inputs import parse_id
from core.models import log_action
from core.permissions import AnyUser

GROUP_SIZES = {
    Template.WEBGPT_COMPARISON: (2, 2),
    Template.MINIMAL_COMPARISON: (2, 2),
    Template.RANKING: (4, 9),
    Template.RATING: (1, 1),
}


SOURCES = (
    ("demonstrations", "Finished demonstrations (pairs on the same question; step reviews: their episodes)"),
    ("bank", "Every answer in the bank (demonstrations, models, references; mixed per question)"),
    ("file", "An answers JSONL file"),
    ("runs", "Answers of sampling runs (one or two runs; see the pairing options; step reviews: episodes)"),
)


# What a batch may be set to: one set of limits for the console form, the API and the command.
MAX_NAME = FeedbackBatch._meta.get_field("name").max_length
MAX_INSTRUCTIONS = 20_000  # characters; instructions are shown above every task
OVERLAP = (1, 10)
PRIORITY = (1, 10)
LEASE_SECONDS = (60, 24 * 3600)
REVISION_SECONDS = (0, 7 * 24 * 3600)
MAX_RUNS = 2  # one run's samples, or two runs' chosen answers side by side
PAIRS_PER_QUESTION = (1, 10)


# The workforce's settings (PRODUCT.md section 9): screening cutoffs, gold checks, adaptive overlap.
SHARE = (0.0, 1.0)  # agreement_cutoff, flag_cutoff, gold_threshold
GOLD_MIN_ITEMS = (1, 1000)
MAX_OVERLAP = OVERLAP
RANK_AGREEMENT = (-1.0, 1.0)
# What only the runs source reads, in words: given with another source, they are refused, not ignored.
STEP_INPUTS = {"demonstration_batch": "Demonstration batch", "judged_worse": "Only episodes judged worse"}
RUN_INPUTS = {
    "runs": "Sampling runs",
    "vs_demonstrations": "Against human demonstrations",
    "include_declined": "Include declined answers",
    "pairs_per_question": "Pairs per question",
}


def group_answers(answers: Iterable[Answer], template: str) -> list[list[Answer]]:
    """Answers of one question judged together: every pair (comparisons), groups of up to 9 (rankings,
    at least 4), one by one (ratings). Questions with too few answers are left out."""
    smallest, largest = GROUP_SIZES[template]
    by_question: dict[int, dict[int, Answer]] = defaultdict(dict)
    for answer in answers:
        by_question[answer.question_id][answer.pk] = answer  # the same answer twice is one answer
    groups: list[list[Answer]] = []
    for question_id in sorted(by_question):
        same = sorted(by_question[question_id].values(), key=lambda a: a.pk)
        if largest == 2:
            groups.extend([list(pair) for pair in itertools.combinations(same, 2)])
        elif largest == 1:
            groups.extend([[answer] for answer in same])
        elif len(same) >= smallest:
            groups.append(same[:largest])
    return groups


def demonstration_answers(episodes: Iterable[Episode] | None = None) -> list[Answer]:
    """Answers for finished demonstrations (all of them by default)."""
    if episodes is None:
        episodes = Episode.objects.human().filter(status=EpisodeStatus.FINISHED).exclude(answer="")
    return [answer_from_episode(episode) for episode in episodes]


def check_batch_settings(config: BatchSettings) -> None:
    """The settings a batch may have; BatchError naming the field otherwise."""
    if not config.name.strip():
        raise BatchError("Give the batch a name.", "name")
    if len(config.name) > MAX_NAME:
        raise BatchError(f"The name is at most {MAX_NAME} characters.", "name")
    if config.template not in GROUP_SIZES and config.template not in STEP_TEMPLATES:
        raise BatchError(f"There is no template {config.template!r}.", "template")
    if config.template == Template.RATING and not config.preset:
        presets = ", ".join(RATING_PRESETS)
        raise BatchError(f"Choose a preset for a rating batch ({presets}).", "preset")
    allowed = [code for code, _ in presets_for(config.template)]
    if config.preset and config.preset not in allowed:
        if not allowed:
            raise BatchError("Only rating and ranking batches take a preset.", "preset")
        raise BatchError(
            f"There is no {config.template} preset {config.preset!r} ({', '.join(allowed)}).", "preset"
        )
    if len(config.instructions) > MAX_INSTRUCTIONS:
        raise BatchError(f"The instructions are at most {MAX_INSTRUCTIONS} characters.", "instructions")
    if not OVERLAP[0] <= config.overlap <= OVERLAP[1]:
        raise BatchError(f"The overlap is {OVERLAP[0]} to {OVERLAP[1]} labelers per item.", "overlap")
    check_priority(config.priority)
    if not 0 <= config.required_probability <= 1:  # also NaN
        raise BatchError("The probability that everything is required is 0 to 1.", "required_probability")
    requirable = [code for code, _ in requirable_fields(config.template, config.preset or None)]
    for code in config.always_required or ():
        if code not in requirable:
            raise BatchError(
                f"{code!r} is not a field of this template; choose from {', '.join(requirable)}.",
                "always_required",
            )
    if not LEASE_SECONDS[0] <= config.lease_seconds <= LEASE_SECONDS[1]:
        raise BatchError("The lease is 1 minute to 24 hours.", "lease_seconds")
    if not REVISION_SECONDS[0] <= config.revision_seconds <= REVISION_SECONDS[1]:
        raise BatchError("Revisions are allowed for 0 to 7 days after submitting.", "revision_seconds")
    check_workforce_settings(config)


def _within(value: object, bounds: tuple[float, float]) -> bool:
    """A number (never a bool) in ``bounds``; NaN is not."""
    return isinstance(value, int | float) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]


def check_workforce_settings(config: BatchSettings) -> None:
    """The screening cutoffs, the gold checks' pause and adaptive overlap: BatchError naming the field."""
    shares = {
        "agreement_cutoff": "The agreement cutoff",
        "flag_cutoff": "The flag cutoff",
        "gold_threshold": "The gold accuracy threshold",
    }
    for name, label in shares.items():
        if not _within(getattr(config, name), SHARE):
            raise BatchError(f"{label} is a share of judgements, 0 to 1.", name)
    if not isinstance(config.gold_min_items, int) or not _within(config.gold_min_items, GOLD_MIN_ITEMS):
        raise BatchError(
            f"Gold items before a pause: {GOLD_MIN_ITEMS[0]} to {GOLD_MIN_ITEMS[1]}.", "gold_min_items"
        )
    if config.max_overlap is not None:
        low, high = MAX_OVERLAP
        if not isinstance(config.max_overlap, int) or not _within(config.max_overlap, MAX_OVERLAP):
            raise BatchError(f"The maximum overlap is {low} to {high} labelers per item.", "max_overlap")
        if config.max_overlap < config.overlap:
            raise BatchError(
                f"The maximum overlap is at least the overlap ({config.overlap}): leave it empty for no "
                "extra judgements.",
                "max_overlap",
            )
    if not _within(config.rank_agreement_threshold, RANK_AGREEMENT):
        raise BatchError(
            "The rank agreement threshold is a Kendall tau, -1 to 1.", "rank_agreement_threshold"
        )


def check_priority(priority: int) -> None:
    if not PRIORITY[0] <= priority <= PRIORITY[1]:
        raise BatchError(
            f"The priority is {PRIORITY[0]} to {PRIORITY[1]} (a batch's share of each labeler's tasks).",
            "priority",
        )


def set_priority(user: AnyUser | None, batch: FeedbackBatch, priority: int) -> None:
    """A new share of the labelers' next tasks for the batch (BatchError out of range; nothing changed)."""
    check_priority(priority)
    FeedbackBatch.objects.filter(pk=batch.pk).update(priority=priority)
    log_action(user, "feedback_batch.priority", batch, priority=priority)


def set_active(user: AnyUser | None, batch: FeedbackBatch, active: bool) -> bool:
    """Start (``active``) or pause the batch; False when it already was so (nothing changed, nothing
    logged). The row lock makes two presses from stale pages, or at the same moment, land on the state
    both asked for, each change recorded once: a flip would have started a batch the second person
    also meant to pause."""
    with transaction.atomic():
        locked = FeedbackBatch.objects.select_for_update().get(pk=batch.pk)
        if locked.is_active == active:
            batch.is_active = active
            return False
        FeedbackBatch.objects.filter(pk=batch.pk).update(is_active=active)
        log_action(user, "feedback_batch.start" if active else "feedback_batch.pause", batch)
    batch.is_active = active
    return True


def check_batch_request(config: BatchSettings, source: str, has_answers_file: bool, gold_pairs: str) -> None:
    """The one check of a request for a batch, made by the console form, the API and the command before
    anything is read, and again by ``create_batch_from_source``: BatchError naming the field at fault."""
    check_batch_settings(config)
    if source not in dict(SOURCES):
        raise BatchError(f"There is no answers source {source!r}.", "source")
    if config.template in STEP_TEMPLATES:
        check_step_source(config, source)
    else:
        for name, label in STEP_INPUTS.items():
            if getattr(config, name):
                raise BatchError(f"{label}: read only by step reviews; leave it out.", name)
    if source == "file" and not has_answers_file:
        raise BatchError("Choose the answers file (the source is an answers file).", "answers_file")
    if source != "file" and has_answers_file:
        raise BatchError(
            "An answers file is read only when the source is an answers file: choose that source, or "
            "leave the file out.",
            "answers_file",
        )
    if gold_pairs.strip() and config.template not in COMPARISON_TEMPLATES:
        raise BatchError("Gold pairs are for comparison batches.", "gold_pairs")
    check_run_inputs(config, source)


def check_run_inputs(config: BatchSettings, source: str) -> None:
    """The runs source's inputs (the pairing rules are in ``training.evaluation.pairing``): BatchError naming
    the field at fault."""
    if source != "runs":
        given = {
            "runs": bool(config.runs),
            "vs_demonstrations": config.vs_demonstrations,
            "include_declined": config.include_declined,
            "pairs_per_question": config.pairs_per_question != 1,
        }
        for name, label in RUN_INPUTS.items():
            if given[name]:
                raise BatchError(
                    f"{label}: read only when the answers come from sampling runs; choose that source, or "
                    "leave it out.",
                    name,
                )
        return
    if not 1 <= len(config.runs) <= MAX_RUNS:
        raise BatchError("Choose one or two sampling runs.", "runs")
    if any(parse_id(pk) is None for pk in config.runs):
        raise BatchError("A sampling run is named by its id, a whole number.", "runs")
    if len(set(config.runs)) != len(config.runs):
        raise BatchError("Choose two different sampling runs (or one).", "runs")
    found = run_source.sampling_runs().objects.only("pk", "status").in_bulk(config.runs)
    for pk in config.runs:
        if pk not in found:
            raise BatchError(f"There is no sampling run {pk}.", "runs")
        if not found[pk].is_finished:
            status = found[pk].get_status_display().lower()
            raise BatchError(f"Sampling run {pk} is {status}: only finished runs can be paired.", "runs")
    low, high = PAIRS_PER_QUESTION
    if isinstance(config.pairs_per_question, bool) or not low <= config.pairs_per_question <= high:
        raise BatchError(f"Pairs per question are {low} to {high}.", "pairs_per_question")
    two_runs = len(config.runs) == 2
    comparison = config.template in COMPARISON_TEMPLATES
    if config.vs_demonstrations and not comparison:
        raise BatchError(
            "Runs are compared with demonstrations in comparison batches only.", "vs_demonstrations"
        )
    if config.vs_demonstrations and two_runs:
        raise BatchError(
            "A comparison with the demonstrations takes one run: choose one run, or compare the two runs "
            "with each other (leave this out).",
            "vs_demonstrations",
        )
    if config.template == Template.RANKING and two_runs:
        raise BatchError("A ranking groups the samples of one run: choose one run.", "runs")
    if config.pairs_per_question != 1 and (two_runs or not comparison):
        raise BatchError(
            "Two runs give one pair per question (their chosen answers), and rankings and ratings one "
            "item per question and answer: leave pairs per question at 1.",
            "pairs_per_question",
        )


def create_feedback_batch(
    user: AnyUser | None,
    config: BatchSettings,
    groups: Sequence[Sequence[Answer]],
    *,
    origin: dict[str, Any] | None = None,
    sides: Sequence[dict[str, str]] | None = None,
    sampling_runs: Sequence[int] = (),
) -> FeedbackBatch:
    """One item per group, in one transaction; BatchError if the settings or the groups do not fit.
    ``origin`` says how the answers were chosen (``FeedbackBatch.origin``), ``sides`` each group's
    ``{answer id: "A" | "B"}`` (``FeedbackItem.sides``; researchers' only) and ``sampling_runs`` the runs the
    answers came from."""
    check_batch_settings(config)
    if not groups:
        raise BatchError("no items: there are no answers to judge in this form")
    if sides is not None:
        _check_sides(groups, sides)
    smallest, largest = GROUP_SIZES[config.template]
    for index, group in enumerate(groups):
        if not smallest <= len(group) <= largest:
            raise BatchError(
                f"item {index} has {len(group)} answers; {config.template} needs {smallest}-{largest}"
            )
        if len({answer.question_id for answer in group}) != 1:
            raise BatchError(f"item {index} mixes answers to different questions")
    with transaction.atomic():
        batch = FeedbackBatch.objects.create(
            **batch_fields(user, config), item_count=len(groups), origin=origin or {}
        )
        batch.sampling_runs.set(sampling_runs)
        items = FeedbackItem.objects.bulk_create(
            FeedbackItem(
                batch=batch,
                question_id=group[0].question_id,
                is_gold=index in config.gold,
                gold_expected=config.gold.get(index, {}),
                sides=sides[index] if sides is not None else {},
            )
            for index, group in enumerate(groups)
        )
        links = [
            FeedbackItem.answers.through(feedbackitem_id=item.pk, answer_id=answer.pk)
            for item, group in zip(items, groups, strict=True)
            for answer in group
        ]
        FeedbackItem.answers.through.objects.bulk_create(links)
        source = (origin or {}).get("source", "")
        log_action(
            user, "feedback_batch.create", batch, items=len(items), template=config.template, source=source
        )
    return batch


def _check_sides(groups: Sequence[Sequence[Answer]], sides: Sequence[dict[str, str]]) -> None:
    if len(sides) != len(groups):
        raise BatchError(f"{len(sides)} sides for {len(groups)} items")
    for index, (group, side) in enumerate(zip(groups, sides, strict=True)):
        if not set(side) <= {str(answer.pk) for answer in group} or not set(side.values()) <= {"A", "B"}:
            raise BatchError(f"item {index}: sides name the item's answers, each A or B")


def parse_gold_pairs(text: str) -> dict[frozenset[int], tuple[int, int | None]]:
    """Gold comparisons, one per line: "12 > 34" (answer 12 is better than 34) or "12 = 34" (a tie)."""
    pairs: dict[frozenset[int], tuple[int, int | None]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.replace(">", " > ").replace("=", " = ").split()
        if len(parts) != 3 or parts[1] not in {">", "="} or None in (parse_id(parts[0]), parse_id(parts[2])):
            raise BatchError(
                f"gold line {number}: write '<answer id> > <answer id>' or '<answer id> = <answer id>'"
            )
        first, second = int(parts[0]), int(parts[2])
        pairs[frozenset((first, second))] = (first, second) if parts[1] == ">" else (first, None)
    return pairs


def gold_for_groups(
    groups: Sequence[Sequence[Answer]], pairs: dict[frozenset[int], tuple[int, int | None]]
) -> dict:
    """``BatchSettings.gold`` for the groups that are gold pairs: the preference for the lower-id answer."""
    gold = {}
    found = set()
    for index, group in enumerate(groups):
        ids = frozenset(answer.pk for answer in group)
        if ids in pairs:
            winner, loser = pairs[ids]
            gold[index] = {"preference": 0.0 if loser is None else (1.0 if winner == min(ids) else -1.0)}
            found.add(ids)
    missing = [sorted(ids) for ids in pairs if ids not in found]
    if missing:
        raise BatchError(f"gold pair {missing[0][0]} / {missing[0][1]} is not an item of this batch")
    return gold


def create_batch_from_source(
    user: AnyUser | None,
    config: BatchSettings,
    source: str,
    answers_file: bytes | BinaryIO | None = None,
    gold_pairs: str = "",
) -> FeedbackBatch:
    """Import (if a file), group (or pair the runs' answers) and create, all in one transaction: a failure
    leaves nothing behind."""
    check_batch_request(config, source, answers_file is not None, gold_pairs)
    if config.template in STEP_TEMPLATES:
        return create_step_batch(user, config, source)
    with transaction.atomic():
        if source == "runs":
            pairing = run_source.pair_runs(config)
            if gold_pairs.strip():
                config.gold = gold_for_groups(pairing.groups, parse_gold_pairs(gold_pairs))
            return create_feedback_batch(
                user,
                config,
                pairing.groups,
                origin=pairing.origin,
                sides=pairing.sides,
                sampling_runs=config.runs,
            )
        if source == "file":
            answers = import_answers(answers_file, user=user)
        elif source == "demonstrations":
            answers = demonstration_answers()
        else:
            answers = list(Answer.objects.all())
        groups = group_answers(answers, config.template)
        if not groups:
            raise BatchError(_why_no_groups(answers, config.template, source))
        if gold_pairs.strip():
            config.gold = gold_for_groups(groups, parse_gold_pairs(gold_pairs))
        return create_feedback_batch(user, config, groups, origin={"source": source})


SOURCE_WORDS = {"demonstrations": "finished demonstrations", "bank": "answer bank", "file": "answers file"}


def _why_no_groups(answers: Sequence[Answer], template: str, source: str) -> str:
    """Why ``answers`` make no item of ``template``: how many there are, on how many questions, and what
    one item needs."""
    smallest = GROUP_SIZES[template][0]
    questions = len({answer.question_id for answer in answers})
    have = f"{count_of(len(answers), 'answer')} on {count_of(questions, 'question')}"
    need = f"{smallest} answers to the same question" if smallest > 1 else "one answer"
    return f"no items: the {SOURCE_WORDS.get(source, source)} give {have}, and an item needs {need}"


def count_of(n: int, noun: str, plural: str = "") -> str:
    """``n`` and the noun, singular for one ("1 answer", "2 answers", "2 batches" with ``plural``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"
