"""The question bank: questions and the reports of their imports."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.permissions import ResearchTeamQuerySet


class Split(models.TextChoices):
    BC = "bc", "Behaviour cloning"
    RM = "rm", "Reward modelling"
    RL = "rl", "Reinforcement learning"
    EVAL = "eval", "Evaluation"


class Question(models.Model):
    """One question of the bank. ``key`` (hash of the normalised text) makes duplicates impossible."""

    text = models.TextField()
    key = models.CharField(max_length=64, unique=True, editable=False)
    dataset = models.CharField(max_length=100, db_index=True)
    external_id = models.CharField(max_length=200, blank=True)
    split = models.CharField(max_length=4, choices=Split.choices, db_index=True)
    reference_answers = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    source_import = models.ForeignKey(
        "QuestionImport", null=True, blank=True, on_delete=models.SET_NULL, related_name="questions"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("id",)
        constraints = [
            models.UniqueConstraint(
                fields=("dataset", "external_id"),
                condition=~Q(external_id=""),
                name="question_unique_external_id",
            )
        ]

    def __str__(self) -> str:
        return self.text[:80]


class QuestionImport(models.Model):
    """The report of one successful file import (failed imports change nothing and leave no row)."""

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    filename = models.CharField(max_length=255)
    file_format = models.CharField(max_length=20)
    dataset = models.CharField(max_length=100, blank=True)
    sha256 = models.CharField(max_length=64)
    created_count = models.PositiveIntegerField()
    duplicate_count = models.PositiveIntegerField()
    duplicates = models.JSONField(
        default=list, blank=True, help_text="The first duplicates: line and reason."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.filename} ({self.created_count} new)"
