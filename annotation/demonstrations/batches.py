"""Demonstration batches: the questions a researcher wants demonstrated next, with overlap, and the source
they are answered with (a corpus of the local index, or a live search provider)."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from annotation.models import DemonstrationBatch, Question
from browser.sources import LOCAL, source_error
from core.models import log_action
from core.permissions import AnyUser

GRADE_CUTOFF = (1.0, 7.0)  # InstructGPT's 1-7 demonstration grade


def batch_source(batch: DemonstrationBatch | None) -> tuple[str, str]:
    """(provider, corpus) that an episode of ``batch`` searches; the bc-split fallback has no batch and
    searches the default corpus. A live provider searches no corpus."""
    if batch is not None and batch.search != LOCAL:
        return batch.search, ""
    return LOCAL, (batch.corpus if batch is not None else "") or settings.DEFAULT_CORPUS


def create_demonstration_batch(
    user: AnyUser | None,
    name: str,
    questions: QuerySet[Question],
    overlap: int = 1,
    *,
    corpus: str = "",
    search: str = LOCAL,
    is_screening: bool = False,
    grade_cutoff: float | None = None,
) -> DemonstrationBatch:
    """The batch, active; ValueError saying why not (the overlap, the provider, the corpus, the grade
    cutoff). A screening test (``is_screening``) is demonstrated by every applicant, whatever the overlap,
    and researchers grade its demonstrations 1-7 against ``grade_cutoff`` (None: the model's default)."""
    if not 1 <= overlap <= 10:
        raise ValueError("overlap must be between 1 and 10")
    if grade_cutoff is None:
        grade_cutoff = DemonstrationBatch._meta.get_field("grade_cutoff").default
    if not GRADE_CUTOFF[0] <= grade_cutoff <= GRADE_CUTOFF[1]:  # also NaN
        raise ValueError(f"the grade cutoff is a 1-7 grade, {GRADE_CUTOFF[0]:g} to {GRADE_CUTOFF[1]:g}")
    if problem := source_error(search, corpus):
        raise ValueError(problem)
    with transaction.atomic():
        batch = DemonstrationBatch.objects.create(
            name=name,
            overlap=overlap,
            corpus=corpus,
            search=search,
            is_screening=is_screening,
            grade_cutoff=grade_cutoff,
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
            search=search,
            is_screening=is_screening,
            grade_cutoff=grade_cutoff,
        )
    return batch
