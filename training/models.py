"""Training runs (a job row per run: config, export used, progress, metrics timeline, logs) and the model
registry (a row per trained model folder in the model store)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webgpt_site.permissions import ResearchTeamQuerySet


class RunKind(models.TextChoices):
    BC = "bc", "Behaviour cloning"
    RM = "rm", "Reward model"
    RM_EVAL = "rm_eval", "Reward-model evaluation"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


CHECKPOINT_KINDS = RunKind.choices[:2]  # evaluations produce no model
FINISHED = (RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED)


class TrainingRun(models.Model):
    kind = models.CharField(max_length=10, choices=RunKind.choices)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    export = models.ForeignKey(
        "annotation.Export", on_delete=models.PROTECT, related_name="training_runs", help_text="Data used"
    )
    base_checkpoint = models.ForeignKey(
        "ModelCheckpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="derived_runs",
        help_text="Registered model to start from (or to evaluate)",
    )
    preset = models.CharField(max_length=20, blank=True)
    config = models.JSONField(default=dict, help_text="The trainer's settings (training.config)")
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    timeline = models.JSONField(default=list, blank=True, help_text="Logged metrics by step")
    metrics = models.JSONField(default=dict, blank=True, help_text="Final metrics")
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} run {self.pk} ({self.status})"

    @property
    def percent(self) -> int:
        if self.status == RunStatus.DONE:
            return 100
        return int(100 * self.step / self.total_steps) if self.total_steps else 0

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED


class ModelCheckpoint(models.Model):
    kind = models.CharField(max_length=10, choices=CHECKPOINT_KINDS)
    name = models.CharField(max_length=200)
    base_model = models.CharField(max_length=300, help_text="Preset name or folder it was trained from")
    path = models.CharField(max_length=500, help_text="Folder in the model store")
    metrics = models.JSONField(default=dict, blank=True)
    run = models.OneToOneField(
        TrainingRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="checkpoint"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"
