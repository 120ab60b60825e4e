"""Model judges: a judge run judges a feedback batch's items as one more "labeler" (a reward model, or a
language model behind an endpoint of ``SAMPLING_ENDPOINTS`` with a versioned judging prompt). Its judgements
live here, apart from ``Assignment``: a model's work is never a labeler's, so no overlap count, gate, pay
sheet, statistic of labelers or human export reads it by accident. A judgement's ``response`` has the shape
of a human one (``annotation.feedback.validation``), named by display slot in its ``order``.

Each item is asked in both orders (``swapped`` False, then True); a verdict counts only when the two agree.
``Routing`` records, per item of a routed batch, which path decided it."""

from __future__ import annotations

from django.db import models

from annotation.models.feedback import Assignment, FeedbackBatch, FeedbackItem
from core.jobs.models import JobRow


class JudgeKind(models.TextChoices):
    REWARD_MODEL = "reward_model", "Reward model"
    ENDPOINT = "endpoint", "Language model behind an endpoint"


class JudgeRun(JobRow):
    """One judge over one batch's items: which judge (a registered reward model, or an endpoint's model with a
    prompt version), its settings, and progress. A job on the ``sampling`` queue."""

    batch = models.ForeignKey(FeedbackBatch, on_delete=models.CASCADE, related_name="judge_runs")
    judge_kind = models.CharField(max_length=20, choices=JudgeKind.choices)
    reward_model = models.ForeignKey(
        "training.ModelCheckpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_runs",
        help_text="The judge, when it is a reward model",
    )
    endpoint = models.CharField(max_length=100, blank=True, help_text="SAMPLING_ENDPOINTS name, for a model")
    judge_name = models.CharField(
        max_length=200, help_text="The judge as shown (kept if the model is deleted)"
    )
    prompt_version = models.CharField(max_length=40, blank=True, help_text="The judging prompt's version")
    settings = models.JSONField(
        default=dict, blank=True, help_text="Tie margin, temperature, seed, routing, claim checks..."
    )
    route = models.BooleanField(
        default=False,
        help_text="Routing: the judge's confident, order-consistent verdicts decide their items; the rest "
        "(and an audit share) go to labelers",
    )
    items_done = models.PositiveIntegerField(default=0)
    items_total = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(default=dict, blank=True, help_text="Counts: judged, consistent, unparsed...")

    job_name, task_name = "judge run", "training.run_judge"
    queue, task_key = "sampling", "judge_run_id"
    progress_fields = ("items_done", "items_total")

    def __str__(self) -> str:
        return f"judge run {self.pk} ({self.judge_name} on {self.batch_id}, {self.status})"

    @classmethod
    def discard_partial(cls, pk: int) -> None:
        """Nothing: the judgements so far are whole, each one stored as it came, and a rerun skips them."""


class ModelJudgement(models.Model):
    """A judge's answer on one item in one order: the order shown, the structured response (None when the
    output could not be read as one: ``error`` says why), the raw output as it came, and the judge's
    confidence in [0, 1] where it gives one (a reward model's preference probability)."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="judgements")
    item = models.ForeignKey(FeedbackItem, on_delete=models.CASCADE, related_name="model_judgements")
    swapped = models.BooleanField(default=False, help_text="The second ask, in the reverse order")
    order = models.JSONField(help_text="Answer ids in the order shown (slot A/1 first)")
    response = models.JSONField(null=True, blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    confidence = models.FloatField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True, help_text="Scores, tokens, the constraint used...")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("run", "item", "swapped")
        constraints = [
            models.UniqueConstraint(
                fields=("run", "item", "swapped"), name="one_judgement_per_run_item_order"
            )
        ]

    def __str__(self) -> str:
        return f"judgement of item {self.item_id} by judge run {self.run_id}"


class RoutePath(models.TextChoices):
    JUDGE = "judge", "Decided by the judge"
    HUMAN = "human", "Sent to labelers"
    AUDIT = "audit", "Decided by the judge, audited by labelers"


class Routing(models.Model):
    """Which path decided an item of a routed batch (one judge run routes a batch once)."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="routings")
    item = models.OneToOneField(FeedbackItem, on_delete=models.CASCADE, related_name="routing")
    path = models.CharField(max_length=10, choices=RoutePath.choices)
    verdict = models.FloatField(
        null=True, blank=True, help_text="The judge's preference for the item's first answer id, in [-1, 1]"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("item",)

    def __str__(self) -> str:
        return f"item {self.item_id}: {self.path}"


class ClaimSupport(models.TextChoices):
    SUPPORTED = "supported", "Supported"
    WEAKLY = "weakly", "Weakly supported"
    UNSUPPORTED = "unsupported", "Unsupported"


class ClaimCheck(models.Model):
    """A judge's second opinion on one claim annotation of a labeler's judgement: does the claim's span follow
    from its linked quotes? ``slot`` and ``claim`` name it in the assignment's response."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="claim_checks")
    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="claim_checks")
    slot = models.CharField(max_length=4)
    claim = models.PositiveSmallIntegerField()
    support = models.CharField(max_length=12, choices=ClaimSupport.choices, blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("assignment", "slot", "claim")
        constraints = [
            models.UniqueConstraint(fields=("run", "assignment", "slot", "claim"), name="one_check_per_claim")
        ]

    def __str__(self) -> str:
        return (
            f"claim {self.slot}.{self.claim} of assignment {self.assignment_id}: {self.support or self.error}"
        )
