"""Demo feedback batches from the hand-written FreshWiki demo answers (``demo_answers``: four answers of
different quality to each FreshWiki demo question, every quote checked verbatim against the corpus), and
TruthfulQA's own judgements (its best answer against its best incorrect answer) as imported comparisons
for reward-model training. Nothing in the TruthfulQA part is invented; the question's ``Source`` is the
reference when it has one."""

from __future__ import annotations

import hashlib
from itertools import pairwise

from django.db import transaction

from annotation.demo import DEMO_BATCH_DATASET
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.feedback.demo_answers import QUALITIES, load_demo_answers
from annotation.feedback.demo_steps import create_demo_step_batch
from annotation.models import Answer, FeedbackBatch, ImportedComparison, Question, SourceKind, Template
from browser.engine.text import domain_of

PREFIX = "FreshWiki demo"
# Before issue 14 the demo batches were built from TruthfulQA answers whose only "quote" was the source
# URL with an empty extract; a demo database from then still has them. They are switched off (kept, with
# their judgements) when the FreshWiki batches are made, so labelers get tasks with evidence.
OLD_PREFIX = "TruthfulQA demo"
REFERENCE_SOURCE = "truthfulqa-reference"


def _reference_answer(question: Question, text: str, field: str) -> Answer:
    """A reference answer not saved yet (``create_reference_comparisons`` saves them in bulk)."""
    source_url = question.metadata.get("source", "")
    quotes = [{"title": source_url, "url": source_url, "domain": domain_of(source_url), "extract": ""}]
    return Answer(
        question=question,
        text=text,
        source_kind=SourceKind.REFERENCE,
        quotes=quotes if source_url.startswith("http") else [],
        source={"dataset": "truthfulqa", "field": field},
    )


def neighbour_pairs(answers: list[Answer]) -> list[list[Answer]]:
    """Each question's answers compared with the next one down in quality (complete against partial,
    partial against unsupported, unsupported against wrong): every pair has a clear better answer, and
    the comparisons together order all four."""
    rank = {quality: index for index, quality in enumerate(QUALITIES)}
    by_question: dict[int, list[Answer]] = {}
    for answer in answers:
        by_question.setdefault(answer.question_id, []).append(answer)
    pairs = []
    for question_id in sorted(by_question):
        ordered = sorted(by_question[question_id], key=lambda answer: rank[answer.source["quality"]])
        pairs += [list(pair) for pair in pairwise(ordered)]
    return pairs


# The first FreshWiki demo questions (by id) stay out of the demo's feedback batches: the sampling
# quick-start samples them (training.sampling.views.QUICK_START), so the one demo labeler meets them first
# in the batch made from those samples. Had the labeler judged them in a demo batch under another
# template, FEEDBACK_SAME_QUESTION_HOURS would hold them back for a day, and the loop journey could not be
# finished with the demo accounts.
LOOP_QUESTIONS = 4


def loop_question_ids() -> set[int]:
    """The FreshWiki demo questions kept for the loop's first sampling run."""
    questions = Question.objects.filter(dataset=DEMO_BATCH_DATASET).order_by("id")
    return set(questions.values_list("id", flat=True)[:LOOP_QUESTIONS])


def demo_batch_name(template: str, preset: str = "") -> str:
    """The name of the demo's production batch of ``template`` (and rating ``preset``)."""
    return f"{PREFIX}: {Template(template).label}" + (f" ({preset})" if preset else "")


