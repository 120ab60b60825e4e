"""Training runs (a job row per run: config, export used, progress, metrics timeline, logs) and the model
registry (a row per trained model folder in the model store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from django.conf import settings
from django.db import models
from django.utils import timezone

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


class JobRow(models.Model):
    """What every job's row has (a training run, a sampling run, a proxy evaluation): who asked, the
    status a worker moves it through, the cancel flag it reads, its log, the error it failed with, when
    it was asked for, started and ended. ``progress_fields`` names the row's (done, total) counters."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Stamped by the running worker (webgpt_site.heartbeat)"
    )
    estimated_end_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="While it runs: when its worker expects it to end (webgpt_site.progress)",
    )

    objects = ResearchTeamQuerySet.as_manager()

    progress_fields: tuple[str, str]

    class Meta:
        abstract = True
        ordering = ("-created_at", "-id")

    @property
    def percent(self) -> int:
        if self.status == RunStatus.DONE:
            return 100
        done, total = (getattr(self, name) for name in self.progress_fields)
        return int(100 * done / total) if total else 0

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    # The bookkeeping every job does on its row: by ``update`` on the row's pk, never ``save``, so that a
    # worker's write does not undo the cancel flag a page set meanwhile (or the other way round).

    @classmethod
    def claim(cls, pk: int) -> bool:
        """Queued to running, for one worker only: a redelivered job finds its row no longer queued."""
        queued = cls.objects.filter(pk=pk, status=RunStatus.QUEUED)
        now = timezone.now()
        return bool(queued.update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now))

    def request_cancel(self) -> None:
        """A queued job is cancelled at once; a running one when its worker next reads the flag."""
        rows = type(self).objects.filter(pk=self.pk)
        rows.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING)).update(cancel_requested=True)
        rows.filter(status=RunStatus.QUEUED).update(status=RunStatus.CANCELLED, finished_at=timezone.now())

    def cancel_was_requested(self) -> bool:
        return type(self).objects.filter(pk=self.pk, cancel_requested=True).exists()

    def append_log(self, line: str) -> None:
        self.log += f"{timezone.now():%H:%M:%S} {line}\n"
        type(self).objects.filter(pk=self.pk).update(log=self.log)

    def finish(self, status: str, **fields: Any) -> Self:
        """Ended (done, cancelled or failed) with ``fields`` written alongside; the row as now stored."""
        ended = {"status": status, "finished_at": timezone.now(), "estimated_end_at": None}
        type(self).objects.filter(pk=self.pk).update(**(fields | ended))
        self.refresh_from_db()
        return self

    def fail(self, exc: BaseException, **fields: Any) -> Self:
        """Failed with the exception as its reason (the worker's log has the traceback)."""
        return self.finish(RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:4000], **fields)


class TrainingRun(JobRow):
    kind = models.CharField(max_length=10, choices=RunKind.choices)
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
    config = models.JSONField(default=dict, help_text="The trainer's settings (training.runs.config)")
    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    timeline = models.JSONField(default=list, blank=True, help_text="Logged metrics by step")
    metrics = models.JSONField(default=dict, blank=True, help_text="Final metrics")

    progress_fields = ("step", "total_steps")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} run {self.pk} ({self.status})"


class ModelCheckpoint(models.Model):
    kind = models.CharField(max_length=10, choices=CHECKPOINT_KINDS)
    name = models.CharField(max_length=200)
    base_model = models.CharField(max_length=300, help_text="Preset name or folder it was trained from")
    path = models.CharField(
        max_length=500, help_text="Where its files are: a folder in the model store, or s3://bucket/key"
    )
    storage_name = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="Its folder in the models storage (run-N; training/checkpoints.py); empty: read from path",
    )
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

    @property
    def store_path(self) -> str:
        """The folder as pages show it: relative to the model store (``MODEL_STORE_DIR``) when inside it,
        so that a machine's absolute paths stay off the screen; any other folder as it was given."""
        return relative_to_store(self.path) or self.path


