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


class SamplingRun(models.Model):
    """Best-of-n sampling of a question set by a policy, scored by a reward model (a job on the ``sampling``
    queue). The questions are resolved when the run is requested and kept in ``question_ids``, so the run
    can be reproduced from its row; each sample is an episode (kind model) with a ``Sample`` row."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
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
    n = models.PositiveSmallIntegerField(default=4, help_text="Samples per question")
    settings = models.JSONField(default=dict, help_text="training.sampling.SamplingSettings and the rest")
    question_source = models.JSONField(default=dict, help_text="How the questions were chosen")
    question_ids = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    episodes_done = models.PositiveIntegerField(default=0)
    episodes_total = models.PositiveIntegerField(default=0)
    tokens_generated = models.PositiveBigIntegerField(default=0)
    tokens_per_second = models.FloatField(default=0.0)
    metrics = models.JSONField(default=dict, blank=True)
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"sampling run {self.pk} ({self.status})"

    @property
    def percent(self) -> int:
        if self.status == RunStatus.DONE:
            return 100
        return int(100 * self.episodes_done / self.episodes_total) if self.episodes_total else 0

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED


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


class ProxyEvaluation(models.Model):
    """The reward-model proxy evaluation of best-of-n (WebGPT Figures 5 and 8), which needs no labelers: a
    "validation" reward model, trained on a separate split, scores every sample of some sampling runs; the
    results hold its mean score of the best-of-k answer (chosen by the runs' own reward model) for
    k = 1, 2, 4, ... n, and the implied preference over k = 1. A job on the ``training`` queue."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
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
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    samples_done = models.PositiveIntegerField(default=0)
    samples_total = models.PositiveIntegerField(default=0)
    scores = models.JSONField(default=dict, blank=True, help_text="Sample id -> validation reward")
    results = models.JSONField(default=dict, blank=True, help_text="The curve per run, with intervals")
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"proxy evaluation {self.pk} ({self.status})"

    @property
    def percent(self) -> int:
        if self.status == RunStatus.DONE:
            return 100
        return int(100 * self.samples_done / self.samples_total) if self.samples_total else 0

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED


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
