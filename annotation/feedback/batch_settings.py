"""A feedback batch's settings as the console form, the API and the command give them, the one error a
refused request raises, and the batch's fields made from them (``batches`` and ``step_batches`` create with
these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from annotation.feedback.scales import DEFAULT_RANKING_PRESET, default_always_required
from annotation.models import FeedbackBatch
from core.permissions import AnyUser


def model_default(name: str) -> Any:
    """A batch field's default, the one the form, the API and the command fall back on."""
    return FeedbackBatch._meta.get_field(name).default


class BatchError(ValueError):
    """The batch cannot be made as asked; nothing was created. ``field`` names the input at fault (the
    ``BatchSettings`` attribute, "source", "answers_file" or "gold_pairs"), or is None."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


@dataclass
class BatchSettings:
    name: str
    template: str
    preset: str = ""
    instructions: str = ""
    overlap: int = 1
    priority: int = 1
    required_probability: float = 0.1
    always_required: list[str] | None = None  # None: the template's default
    lease_seconds: int = 1800
    revision_seconds: int = 3600
    gold: dict[int, dict] = field(default_factory=dict)  # group index -> expected response fields
    # The runs source (training.evaluation.pairing): which runs, against what, how many pairs.
    runs: list[int] = field(default_factory=list)
    vs_demonstrations: bool = False
    pairs_per_question: int = 1
    include_declined: bool = False
    # A step review's episodes (``step_batches``): one demonstration batch's (None: every finished
    # demonstration), or only the runs' samples a comparison judged worse.
    demonstration_batch: int | None = None
    judged_worse: bool = False
    # The workforce (defaults: the model's): a screening test, its soft cutoffs, the gold checks' pause, and
    # adaptive overlap (``workforce.overlap``; max_overlap None: never more than ``overlap``).
    is_screening: bool = field(default_factory=lambda: model_default("is_screening"))
    agreement_cutoff: float = field(default_factory=lambda: model_default("agreement_cutoff"))
    flag_cutoff: float = field(default_factory=lambda: model_default("flag_cutoff"))
    gold_threshold: float = field(default_factory=lambda: model_default("gold_threshold"))
    gold_min_items: int = field(default_factory=lambda: model_default("gold_min_items"))
    max_overlap: int | None = None
    rank_agreement_threshold: float = field(default_factory=lambda: model_default("rank_agreement_threshold"))


def batch_fields(user: AnyUser | None, config: BatchSettings) -> dict[str, Any]:
    """A new batch's fields from its settings (all but its items' count and origin)."""
    always = config.always_required
    if always is None:
        always = default_always_required(config.template, config.preset or None)
    return {
        "name": config.name,
        "template": config.template,
        # The default metadata set of a ranking is stored as no preset, whether chosen or not, so the
        # same-question rule (kinds of task are template + preset) sees one kind of task.
        "preset": "" if config.preset == DEFAULT_RANKING_PRESET else config.preset,
        "instructions": config.instructions,
        "overlap": config.overlap,
        "priority": config.priority,
        "required_probability": config.required_probability,
        "always_required": always,
        "lease_seconds": config.lease_seconds,
        "revision_seconds": config.revision_seconds,
        "is_screening": config.is_screening,
        "agreement_cutoff": config.agreement_cutoff,
        "flag_cutoff": config.flag_cutoff,
        "gold_threshold": config.gold_threshold,
        "gold_min_items": config.gold_min_items,
        "max_overlap": config.max_overlap,
        "rank_agreement_threshold": config.rank_agreement_threshold,
        "created_by": user if getattr(user, "is_authenticated", False) else None,
    }
