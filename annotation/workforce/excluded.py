"""Work a revocation took out of the data: a person's judgements of a kind of work first submitted before
their ``Qualification.work_excluded_before`` for that kind. The first submission, never the latest: a
revision cannot bring an excluded judgement back (and a revoked person cannot revise at all,
``gate.refusal``), so whether a judgement is excluded is fixed once it is. One rule for exports,
Krippendorff's alpha and the careless-work signals, so the figures describe the same judgements a dataset
holds; ``kept_judgements`` is that set for the figures: submitted, less flag-review exclusions and revoked
work."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet

from annotation.models import Assignment, AssignmentStatus, FlagDecision, Qualification
from annotation.models.workforce import work_kind_expression


def without_excluded_work(tasks: QuerySet[Assignment]) -> QuerySet[Assignment]:
    """``tasks`` less each judgement first made before its labeler's ``work_excluded_before`` for its kind of
    work (``work_kind``: the template, "rating:<preset>" for a rating batch), in the query: a count and the
    rows agree."""
    excluded = Qualification.objects.filter(
        user=OuterRef("labeler_id"),
        kind=OuterRef("work_kind"),
        work_excluded_before__gt=OuterRef("first_submitted_at"),
    )
    return tasks.annotate(work_kind=work_kind_expression("item__batch__")).filter(~Exists(excluded))


def kept_judgements(tasks: QuerySet[Assignment]) -> QuerySet[Assignment]:
    """The judgements among ``tasks`` that the batch results, alpha and the judges' figures count (the
    judgements an export holds): submitted, less those excluded on flag review and revoked work."""
    submitted = tasks.filter(status=AssignmentStatus.SUBMITTED).exclude(flag_decision=FlagDecision.EXCLUDE)
    return without_excluded_work(submitted)
