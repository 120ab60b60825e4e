"""Researchers' reviews of demonstrations: a 1-7 grade (InstructGPT's demonstration score; required on a
screening test's demonstrations, which the grade qualifies by) and a comment the demonstrator reads on
"My quality". One review per researcher per episode: a new one replaces theirs."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotation.models import DemonstrationReview, Episode, EpisodeKind, EpisodeStatus
from core.models import log_action
from core.permissions import AnyUser, Role, has_role

GRADES = (1, 7)
MAX_COMMENT = 5000


class ReviewError(ValueError):
    """A review that cannot be stored, in words for the page and the API (``field``: which input)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def parse_grade(raw: Any) -> int | None:
    """A grade from a form or a JSON body: blank or None is no grade; else an integer 1..7 (ReviewError)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, bool):
        raise ReviewError("The grade is a whole number from 1 to 7.", "grade")
    if isinstance(raw, str):
        text = raw.strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 2):
            raise ReviewError("The grade is a whole number from 1 to 7.", "grade")
        raw = int(text)
    if not isinstance(raw, int) or not GRADES[0] <= raw <= GRADES[1]:
        raise ReviewError("The grade is a whole number from 1 to 7.", "grade")
    return raw


def check_review(episode: Episode, grade: int | None, comment: str) -> None:
    if episode.kind != EpisodeKind.HUMAN:
        raise ReviewError("Only a person's demonstration is reviewed; this is a model's sample.")
    if episode.status != EpisodeStatus.FINISHED:
        raise ReviewError("Only a finished demonstration can be reviewed.")
    if "\x00" in comment:
        raise ReviewError("The comment contains a NUL character.", "comment")
    if len(comment) > MAX_COMMENT:
        raise ReviewError(f"The comment is at most {MAX_COMMENT} characters.", "comment")
    if grade is None and episode.batch is not None and episode.batch.is_screening:
        raise ReviewError(
            "A screening test's demonstration needs a grade: it qualifies the demonstrator.", "grade"
        )
    if grade is None and not comment.strip():
        raise ReviewError("Give a grade, a comment or both.")


def save_review(episode: Episode, reviewer: AnyUser, grade: int | None, comment: str) -> DemonstrationReview:
    """Store the reviewer's review of ``episode`` (replacing their earlier one); ReviewError when it is
    not valid, with nothing stored."""
    comment = comment.strip()
    check_review(episode, grade, comment)
    with transaction.atomic():
        review, created = DemonstrationReview.objects.update_or_create(
            episode=episode, reviewer=reviewer, defaults={"grade": grade, "comment": comment}
        )
        log_action(reviewer, "demonstration.review", episode, grade=grade, replaced=not created)
    return review


def review_context(episode: Episode, user: AnyUser) -> dict[str, Any]:
    """What an episode's page shows of its reviews: researchers see every review with its reviewer and a
    form prefilled with their own; the demonstrator sees the grades and comments, by "a researcher"."""
    if episode.kind != EpisodeKind.HUMAN:
        return {}
    reviews = list(episode.reviews.select_related("reviewer").order_by("reviewed_at", "id"))
    if has_role(user, Role.RESEARCHER):
        own = next((review for review in reviews if review.reviewer_id == user.pk), None)
        return {
            "reviews": reviews,
            "review_form": episode.status == EpisodeStatus.FINISHED,
            "own_review": own,
            "grade_required": bool(episode.batch_id and episode.batch.is_screening),
            "max_comment": MAX_COMMENT,
        }
    if episode.user_id == user.pk:
        return {"reviews": reviews, "reviews_anonymous": True}
    return {}
