"""Training runs (a job row per run: config, export used, progress, metrics timeline, logs) and the model
registry (a row per trained model folder in the model store)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.db.models import F, TextField, Value
from django.db.models.functions import Concat
from django.utils import timezone

from core.jobs.models import JobRow, JobStatus
from core.permissions import ResearchTeamQuerySet
from training.checkpoints import discard_output, resumable_step


class RunKind(models.TextChoices):
    BC = "bc", "Behaviour cloning"
    RM = "rm", "Reward model"
    RM_EVAL = "rm_eval", "Reward-model evaluation"
    RL = "rl", "Reinforcement learning"
    PRM = "prm", "Process reward model"


RunStatus = JobStatus  # the statuses of every job row, by the name training's code has always used

# Evaluations produce no model.
CHECKPOINT_KINDS = [(kind.value, kind.label) for kind in (RunKind.BC, RunKind.RM, RunKind.RL, RunKind.PRM)]
POLICY_KINDS = (RunKind.BC, RunKind.RL)  # registered models that can browse and answer


class TrainingRun(JobRow):
    kind = models.CharField(max_length=10, choices=RunKind.choices)
    export = models.ForeignKey(
        "annotation.Export",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="training_runs",
        help_text="Data used (none for RL: it learns from questions and a reward model)",
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
    # RL runs only: what the policy is trained against and on (the lineage of the model it registers).
    reward_model = models.ForeignKey(
        "ModelCheckpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="rl_runs",
        help_text="RL: the reward model the policy is trained against",
    )
    reward_model_name = models.CharField(max_length=200, blank=True, help_text="Kept if the model is deleted")
    question_source = models.JSONField(
        default=dict, blank=True, help_text="RL: how the questions were chosen"
    )
    question_ids = models.JSONField(default=list, blank=True, help_text="RL: the questions it trains on")
    samples = models.JSONField(
        default=list, blank=True, help_text="RL: the latest step's episodes (training.rl.types.EpisodeReport)"
    )
    resumes = models.PositiveSmallIntegerField(
        default=0, help_text="Times it was queued again to continue from its checkpoint"
    )

    job_name, task_name, queue, task_key = "training run", "training.run_training", "training", "run_id"
    progress_fields = ("step", "total_steps")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} run {self.pk} ({self.status})"

    @classmethod
    def discard_partial(cls, pk: int) -> None:
        """The model folder it was writing, unless its model was registered (then the files are the
        model's: a failure after that point must not take them)."""
        if not ModelCheckpoint.objects.filter(run_id=pk).exists():
            discard_output(pk)

    @classmethod
    def resume_orphan(cls, rows: models.QuerySet, reason: str) -> bool:
        """Queued again when its settings' ``resume_attempts`` are not used up and it has a checkpoint."""
        found = rows.values("pk", "config", "resumes").first()
        if found is None or found["resumes"] >= int(found["config"].get("resume_attempts") or 0):
            return False
        step = resumable_step(found["pk"])
        if step is None:
            return False
        attempt = f"{found['resumes'] + 1} of {found['config']['resume_attempts']}"
        line = f"{reason}: queued again to continue from the checkpoint of step {step} (resume {attempt})"
        return bool(rows.update(**cls.requeued_fields(line)))

    @staticmethod
    def requeued_fields(line: str) -> dict:
        """What a run queued again to continue from its checkpoint is updated with (``line`` logged)."""
        logged = Concat("log", Value(f"{timezone.now():%H:%M:%S} {line}\n"), output_field=TextField())
        return {
            "status": JobStatus.QUEUED,
            "resumes": F("resumes") + 1,
            "log": logged,
            "error": "",
            "started_at": None,
            "heartbeat_at": None,
            "finished_at": None,
            "estimated_end_at": None,
            "cancel_requested": False,
        }


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
    step_model = models.ForeignKey(
        ModelCheckpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="guided_runs",
        help_text="A process reward model: each question is also sampled n times guided by it (step-level "
        "best-of-k, settings.guide_k), beside the n unguided samples; empty: unguided only",
    )
    step_model_name = models.CharField(max_length=200, blank=True, help_text="Kept if the model is deleted")
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

    job_name, task_name, queue, task_key = "sampling run", "training.run_sampling", "sampling", "run_id"
    progress_fields = ("actions_done", "actions_limit")

    def __str__(self) -> str:
        return f"sampling run {self.pk} ({self.status})"


class Sample(models.Model):
    """One of a run's n samples of a question: its episode, reward and whether best-of-n chose it."""

    run = models.ForeignKey(SamplingRun, on_delete=models.CASCADE, related_name="samples")
    episode = models.OneToOneField("annotation.Episode", on_delete=models.CASCADE, related_name="sample")
    question = models.ForeignKey("annotation.Question", on_delete=models.PROTECT, related_name="samples")
    index = models.PositiveSmallIntegerField(help_text="0 .. n-1 within its question (n .. 2n-1: guided)")
    score = models.FloatField(null=True, blank=True, help_text="Reward minus the model's offset")
    chosen = models.BooleanField(default=False, help_text="The run's answer to this question")
    declined = models.BooleanField(
        default=False, help_text="The best answer to this question scored under the threshold"
    )
    invalid_actions = models.PositiveIntegerField(default=0)
    actions = models.PositiveIntegerField(default=0)
    guided = models.BooleanField(
        default=False,
        help_text="Browsed guided by the run's process reward model (indexes n .. 2n-1); best-of-n then "
        "chooses among the guided samples, the unguided ones are the baseline beside them",
    )
    step_score = models.FloatField(
        null=True, blank=True, help_text="The process reward model's mean score of the episode's actions"
    )
    tokens = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ("run", "question", "index")
        constraints = [
            models.UniqueConstraint(fields=("run", "question", "index"), name="sample_unique_index"),
        ]

    def __str__(self) -> str:
        return f"sample {self.index} of question {self.question_id} in run {self.run_id}"


class StepCandidate(models.Model):
    """A policy's next action at one state of a human demonstration (issue 38), made by a sampling run "at
    demonstration states": a step preference sets it against the demonstrator's own action there."""

    run = models.ForeignKey(SamplingRun, on_delete=models.CASCADE, related_name="step_candidates")
    action = models.ForeignKey(
        "annotation.EpisodeAction",
        on_delete=models.CASCADE,
        related_name="policy_candidates",
        help_text="The demonstrator's action: the state is the one before it",
    )
    command = models.TextField(help_text="What the policy wrote there (never the demonstrator's own)")

    class Meta:
        ordering = ("run", "action")
        constraints = [models.UniqueConstraint(fields=("run", "action"), name="step_candidate_once_per_run")]

    def __str__(self) -> str:
        return f"candidate of run {self.run_id} at action {self.action_id}"


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

    job_name, task_name = "proxy evaluation", "training.run_proxy_evaluation"
    queue, task_key = "training", "evaluation_id"
    progress_fields = ("samples_done", "samples_total")

    def __str__(self) -> str:
        return f"proxy evaluation {self.pk} ({self.status})"

    @classmethod
    def discard_partial(cls, pk: int) -> None:
        """Its curves: they are whole only when it is done (the scores so far stay, as on a cancel)."""
        cls.objects.filter(pk=pk).update(results={})


class Benchmark(models.TextChoices):
    """The paper's benchmarks (WebGPT section 4): each is its dataset's ``eval`` questions."""

    TRIVIAQA = "triviaqa", "TriviaQA"
    TRUTHFULQA = "truthfulqa", "TruthfulQA"


class BenchmarkRun(JobRow):
    """A policy answering a benchmark's ``eval`` questions in the browser environment, then scored
    (``training.evaluation.benchmark_jobs``): its answers are a sampling run's (with every sampling setting:
    best-of-n against a reward model, the decline threshold, the backend), run by this job; TriviaQA is
    scored against the answers' aliases, TruthfulQA by a judge (and by people, on its rating batch). A job
    on the ``sampling`` queue."""

    benchmark = models.CharField(max_length=20, choices=Benchmark.choices)
    sampling_run = models.OneToOneField(
        SamplingRun, on_delete=models.PROTECT, related_name="benchmark_run", help_text="The policy's answers"
    )
    judge = models.JSONField(
        default=dict,
        blank=True,
        help_text="TruthfulQA: the judge asked for ({endpoint} or {reward_model}, its settings)",
    )
    batch = models.OneToOneField(
        "annotation.FeedbackBatch",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="benchmark_run",
        help_text="TruthfulQA: the rating batch of its answers (the judge's items; people's when active)",
    )
    judge_run = models.OneToOneField(
        "annotation.JudgeRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="benchmark_run",
        help_text="TruthfulQA: the endpoint judge's run over the batch",
    )
    stages_done = models.PositiveSmallIntegerField(default=0)
    stages_total = models.PositiveSmallIntegerField(default=2, help_text="Answering, then scoring")
    results = models.JSONField(default=dict, blank=True, help_text="The scores, with their intervals")

    job_name, task_name = "benchmark run", "training.run_benchmark"
    queue, task_key = "sampling", "benchmark_id"
    progress_fields = ("stages_done", "stages_total")

    def __str__(self) -> str:
        return f"{self.get_benchmark_display()} run {self.pk} ({self.status})"


class Experiment(models.Model):
    """An experiment report (``training.evaluation.experiments``): chosen policies side by side, each a
    policy as its sampling runs name it (the model, best-of-n, the reward model that chose). Its numbers
    are read from the runs, batches, judges, benchmarks and proxy evaluations when the report is shown, so
    a report made again shows the data as it stands; ``run_experiment`` makes one from a file."""

    name = models.CharField(max_length=200)
    notes = models.TextField(blank=True)
    policies = models.JSONField(
        default=list, help_text="[{policy_name, n, reward_model_name}]: the policies compared, in order"
    )
    source = models.TextField(blank=True, help_text="The experiment file it was made from, if any")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"experiment {self.pk}: {self.name}"


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


class RLEpisode(models.Model):
    """One episode of one step of an RL run, with what it put into the step's objective, so that the
    step's logged figures (the run's ``timeline``) can be recomputed from its episodes alone, without the
    models (training.rl.types.EpisodeTerms; the formulas: docs/training.md, "Auditing a run"). Written by
    the job once per step, all the step's episodes in one insert."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="episodes")
    step = models.PositiveIntegerField()
    index = models.PositiveIntegerField(help_text="Its place among the step's episodes")
    # A question deleted since keeps its episodes (the text and quotes are here): the run's question_ids
    # already outlive their questions.
    question = models.ForeignKey(
        "annotation.Question", null=True, blank=True, on_delete=models.SET_NULL, related_name="rl_episodes"
    )
    question_text = models.TextField()
    kind = models.CharField(max_length=10, help_text="answer (answer-only) or browse")
    quotes = models.JSONField(
        default=list,
        blank=True,
        help_text="The quotes its answer was prompted with: {title, url, domain, extract}",
    )
    answered = models.BooleanField(help_text="False: it ended without an answer (a browsing episode)")
    answer = models.TextField(blank=True)
    commands = models.JSONField(default=list, blank=True, help_text="A browsing episode's commands")
    invalid_actions = models.PositiveIntegerField(default=0)
    answer_tokens = models.PositiveIntegerField(default=0)
    reward = models.FloatField(help_text="The reward model's score less its offset (or no_answer_reward)")
    group = models.PositiveIntegerField(help_text="Its group among the step's: its advantage's baseline")
    baseline = models.FloatField(help_text="The group's mean reward")
    scale = models.FloatField(help_text="The advantage's divisor: the group's standard deviation, or 1")
    advantage = models.FloatField(help_text="(reward - baseline) / scale")
    tokens = models.PositiveIntegerField(help_text="Its policy tokens in the loss")
    kl = models.FloatField(help_text="Sum over its tokens of the k3 KL to the starting policy (nats)")
    kl_penalty = models.FloatField(help_text="kl_coef * kl: its KL term in the loss")
    entropy = models.FloatField(help_text="Sum over its tokens of the sampling distribution's entropy")

    class Meta:
        ordering = ("run", "step", "index")
        constraints = [
            models.UniqueConstraint(fields=("run", "step", "index"), name="rl_episode_unique_index"),
        ]

    def __str__(self) -> str:
        return f"episode {self.index} of step {self.step} of run {self.run_id}"
