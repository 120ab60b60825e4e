"""Exports: a job row per dataset file (status, progress, rows, sha256). Finished exports never change."""

from __future__ import annotations

from django.db import models

from annotation.exports.files import discard_partial_files
from core.jobs.models import JobRow, JobStatus


class ExportFormat(models.TextChoices):
    WEBGPT_COMPARISONS = "webgpt-comparisons", "WebGPT comparisons, one row per comparison"
    WEBGPT_PAIRS = "webgpt-comparisons-pairs", "WebGPT comparisons, raw pair per line"
    COMPARISONS_FULL = "comparisons-full", "Full judgements: every rating, claim, flag, timing"
    DEMONSTRATIONS = "demonstrations", "Demonstrations as trajectories"
    BC_PAIRS = "bc-pairs", "Behaviour-cloning pairs: prompt, completion"
    RM_PAIRS = "rm-pairs", "Reward-model pairs: chosen, rejected, label, margin"
    RM_GROUPS = "rm-groups", "Reward-model K-way groups from rankings"
    STEP_LABELS = "step-labels", "Step labels: each reviewed step of an episode, its rating and reason"


ExportStatus = JobStatus  # exports cannot be cancelled: they end done or failed


class Export(JobRow):
    """A dataset file written by a job on the ``exports`` queue."""

    export_format = models.CharField(max_length=30, choices=ExportFormat.choices)
    file_type = models.CharField(
        max_length=10, choices=[("jsonl", "JSONL"), ("parquet", "Parquet")], default="jsonl"
    )
    filters = models.JSONField(default=dict, blank=True)
    progress = models.PositiveIntegerField(default=0, help_text="Rows written so far")
    row_count = models.PositiveIntegerField(null=True, blank=True)
    file_name = models.CharField(max_length=255, blank=True, help_text="Under MEDIA_ROOT/exports/")
    sha256 = models.CharField(max_length=64, blank=True)

    job_name, task_name, queue, task_key = "export", "annotation.run_export", "exports", "export_id"

    def __str__(self) -> str:
        return f"export {self.pk} ({self.export_format}, {self.status})"

    @classmethod
    def discard_partial(cls, pk: int) -> None:
        discard_partial_files(pk)


class ImportedComparison(models.Model):
    """A comparison judged elsewhere (e.g. the public WebGPT comparisons), kept apart from our labels."""

    question = models.ForeignKey(
        "annotation.Question", on_delete=models.PROTECT, related_name="imported_comparisons"
    )
    answer_0 = models.ForeignKey("annotation.Answer", on_delete=models.PROTECT, related_name="+")
    answer_1 = models.ForeignKey("annotation.Answer", on_delete=models.PROTECT, related_name="+")
    score_0 = models.FloatField(help_text="score_1 is its negative")
    source = models.CharField(max_length=200, help_text="Where it came from (file or dataset name)")
    row_key = models.CharField(
        max_length=64, unique=True, help_text="Hash of the row: re-imports add nothing"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"imported comparison {self.pk} ({self.source})"