class SamplingRun(JobRow):
    """Best-of-n sampling of a question set by a policy, scored by a reward model (a job on the ``sampling``
    queue). The questions are resolved when the run is requested and kept in ``question_ids``, so the run
    can be reproduced from its row; each sample is an episode (kind model) with a ``Sample`` row."""

    policy = models.ForeignKey(
        ModelCheckpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="sampling_runs",
        help_text="A BC model from the registry; empty: the prompted SmolLM2-135M-Instruct default",
    )
    policy_name = models.CharField(max_length=200, help_text="The policy as recorded on its episodes")
    reward_model = models.ForeignKey(
        ModelCheckpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="scoring_runs",
        help_text="The reward model that scores the samples; empty: unscored (the first answer is kept)",
    )
    reward_model_name = models.CharField(max_length=200, blank=True, help_text="Kept if the model is deleted")
    backend = models.CharField(max_length=100, default="local", help_text="local, or an endpoint's name")
    search = models.CharField(
        max_length=20, default="local", help_text="The search provider its episodes browse with"
    )
    corpus = models.CharField(max_length=100, blank=True, help_text="Searched when the provider is local")
    n = models.PositiveSmallIntegerField(default=4, help_text="Samples per question")
    settings = models.JSONField(default=dict, help_text="training.sampling.SamplingSettings and the rest")
    question_source = models.JSONField(default=dict, help_text="How the questions were chosen")
    question_ids = models.JSONField(default=list)
    episodes_done = models.PositiveIntegerField(default=0, help_text="Episodes that stopped browsing")
    episodes_total = models.PositiveIntegerField(default=0)
    # The moving figure: an episode ends on End: ... or at max_actions, so a run takes at most
    # episodes_total * max_actions actions, fewer by each action an ended episode left unused.
    actions_done = models.PositiveIntegerField(default=0, help_text="Actions taken so far")
    actions_limit = models.PositiveIntegerField(
        default=0, help_text="Actions the run takes at most (less what ended episodes left unused)"
    )
    tokens_generated = models.PositiveBigIntegerField(default=0)
    tokens_per_second = models.FloatField(default=0.0)
    metrics = models.JSONField(default=dict, blank=True)

    progress_fields = ("actions_done", "actions_limit")

    def __str__(self) -> str:
        return f"sampling run {self.pk} ({self.status})"


class Sample(models.Model):
    """One of a run's n samples of a question: its episode, reward and whether best-of-n chose it."""

    run = models.ForeignKey(SamplingRun, on_delete=models.CASCADE, related_name="samples")
    episode = models.OneToOneField("annotation.Episode", on_delete=models.CASCADE, related_name="sample")
    question = models.ForeignKey("annotation.Question", on_delete=models.PROTECT, related_name="samples")
    index = models.PositiveSmallIntegerField(help_text="0 .. n-1 within its question")
    score = models.FloatField(null=True, blank=True, help_text="Reward minus the model's offset")
    chosen = models.BooleanField(default=False, help_text="The run's answer to this question")
    declined = models.BooleanField(
        default=False, help_text="The best answer to this question scored under the threshold"
    )
    invalid_actions = models.PositiveIntegerField(default=0)
    actions = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ("run", "question", "index")
        constraints = [
            models.UniqueConstraint(fields=("run", "question", "index"), name="sample_unique_index"),
        ]

    def __str__(self) -> str:
        return f"sample {self.index} of question {self.question_id} in run {self.run_id}"


class ProxyEvaluation(JobRow):
    """The reward-model proxy evaluation of best-of-n (WebGPT Figures 5 and 8), which needs no labelers: a
    "validation" reward model, trained on a separate split, scores every sample of some sampling runs; the
    results hold its mean score of the best-of-k answer (chosen by the runs' own reward model) for
    k = 1, 2, 4, ... n, and the implied preference over k = 1. A job on the ``training`` queue."""

    reward_model = models.ForeignKey(
        ModelCheckpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="proxy_evaluations",
        help_text="The validation reward model (trained on another split than the runs' reward model)",
    )
    reward_model_name = models.CharField(max_length=200, help_text="Kept if the model is deleted")
    sampling_runs = models.ManyToManyField(SamplingRun, related_name="proxy_evaluations")
    settings = models.JSONField(default=dict, blank=True, help_text="Bootstrap seed and resamples")
    samples_done = models.PositiveIntegerField(default=0)
    samples_total = models.PositiveIntegerField(default=0)
    scores = models.JSONField(default=dict, blank=True, help_text="Sample id -> validation reward")
    results = models.JSONField(default=dict, blank=True, help_text="The curve per run, with intervals")

    progress_fields = ("samples_done", "samples_total")

    def __str__(self) -> str:
        return f"proxy evaluation {self.pk} ({self.status})"


class Round(models.Model):
    """One turn of the loop, named by the sampling runs it made. The rest is found from them, so nothing
    has to be kept in step: the policies and reward models the runs used, the feedback batches made from
    the runs, the exports of those batches, the training runs on those exports and the models they left."""

    number = models.PositiveIntegerField(unique=True)
    name = models.CharField(max_length=200, blank=True)
    notes = models.TextField(blank=True)
    sampling_runs = models.ManyToManyField(SamplingRun, related_name="rounds")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("number",)

    def __str__(self) -> str:
        return f"round {self.number}" + (f": {self.name}" if self.name else "")


def relative_to_store(folder: str) -> str | None:
    """``folder`` relative to the model store (``MODEL_STORE_DIR``); None when it lies outside."""
    try:
        return str(Path(folder).relative_to(Path(settings.MODEL_STORE_DIR)))
    except ValueError:
        return None
