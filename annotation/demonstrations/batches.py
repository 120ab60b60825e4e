"""Demonstration batches: the questions a researcher wants demonstrated next, with overlap."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from annotation.models import DemonstrationBatch, Question
from webgpt_site.models import log_action
from webgpt_site.permissions import AnyUser


def create_demonstration_batch(
    user: AnyUser | None, name: str, questions: QuerySet[Question], overlap: int = 1
) -> DemonstrationBatch:
    if not 1 <= overlap <= 10:
        raise ValueError("overlap must be between 1 and 10")
    with transaction.atomic():
        batch = DemonstrationBatch.objects.create(
            name=name, overlap=overlap, created_by=user if getattr(user, "is_authenticated", False) else None
        )
        batch.questions.set(questions)
        log_action(
            user, "demonstration_batch.create", batch, questions=batch.questions.count(), overlap=overlap
        )
    return batch
