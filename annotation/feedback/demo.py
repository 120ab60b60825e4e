"""Demo feedback batches from real shipped answers: TruthfulQA's best answer against its best incorrect
answer, and its lists of correct and incorrect answers for rankings. Nothing is invented; the question's
``Source`` is the reference when it has one."""

from __future__ import annotations

import hashlib

from django.db import transaction

from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import Answer, FeedbackBatch, ImportedComparison, Question, SourceKind, Template
from browser.engine.text import domain_of

DEMO_QUESTIONS = 12
PREFIX = "TruthfulQA demo"
REFERENCE_SOURCE = "truthfulqa-reference"


def _answer(question: Question, text: str, field: str) -> Answer:
    source_url = question.metadata.get("source", "")
    quotes = [{"title": source_url, "url": source_url, "domain": domain_of(source_url), "extract": ""}]
    answer, _ = Answer.objects.get_or_create(
        question=question,
        text=text,
        source_kind=SourceKind.REFERENCE,
        defaults={
            "quotes": quotes if source_url.startswith("http") else [],
            "source": {"dataset": "truthfulqa", "field": field},
        },
    )
    return answer


def create_demo_feedback_batches() -> list[FeedbackBatch]:
    """One batch per template and rating preset; each is made once (idempotent)."""
    questions = list(
        Question.objects.filter(dataset="truthfulqa", metadata__has_key="best_incorrect_answer").order_by(
            "id"
        )[:DEMO_QUESTIONS]
    )
    pairs = []
    ranked = []
    for question in questions:
        best = _answer(question, question.reference_answers[0], "Best Answer")
        worst = _answer(question, question.metadata["best_incorrect_answer"], "Best Incorrect Answer")
        pairs += [best, worst]
        correct = [_answer(question, text, "Correct Answers") for text in question.reference_answers[1:4]]
        incorrect = [
            _answer(question, text, "Incorrect Answers")
            for text in question.metadata.get("incorrect_answers", [])[:3]
        ]
        ranked += [best, worst, *correct, *incorrect]
    batches = []
    for template, preset, answers in (
        (Template.WEBGPT_COMPARISON, "", pairs),
        (Template.MINIMAL_COMPARISON, "", pairs),
        (Template.RANKING, "", ranked),
        (Template.RATING, "gophercite", pairs),
        (Template.RATING, "truthfulqa", pairs),
        (Template.RATING, "webglm", pairs),
    ):
        name = f"{PREFIX}: {Template(template).label}" + (f" ({preset})" if preset else "")
        if FeedbackBatch.objects.filter(name=name).exists():
            continue
        config = BatchSettings(name=name, template=template, preset=preset, overlap=2)
        batches.append(create_feedback_batch(None, config, group_answers(answers, template)))
    return batches


@transaction.atomic
def create_reference_comparisons() -> int:
    """TruthfulQA's own judgement as imported comparisons: its best answer beats its best incorrect answer
    ("much better"). Real labels from the dataset's authors, kept apart from the platform's and exported
    with source "imported", so a reward model can be trained from the demo setup. Idempotent."""
    created = 0
    questions = Question.objects.filter(dataset="truthfulqa", metadata__has_key="best_incorrect_answer")
    # One query for what is already there: `make run` calls this at every start.
    existing = set(
        ImportedComparison.objects.filter(source=REFERENCE_SOURCE).values_list("row_key", flat=True)
    )
    for question in questions.order_by("id").iterator(chunk_size=500):
        key = hashlib.sha256(f"{REFERENCE_SOURCE}:{question.key}".encode()).hexdigest()
        if key in existing:
            continue
        best = _answer(question, question.reference_answers[0], "Best Answer")
        worst = _answer(question, question.metadata["best_incorrect_answer"], "Best Incorrect Answer")
        first, second = sorted((best, worst), key=lambda answer: answer.pk)
        ImportedComparison.objects.create(
            question=question,
            answer_0=first,
            answer_1=second,
            score_0=1.0 if first == best else -1.0,
            source=REFERENCE_SOURCE,
            row_key=key,
        )
        created += 1
    return created
