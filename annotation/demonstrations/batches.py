"""Demonstration batches: the questions a researcher wants demonstrated next, with overlap, and the corpus
they are answered with."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from annotation.models import DemonstrationBatch, Question
from browser.models import Corpus
from webgpt_site.models import log_action
from webgpt_site.permissions import AnyUser


def corpus_error(name: str) -> str:
    """Why ``name`` cannot be a batch's corpus, or "" when it can (blank: the site's default corpus).

    The one check of the console form, the command and create_demonstration_batch: a batch naming a corpus
    that does not exist would start episodes whose first search fails."""
    if name and not Corpus.objects.filter(name=name).exists():
        known = ", ".join(Corpus.objects.values_list("name", flat=True)) or "none yet"
        return f"There is no corpus {name!r} (corpora: {known})."
    return ""


def batch_corpus(batch: DemonstrationBatch | None) -> str:
    """The corpus an episode of ``batch`` searches (the bc-split fallback has no batch: the default)."""
    return (batch.corpus if batch is not None else "") or settings.DEFAULT_CORPUS


def create_demonstration_batch(
    user: AnyUser | None,
    name: str,
    questions: QuerySet[Question],
    overlap: int = 1,
    *,
    corpus: str = "",
) -> DemonstrationBatch:
    if not 1 <= overlap <= 10:
        raise ValueError("overlap must be between 1 and 10")
    if problem := corpus_error(corpus):
        raise ValueError(problem)
    with transaction.atomic():
        batch = DemonstrationBatch.objects.create(
            name=name,
            overlap=overlap,
            corpus=corpus,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        batch.questions.set(questions)
        log_action(
            user,
            "demonstration_batch.create",
            batch,
            questions=batch.questions.count(),
            overlap=overlap,
            corpus=corpus,
        )
    return batch
