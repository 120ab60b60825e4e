"""Feedback tasks: answers to judge, batches of items, and labelers' leased assignments."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from annotation.feedback.scales import TEMPLATES
from annotation.models.demonstrations import Episode
from annotation.models.questions import Question
from core.permissions import AnyUser, ResearchTeamQuerySet, Role, has_role


class SourceKind(models.TextChoices):
    DEMONSTRATION = "demonstration", "Demonstration"
    MODEL = "model", "Model output"
    REFERENCE = "reference", "Reference answer"


class Answer(models.Model):
    """An answer to judge: text, the quotes it cites, and where it came from (never shown to labelers)."""

    question = models.ForeignKey(Question, on_delete=models.PROTECT, related_name="answers")
    text = models.TextField()
    quotes = models.JSONField(default=list, blank=True, help_text="[{title, url, domain, extract}]")
    source_kind = models.CharField(max_length=20, choices=SourceKind.choices)
    source = models.JSONField(
        default=dict, blank=True, help_text="model name, sampling metadata, dataset field..."
    )
    episode = models.ForeignKey(
        Episode, null=True, blank=True, on_delete=models.PROTECT, related_name="answers"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"answer {self.pk} to question {self.question_id}"


# The task templates, from the one list of them (``scales.TEMPLATES``, which the Django-free rules read): a
# template added there is a choice here, Template.WEBGPT_COMPARISON and so on.
Template = models.TextChoices("Template", [(code.upper(), (code, label)) for code, label in TEMPLATES])


class Preset(models.TextChoices):
    """A rating batch's criteria, or a ranking batch's metadata checkboxes (``scales.presets_for``)."""

    GOPHERCITE = "gophercite", "GopherCite"
    TRUTHFULQA = "truthfulqa", "TruthfulQA"
    WEBGLM = "webglm", "WebGLM"
    WEBGPT = "webgpt", "WebGPT metadata"
    INSTRUCTGPT = "instructgpt", "InstructGPT metadata"


class FeedbackBatch(models.Model):
    name = models.CharField(max_length=200)
    template = models.CharField(max_length=30, choices=Template.choices)
    preset = models.CharField(max_length=20, choices=Preset.choices, blank=True)
    instructions = models.TextField(blank=True)
    overlap = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(10)]
    )
    required_probability = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Probability that every part of a task is required",
    )
    always_required = models.JSONField(default=list, blank=True)
    lease_seconds = models.PositiveIntegerField(default=1800, validators=[MinValueValidator(60)])
    revision_seconds = models.PositiveIntegerField(
        default=3600, help_text="How long after submitting a labeler may revise"
    )
    is_active = models.BooleanField(default=True)
    priority = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="Share of each labeler's next tasks, against the other active batches (1 to 10)",
    )
    origin = models.JSONField(
        default=dict,
        blank=True,
        help_text="How the answers were chosen: pairing, sides, questions skipped and why",
    )
    sampling_runs = models.ManyToManyField(
        "training.SamplingRun",
        blank=True,
        related_name="feedback_batches",
        help_text="Runs answers came from",
    )
    item_count = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="Its items, made with the batch and never changed: a task page reads this "
        "instead of counting the batch",
    )
    is_screening = models.BooleanField(
        default=False,
        help_text="A screening test: every applicant for its kind of work judges every item (no overlap "
        "limit); scored against researchers' reference judgements",
    )
    agreement_cutoff = models.FloatField(
        default=0.75,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Screening: the soft cutoff on agreement with the researchers' preferences or rankings "
        "(InstructGPT: 75%)",
    )
    flag_cutoff = models.FloatField(
        default=0.75,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Screening: the soft cutoff on agreement with the researchers' question flags",
    )
    gold_threshold = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="A labeler whose rolling gold accuracy falls under this is paused for this kind of work",
    )
    gold_min_items = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Gold judgements needed before the pause may apply",
    )
    max_overlap = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="Adaptive overlap: an item whose judgements are split asks for one more, up to this many "
        "(blank: never)",
    )
    rank_agreement_threshold = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="Adaptive overlap for rankings: they disagree when their mean Kendall tau is under this",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ResearchTeamQuerySet.as_manager()

    class Meta:
        ordering = ("created_at", "id")
        verbose_name_plural = "feedback batches"

    def __str__(self) -> str:
        return self.name

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds)


class FeedbackItem(models.Model):
    """One thing to judge (a pair, a group or one answer; an episode's steps), by ``batch.overlap`` different
    labelers.

    ``slots_taken`` counts live leases and submissions; ``is_open`` (slots left) is kept with it so that
    handing out work is an index scan even with 100,000 items."""

    batch = models.ForeignKey(FeedbackBatch, on_delete=models.CASCADE, related_name="items")
    question = models.ForeignKey(Question, on_delete=models.PROTECT, related_name="feedback_items")
    answers = models.ManyToManyField(Answer, related_name="items")
    episode = models.ForeignKey(
        Episode,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="feedback_items",
        help_text="The browsing episode a step review replays (step templates only; no answers then)",
    )
    step = models.JSONField(
        default=dict,
        blank=True,
        help_text="A step preference: {index: the state's step, candidates: [A, B] as shown, taken: which "
        "one the episode took}; never shown to labelers but the candidates",
    )
    is_gold = models.BooleanField(default=False)
    gold_expected = models.JSONField(
        default=dict, blank=True, help_text="Expected response fields, by answer id"
    )
    sides = models.JSONField(
        default=dict,
        blank=True,
        help_text="Answer id -> side (A or B) of the comparison the batch measures; never shown to labelers",
    )
    gold_explanation = models.TextField(
        blank=True, help_text="Why the reference judgement is right: shown to a labeler who disagreed with it"
    )
    extra_overlap = models.PositiveSmallIntegerField(
        default=0,
        help_text="Judgements asked for beyond the batch's overlap because the first ones disagreed",
    )
    slots_taken = models.PositiveSmallIntegerField(default=0)
    is_open = models.BooleanField(default=True)

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=("is_open", "batch", "id"), name="item_open_batch")]

    def __str__(self) -> str:
        return f"item {self.pk} of {self.batch}"

    @property
    def target_overlap(self) -> int:
        """How many labelers this item is to have: the batch's overlap plus any asked for on disagreement."""
        return self.batch.overlap + self.extra_overlap


class AssignmentStatus(models.TextChoices):
    LEASED = "leased", "In progress"
    SUBMITTED = "submitted", "Submitted"
    SKIPPED = "skipped", "Skipped"
    EXPIRED = "expired", "Lease expired"
    # Submitted after the lease ran out and its slot went to someone else: kept (never thrown away), shown
    # to researchers, and left out of exports, which take SUBMITTED only.
    LATE = "late", "Submitted late"
    # A researcher's reference judgement on a screening or gold item: never a labeler's work, so it is in
    # no count, statistic or export that reads SUBMITTED.
    REFERENCE = "reference", "Reference judgement"


class FlagDecision(models.TextChoices):
    KEEP = "keep", "Keep"
    EXCLUDE = "exclude", "Exclude from exports"


class AssignmentQuerySet(models.QuerySet):
    def visible_to(self, user: AnyUser) -> AssignmentQuerySet:
        """Labelers see their own assignments; researchers see all."""
        if has_role(user, Role.RESEARCHER):
            return self
        if has_role(user, Role.LABELER):
            return self.filter(labeler=user)
        return self.none()


class Assignment(models.Model):
    """One labeler's work on one item: the order shown (blinding), the required-field draw, the draft,
    the response and its revisions. ``version`` works like an episode's: a page sends the version it was
    drawn from, and a submit from an older page (another tab submitted or skipped since) is refused."""

    item = models.ForeignKey(FeedbackItem, on_delete=models.CASCADE, related_name="assignments")
    labeler = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments"
    )
    status = models.CharField(
        max_length=10, choices=AssignmentStatus.choices, default=AssignmentStatus.LEASED
    )
    order = models.JSONField(help_text="Answer ids in the order shown (slot A/1 first)")
    required_all = models.BooleanField(default=False)
    leased_until = models.DateTimeField()
    started_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    # The first submission, never changed by a revision: gold checks and screening tests score it (a
    # labeler who saw a reference or a running score could otherwise revise their way to a pass), the
    # revision window runs from it, and a revocation's exclusion is decided by it.
    first_submitted_at = models.DateTimeField(null=True, blank=True)
    first_response = models.JSONField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    active_seconds = models.FloatField(default=0.0)
    draft = models.JSONField(default=dict, blank=True)
    response = models.JSONField(null=True, blank=True)
    flags = models.JSONField(default=list, blank=True, help_text="Reasons for review, e.g. contradictions")
    flag_decision = models.CharField(
        max_length=10,
        choices=FlagDecision.choices,
        blank=True,
        help_text="A researcher's latest decision on a flagged judgement (blank: not reviewed yet)",
    )
    skip_reason = models.TextField(blank=True)
    submit_key = models.UUIDField(null=True, blank=True, editable=False)
    version = models.PositiveIntegerField(
        default=0, help_text="Increases with every submission or skip, so a page older than that is refused"
    )
    is_reference = models.BooleanField(
        default=False, help_text="A researcher's reference judgement (stored with status reference)"
    )

    objects = AssignmentQuerySet.as_manager()

    class Meta:
        ordering = ("-started_at", "-id")
        constraints = [
            # Never the same labeler twice on one item, whatever happened to the first assignment.
            models.UniqueConstraint(fields=("item", "labeler"), name="one_assignment_per_labeler_item"),
        ]
        indexes = [models.Index(fields=("status", "leased_until"), name="assignment_lease")]

    def __str__(self) -> str:
        return f"assignment {self.pk} ({self.labeler}, {self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Whatever stores a submission (the submit service, a fixture, an import) keeps it as the first one
        # once, and no save ever changes it again.
        if self.submitted_at is not None and self.first_submitted_at is None:
            self.first_submitted_at, self.first_response = self.submitted_at, self.response
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "first_submitted_at", "first_response"}
        super().save(*args, **kwargs)

    @property
    def scored_response(self) -> dict | None:
        """What gold checks and screening tests score: the first submission, whatever revisions came
        after it (the response itself for a task never submitted)."""
        return self.first_response if self.first_submitted_at is not None else self.response

    @property
    def revisable_until(self) -> datetime | None:
        """The end of the revision window: the batch's ``revision_seconds`` after the first submission, so
        revising never moves it (None while never submitted). Reads ``item.batch``."""
        if self.first_submitted_at is None:
            return None
        return self.first_submitted_at + timedelta(seconds=self.item.batch.revision_seconds)

    @property
    def revised(self) -> bool:
        """Whether the response was changed after its first submission (the history is in ``revisions``)."""
        return self.first_submitted_at is not None and self.submitted_at != self.first_submitted_at


class FlagReview(models.Model):
    """One researcher's decision on a flagged judgement; every decision is kept, the latest is copied to
    ``Assignment.flag_decision`` (what exports read)."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="flag_reviews")
    decision = models.CharField(max_length=10, choices=FlagDecision.choices)
    note = models.TextField(blank=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("assignment", "decided_at", "id")

    def __str__(self) -> str:
        return f"{self.decision} for assignment {self.assignment_id}"


class AssignmentRevision(models.Model):
    """A submitted response that was later revised: the history is kept."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="revisions")
    response = models.JSONField()
    flags = models.JSONField(default=list)
    submitted_at = models.DateTimeField()
    replaced_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("assignment", "replaced_at")

    def __str__(self) -> str:
        return f"revision of assignment {self.assignment_id} at {self.replaced_at:%Y-%m-%d %H:%M}"
