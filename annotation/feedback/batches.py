"""Feedback batches: which answers are judged together, under which template and policy."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db import transaction

from annotation.feedback.answers_import import answer_from_episode
from annotation.feedback.scales import default_always_required
from annotation.models import Answer, Episode, EpisodeStatus, FeedbackBatch, FeedbackItem, Template
from webgpt_site.inputs import parse_id
from webgpt_site.models import log_action
from webgpt_site.permissions import AnyUser

GROUP_SIZES = {
    Template.WEBGPT_COMPARISON: (2, 2),
    Template.MINIMAL_COMPARISON: (2, 2),
    Template.RANKING: (4, 9),
    Template.RATING: (1, 1),
}


class BatchError(ValueError):
    """The batch cannot be made as asked; nothing was created."""


@dataclass
class BatchSettings:
    name: str
    template: str
    preset: str = ""
    instructions: str = ""
    overlap: int = 1
    required_probability: float = 0.1
    always_required: list[str] | None = None  # None: the template's default
    lease_seconds: int = 1800
    revision_seconds: int = 3600
    gold: dict[int, dict] = field(default_factory=dict)  # group index -> expected response fields


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
        episodes = Episode.objects.filter(status=EpisodeStatus.FINISHED).exclude(answer="")
    return [answer_from_episode(episode) for episode in episodes]


def create_feedback_batch(
    user: AnyUser | None, config: BatchSettings, groups: Sequence[Sequence[Answer]]
) -> FeedbackBatch:
    """One item per group, in one transaction; BatchError if the groups do not fit the template."""
    if config.template not in GROUP_SIZES:
        raise BatchError(f"unknown template {config.template!r}")
    if (config.template == Template.RATING) != bool(config.preset):
        raise BatchError(
            "a rating batch needs a preset (gophercite, truthfulqa, webglm), other templates none"
        )
    if not groups:
        raise BatchError("no items: there are no answers to judge in this form")
    smallest, largest = GROUP_SIZES[config.template]
    for index, group in enumerate(groups):
        if not smallest <= len(group) <= largest:
            raise BatchError(
                f"item {index} has {len(group)} answers; {config.template} needs {smallest}-{largest}"
            )
        if len({answer.question_id for answer in group}) != 1:
            raise BatchError(f"item {index} mixes answers to different questions")
    if not 1 <= config.overlap <= 10 or not 0 <= config.required_probability <= 1:
        raise BatchError("overlap must be 1-10 and the required probability 0-1")
    always = config.always_required
    if always is None:
        always = default_always_required(config.template, config.preset or None)
    with transaction.atomic():
        batch = FeedbackBatch.objects.create(
            name=config.name,
            template=config.template,
            preset=config.preset,
            instructions=config.instructions,
            overlap=config.overlap,
            required_probability=config.required_probability,
            always_required=always,
            lease_seconds=config.lease_seconds,
            revision_seconds=config.revision_seconds,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        items = FeedbackItem.objects.bulk_create(
            FeedbackItem(
                batch=batch,
                question_id=group[0].question_id,
                is_gold=index in config.gold,
                gold_expected=config.gold.get(index, {}),
            )
            for index, group in enumerate(groups)
        )
        links = [
            FeedbackItem.answers.through(feedbackitem_id=item.pk, answer_id=answer.pk)
            for item, group in zip(items, groups, strict=True)
            for answer in group
        ]
        FeedbackItem.answers.through.objects.bulk_create(links)
        log_action(user, "feedback_batch.create", batch, items=len(items), template=config.template)
    return batch


SOURCES = (
    ("demonstrations", "Finished demonstrations (pairs on the same question)"),
    ("bank", "Every answer in the bank (demonstrations, models, references; mixed per question)"),
    ("file", "An answers JSONL file"),
)


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
    answers_file: bytes | None = None,
    gold_pairs: str = "",
) -> FeedbackBatch:
    """Import (if a file), group and create, all in one transaction: a failure leaves nothing behind."""
    from annotation.feedback.answers_import import import_answers

    with transaction.atomic():
        if source == "file":
            if not answers_file:
                raise BatchError("choose an answers file")
            answers = import_answers(answers_file, user=user)
        elif source == "demonstrations":
            answers = demonstration_answers()
        elif source == "bank":
            answers = list(Answer.objects.all())
        else:
            raise BatchError(f"unknown source {source!r}")
        groups = group_answers(answers, config.template)
        if gold_pairs.strip():
            if config.template not in (Template.WEBGPT_COMPARISON, Template.MINIMAL_COMPARISON):
                raise BatchError("gold pairs are for comparison batches")
            config.gold = gold_for_groups(groups, parse_gold_pairs(gold_pairs))
        return create_feedback_batch(user, config, groups)
