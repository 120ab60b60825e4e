"""What follows a stored judgement, in the submit's transaction: a reference is stored on its item, a gold
judgement checks the labeler's rolling accuracy, and a disagreement may ask for one more judgement."""

from __future__ import annotations

from annotation.models import Assignment, AssignmentStatus
from annotation.workforce.gold import check_after_gold
from annotation.workforce.overlap import ask_more_on_disagreement
from annotation.workforce.references import record_reference


def after_submit(task: Assignment) -> None:
    if task.status == AssignmentStatus.REFERENCE:
        record_reference(task)
        return
    if task.status != AssignmentStatus.SUBMITTED or task.item.batch.is_screening:
        return
    if task.item.is_gold:
        check_after_gold(task)
    ask_more_on_disagreement(task)
