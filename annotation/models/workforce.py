"""The workforce: who may do which kind of work (qualifications and their audit trail), researchers' grades of
demonstrations, corrections to time sheets and invitations to the team.

A *kind of work* is what one screening test qualifies for: a feedback template (a rating batch's preset
counts, since its criteria differ) or demonstrations. ``work_kind`` names it; ``KIND_LABELS`` says it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Case, CharField, F, Value, When
from django.db.models.functions import Concat

from annotation.models.demonstrations import Episode
from core.permissions import ResearchTeamQuerySet

DEMONSTRATION = "demonstration"
RATING_PREFIX = "rating:"


def work_kind(template: str, preset: str = "") -> str:
    """The kind of work of a feedback batch: its template, or "rating:<preset>" for a rating batch."""
    return f"{RATING_PREFIX}{preset}" if template == "rating" else template


def work_kind_expression(batch: str = "") -> Case:
    """``work_kind(template, preset)`` in SQL, of a feedback batch or, across a relation, of the batch at
    ``batch`` (the lookup path with its "__", e.g. "item__batch__" from an assignment)."""
    return Case(
        When(**{f"{batch}template": "rating"}, then=Concat(Value(RATING_PREFIX), F(f"{batch}preset"))),
        default=F(f"{batch}template"),
        output_field=CharField(),
    )


class QualificationState(models.TextChoices):
    APPLICANT = "applicant", "Applicant"
    QUALIFIED = "qualified", "Qualified"
    PAUSED = "paused", "Paused"
    REVOKED = "revoked", "Revoked"


def may_take(state: str, is_screening: bool) -> bool:
    """An applicant takes screening tests only; a qualified person the real work only; paused or revoked,
    nothing of that kind. The one rule for handing out work and for taking, drafting, submitting or
    revising what was handed out (``workforce.gate``, ``workforce.held_work``)."""
    return state == (QualificationState.APPLICANT if is_screening else QualificationState.QUALIFIED)


class Qualification(models.Model):
    """One person's state for one kind of work. No row means applicant: a person with the role who has not
    passed that kind's screening test. Every change is a ``QualificationEvent`` (``workforce.states``
    writes both)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="qualifications"
    )
    kind = models.CharField(max_length=40)
    state = models.CharField(
        max_length=10, choices=QualificationState.choices, default=QualificationState.APPLICANT
    )
    reason = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    work_excluded_before = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Work of this kind submitted before this time is left out of exports (set on a revocation)",
    )

    class Meta:
        ordering = ("user", "kind")
        constraints = [models.UniqueConstraint(fields=("user", "kind"), name="one_qualification_per_kind")]

    def __str__(self) -> str:
        return f"{self.user} {self.kind}: {self.state}"


class QualificationEvent(models.Model):
    """The audit trail: every change of state, who made it (None: the platform, e.g. an automatic pause)
    and why, with the figures the decision rested on."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=40)
    from_state = models.CharField(max_length=10, choices=QualificationState.choices)
    to_state = models.CharField(max_length=10, choices=QualificationState.choices)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField()
    figures = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-at", "-id")

    def __str__(self) -> str:
        return f"{self.user} {self.kind}: {self.from_state} -> {self.to_state}"


class DemonstrationReview(models.Model):
    """A researcher's grade (1-7, InstructGPT's demonstration score) and comment on one demonstration; the
    demonstrator sees both on "My quality". A new review by the same researcher replaces theirs."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    grade = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(7)]
    )
    comment = models.TextField(blank=True)
    reviewed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("episode", "reviewed_at", "id")
        constraints = [
            models.UniqueConstraint(fields=("episode", "reviewer"), name="one_review_per_reviewer"),
            models.CheckConstraint(
                condition=models.Q(grade__isnull=True) | models.Q(grade__gte=1, grade__lte=7),
                name="review_grade_1_to_7",
            ),
        ]

    def __str__(self) -> str:
        return f"review of episode {self.episode_id}: {self.grade}"


class TimeCorrection(models.Model):
    """A researcher's correction to one person's active time on one day (seconds, signed), with the
    reason; time sheets add it to the active time the pages recorded, which is never rewritten."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="time_corrections"
    )
    day = models.DateField()
    seconds = models.FloatField()
    reason = models.TextField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("day", "id")

    def __str__(self) -> str:
        return f"{self.user} {self.day}: {self.seconds:+.0f} s"


class Invitation(models.Model):
    """A link that lets one person create an account with the given roles, until it expires or is used.
    Only the token's SHA-256 is stored: the link is shown once, when it is made."""

    token_hash = models.CharField(max_length=64, unique=True)
    roles = models.JSONField(default=list)
    note = models.CharField(max_length=200, blank=True, help_text="Who it is for")
    expires_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    accepted_at = models.DateTimeField(null=True, blank=True)

    objects = ResearchTeamQuerySet.as_manager()  # the research team's: to anyone else none exists (404)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"invitation {self.pk} ({', '.join(self.roles)})"
