"""Demonstrations: episodes of browsing and answering, recorded action by action."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from annotation.models.questions import Question
from core.permissions import AnyUser, Role, has_role


class DemonstrationBatch(models.Model):
    """Questions a researcher wants demonstrated, each by ``overlap`` different demonstrators."""

    name = models.CharField(max_length=200)
    questions = models.ManyToManyField(Question, related_name="demonstration_batches")
    overlap = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(10)]
    )
    corpus = models.CharField(
        max_length=100,
        blank=True,
        help_text="The corpus its questions are answered with (blank: the site's default corpus)",
    )
    search = models.CharField(
        max_length=20,
        default="local",
        help_text="The search provider (browser.sources.PROVIDERS): local searches the corpus",
    )
    is_active = models.BooleanField(default=True)
    is_screening = models.BooleanField(
        default=False,
        help_text="A screening test: every applicant demonstrates every question, and researchers grade them",
    )
    grade_cutoff = models.FloatField(
        default=6.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(7.0)],
        help_text="Screening: the soft cutoff on the mean 1-7 grade (InstructGPT: 6)",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("created_at", "id")
        verbose_name_plural = "demonstration batches"

    def __str__(self) -> str:
        return self.name


class EpisodeStatus(models.TextChoices):
    BROWSING = "browsing", "Browsing"
    ANSWERING = "answering", "Writing the answer"
    FINISHED = "finished", "Finished"
    SKIPPED = "skipped", "Skipped"


OPEN_STATUSES = (EpisodeStatus.BROWSING, EpisodeStatus.ANSWERING)


class EpisodeKind(models.TextChoices):
    HUMAN = "human", "Human demonstration"
    MODEL = "model", "Model sample"


class EpisodeQuerySet(models.QuerySet):
    def visible_to(self, user: AnyUser) -> EpisodeQuerySet:
        """Demonstrators see their own episodes; researchers see everyone's."""
        if has_role(user, Role.RESEARCHER):
            return self
        if has_role(user, Role.DEMONSTRATOR):
            return self.filter(user=user)
        return self.none()

    def open(self) -> EpisodeQuerySet:
        return self.filter(status__in=OPEN_STATUSES)

    def human(self) -> EpisodeQuerySet:
        return self.filter(kind=EpisodeKind.HUMAN)


class Episode(models.Model):
    """One demonstrator (or one model sample) answering one question. ``state`` is the browser engine's
    state with its pages replaced by snapshot digests; ``version`` increases with every change so stale
    tabs are detected. A model sample (``kind`` model) has no user: ``policy`` names the model, and its
    ``training.Sample`` row the sampling run and the sample index."""

    kind = models.CharField(max_length=10, choices=EpisodeKind.choices, default=EpisodeKind.HUMAN)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="episodes"
    )
    policy = models.CharField(max_length=200, blank=True, help_text="The model that sampled it (kind model)")
    question = models.ForeignKey(Question, on_delete=models.PROTECT, related_name="episodes")
    batch = models.ForeignKey(DemonstrationBatch, null=True, blank=True, on_delete=models.SET_NULL)
    status = models.CharField(max_length=10, choices=EpisodeStatus.choices, default=EpisodeStatus.BROWSING)
    end_reason = models.CharField(max_length=20, blank=True)
    corpus = models.CharField(max_length=100, blank=True, help_text="Searched when the provider is local")
    search = models.CharField(max_length=20, default="local", help_text="The search provider it browsed with")
    settings = models.JSONField(help_text="BrowserSettings used for this episode")
    state = models.JSONField()
    version = models.PositiveIntegerField(default=0)
    last_action_key = models.UUIDField(null=True, blank=True, editable=False)
    answer_draft = models.TextField(blank=True)
    answer = models.TextField(blank=True)
    note = models.TextField(
        blank=True, help_text="Optional note for Nonsense/Controversial, or a skip reason"
    )
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    active_seconds = models.FloatField(default=0.0, help_text="Time with the page visible and in use")

    objects = EpisodeQuerySet.as_manager()

    class Meta:
        ordering = ("-started_at", "-id")
        constraints = [
            # One open episode per person: "Next question" resumes it instead of starting another.
            models.UniqueConstraint(
                fields=("user",), condition=Q(status__in=OPEN_STATUSES), name="one_open_episode_per_user"
            ),
            models.CheckConstraint(
                condition=Q(kind=EpisodeKind.HUMAN, user__isnull=False)
                | Q(kind=EpisodeKind.MODEL, user__isnull=True),
                name="episode_human_has_user_model_has_none",
            ),
        ]

    def __str__(self) -> str:
        return f"episode {self.pk} ({self.user or self.policy}, {self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES


class EpisodeAction(models.Model):
    """One command as it happened: what the person saw before it (the model's observation and the
    page snapshot), what they typed, and what came of it."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="actions")
    index = models.PositiveIntegerField()
    command = models.TextField()
    valid = models.BooleanField()
    message = models.TextField(blank=True)
    observation_before = models.TextField()
    page_before = models.CharField(max_length=64, help_text="PageSnapshot digest shown before the command")
    page_after = models.CharField(max_length=64, help_text="PageSnapshot digest shown after the command")
    candidates = models.JSONField(
        default=list,
        blank=True,
        help_text="A guided sample's step: every command the policy wrote here, [{command, score}], the step "
        "model's best taken (empty for any other action)",
    )
    idempotency_key = models.UUIDField(default=uuid.uuid4)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("episode", "index")
        constraints = [
            models.UniqueConstraint(fields=("episode", "index"), name="episode_action_order"),
            models.UniqueConstraint(fields=("episode", "idempotency_key"), name="episode_action_idempotency"),
        ]

    def __str__(self) -> str:
        return f"{self.episode_id}#{self.index}: {self.command[:60]}"