def create_demo_feedback_batches() -> list[FeedbackBatch]:
    """One batch per template and rating preset from the FreshWiki demo answers (all but the loop's
    questions); each is made once (idempotent: ``make run`` calls this at every start). DemoAnswersError
    if a shipped quote is not on its page."""
    kept_for_the_loop = loop_question_ids()
    answers = [answer for answer in load_demo_answers() if answer.question_id not in kept_for_the_loop]
    batches = []
    for template, preset, groups in (
        (Template.WEBGPT_COMPARISON, "", neighbour_pairs(answers)),
        (Template.MINIMAL_COMPARISON, "", neighbour_pairs(answers)),
        (Template.RANKING, "", group_answers(answers, Template.RANKING)),
        (Template.RATING, "gophercite", group_answers(answers, Template.RATING)),
        (Template.RATING, "truthfulqa", group_answers(answers, Template.RATING)),
        (Template.RATING, "webglm", group_answers(answers, Template.RATING)),
    ):
        name = demo_batch_name(template, preset)
        if FeedbackBatch.objects.filter(name=name).exists():
            continue
        config = BatchSettings(name=name, template=template, preset=preset, overlap=2)
        batches.append(create_feedback_batch(None, config, groups))
    # Episodes to review step by step, and their clicks to compare (scripted: no model, no person).
    batches += create_demo_step_batch()
    if batches:
        FeedbackBatch.objects.filter(name__startswith=f"{OLD_PREFIX}: ", created_by=None).update(
            is_active=False
        )
    return batches


@transaction.atomic
def create_reference_comparisons() -> int:
    """TruthfulQA's own judgement as imported comparisons: its best answer beats its best incorrect answer
    ("much better"). Real labels from the dataset's authors, kept apart from the platform's and exported
    with source "imported", so a reward model can be trained from the demo setup. Idempotent.

    Written in bulk (a few queries for the ~800 questions, not three each): ``make run`` and the tests that
    load the whole demo wait on it. The rows, and the order of their ids, are those of making them one at
    a time: each question's best answer, then its best incorrect answer, then their comparison; an answer
    already there (same question, text and kind) is reused, as ``get_or_create`` would."""
    questions = Question.objects.filter(dataset="truthfulqa", metadata__has_key="best_incorrect_answer")
    # One query for what is already there: `make run` calls this at every start.
    existing = set(
        ImportedComparison.objects.filter(source=REFERENCE_SOURCE).values_list("row_key", flat=True)
    )
    todo = []
    for question in questions.order_by("id"):
        key = hashlib.sha256(f"{REFERENCE_SOURCE}:{question.key}".encode()).hexdigest()
        if key not in existing:
            todo.append((question, key))
    if not todo:
        return 0
    answers: dict[tuple[int, str], Answer] = {}
    seen = Answer.objects.filter(
        question__in=[question for question, _ in todo], source_kind=SourceKind.REFERENCE
    )
    for answer in seen.order_by("id"):
        if (answer.question_id, answer.text) in answers:  # get_or_create's get() would refuse too
            raise Answer.MultipleObjectsReturned(
                f"two reference answers {answer.text!r} to {answer.question}"
            )
        answers[answer.question_id, answer.text] = answer
    new_answers = []

    def answer(question: Question, text: str, field: str) -> Answer:
        if (question.pk, text) not in answers:
            answers[question.pk, text] = _reference_answer(question, text, field)
            new_answers.append(answers[question.pk, text])
        return answers[question.pk, text]

    pairs = []
    for question, key in todo:
        best = answer(question, question.reference_answers[0], "Best Answer")
        worst = answer(question, question.metadata["best_incorrect_answer"], "Best Incorrect Answer")
        pairs.append((question, key, best, worst))
    # PostgreSQL hands out the ids in the order of the rows, and returns them: new answers' ids keep the
    # one-at-a-time order, so "first" below is the same answer as before.
    Answer.objects.bulk_create(new_answers, batch_size=500)
    comparisons = []
    for question, key, best, worst in pairs:
        first, second = sorted((best, worst), key=lambda answer: answer.pk)
        comparisons.append(
            ImportedComparison(
                question=question,
                answer_0=first,
                answer_1=second,
                score_0=1.0 if first == best else -1.0,
                source=REFERENCE_SOURCE,
                row_key=key,
            )
        )
    ImportedComparison.objects.bulk_create(comparisons, batch_size=500)
    return len(comparisons)
