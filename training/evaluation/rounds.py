"""Rounds: one turn of the loop, named by the sampling runs it made; everything else is found from them.

A round keeps only its sampling runs. What the round used (the runs' policies and reward models) and what it
made (the feedback batches made from the runs, the exports of those batches or runs, the training runs on
those exports and the models they left, the proxy evaluations of the runs) are read from the rows that
already record where each came from, so the rounds page cannot drift out of step with the data. The one
check of a request is ``check_round_request`` (console form and API alike)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max, Q

from annotation.exports.rules import describe_filters
from annotation.models import Export, ExportFormat, FeedbackBatch
from core.models import log_action
from core.permissions import AnyUser
from training.evaluation.round_data import too_few
from training.models import (
    ModelCheckpoint,
    ProxyEvaluation,
    Round,
    RunKind,
    RunStatus,
    SamplingRun,
    TrainingRun,
)

MAX_NAME = Round._meta.get_field("name").max_length
MAX_NOTES = 20_000
MAX_RUNS = 20
# The exports a reward model is retrained from, in the order the round page offers them.
RM_FORMATS = (ExportFormat.RM_PAIRS, ExportFormat.RM_GROUPS, ExportFormat.WEBGPT_COMPARISONS)


class RoundError(ValueError):
    """The round cannot be made as asked; nothing was created. ``field`` names the input at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


@dataclass
class RoundContents:
    """What a round used and made, each list oldest first."""

    round: Round
    sampling_runs: list[SamplingRun]
    policies: list[str]  # names, as recorded on the runs (a deleted model keeps its name)
    policy_models: list[ModelCheckpoint]  # the registered ones, linked
    reward_models: list[ModelCheckpoint]
    batches: list[FeedbackBatch]
    exports: list[Export]
    training_runs: list[TrainingRun]
    checkpoints: list[ModelCheckpoint]
    proxy_evaluations: list[ProxyEvaluation]
    retrain_exports: list[Export] = field(default_factory=list)  # finished exports an RM trains on
    rm_exports: list[Export] = field(default_factory=list)  # every reward-model export, finished or not


def check_round_request(name: str, notes: str, run_ids: Sequence[int]) -> list[SamplingRun]:
    """The round's sampling runs (each must exist, at least one, no repeats), or RoundError by field."""
    if len(name) > MAX_NAME:
        raise RoundError(f"The name is at most {MAX_NAME} characters.", "name")
    if len(notes) > MAX_NOTES:
        raise RoundError(f"The notes are at most {MAX_NOTES} characters.", "notes")
    return check_runs(run_ids)


def check_runs(run_ids: Sequence[int]) -> list[SamplingRun]:
    """The sampling runs named (each must exist, at least one, no repeats), or RoundError."""
    if not run_ids:
        raise RoundError("Choose the sampling runs this round made (at least one).", "sampling_runs")
    if len(run_ids) > MAX_RUNS:
        raise RoundError(f"A round has at most {MAX_RUNS} sampling runs.", "sampling_runs")
    if len(set(run_ids)) != len(run_ids):
        raise RoundError("A sampling run is named twice.", "sampling_runs")
    runs = SamplingRun.objects.in_bulk(run_ids)
    missing = [str(pk) for pk in run_ids if pk not in runs]
    if missing:
        raise RoundError(f"There is no sampling run {', '.join(missing)}.", "sampling_runs")
    return [runs[pk] for pk in run_ids]


def create_round(user: AnyUser | None, name: str, notes: str, run_ids: Sequence[int]) -> Round:
    """The next round (numbered after the last one) with these sampling runs; RoundError otherwise."""
    runs = check_round_request(name, notes, run_ids)
    for _ in range(3):  # two researchers starting a round at once: the second takes the next number
        try:
            with transaction.atomic():
                number = (Round.objects.aggregate(last=Max("number"))["last"] or 0) + 1
                created = Round.objects.create(
                    number=number,
                    name=without_number(name, number),
                    notes=notes,
                    created_by=user if getattr(user, "is_authenticated", False) else None,
                )
                created.sampling_runs.set(runs)
                log_action(user, "round.create", created, sampling_runs=[run.pk for run in runs])
                return created
        except IntegrityError:
            continue
    raise RoundError("Another round was started at the same moment; try again.")


def without_number(name: str, number: int) -> str:
    """The name without a leading "Round 3" (alone, or before ":" or a dash): a round is shown as "round 3:
    its name", so a name that repeats the number would read "round 3: Round 3"."""
    pattern = rf"\s*round\s*{number}\s*(?:[:\-\u2013\u2014]\s*(?P<rest>.*))?"
    match = re.fullmatch(pattern, name, flags=re.IGNORECASE | re.DOTALL)
    return (match["rest"] or "").strip() if match else name.strip()


def add_runs(user: AnyUser | None, round_: Round, run_ids: Sequence[int]) -> list[SamplingRun]:
    """Add sampling runs to a round (those already in it are refused by name)."""
    runs = check_runs(run_ids)
    already = set(round_.sampling_runs.filter(pk__in=run_ids).values_list("pk", flat=True))
    if already:
        listed = ", ".join(str(pk) for pk in sorted(already))
        raise RoundError(f"Sampling run {listed} is in this round already.", "sampling_runs")
    round_.sampling_runs.add(*runs)
    log_action(user, "round.add_runs", round_, sampling_runs=[run.pk for run in runs])
    return runs


def round_contents(round_: Round) -> RoundContents:
    runs = list(round_.sampling_runs.select_related("policy", "reward_model").order_by("pk"))
    run_ids = [run.pk for run in runs]
    batches = list(FeedbackBatch.objects.filter(sampling_runs__in=run_ids).distinct().order_by("pk"))
    batch_ids = [batch.pk for batch in batches]
    number = round_.number  # the round filters of its retraining data (``round_data``)
    exports = list(
        Export.objects.filter(
            Q(filters__batch__in=batch_ids)
            | Q(filters__sampling_run__in=run_ids)
            | Q(filters__round_only=number)
            | Q(filters__up_to_round=number)
        )
        .distinct()
        .order_by("pk")
    )
    rm_exports = [export for export in exports if export.export_format in RM_FORMATS]
    training_runs = list(
        TrainingRun.objects.filter(export__in=exports)
        .select_related("export", "base_checkpoint")
        .defer("timeline", "log")
        .order_by("pk")
    )
    checkpoints = list(ModelCheckpoint.objects.filter(run__in=training_runs).order_by("pk"))
    proxy = list(ProxyEvaluation.objects.filter(sampling_runs__in=run_ids).distinct().order_by("pk"))
    return RoundContents(
        round=round_,
        sampling_runs=runs,
        policies=list(dict.fromkeys(run.policy_name for run in runs)),  # in order, once each
        policy_models=list(dict.fromkeys(run.policy for run in runs if run.policy is not None)),
        reward_models=list(dict.fromkeys(run.reward_model for run in runs if run.reward_model)),
        batches=batches,
        exports=exports,
        training_runs=training_runs,
        checkpoints=checkpoints,
        proxy_evaluations=proxy,
        retrain_exports=[export for export in rm_exports if export.status == "done"],
        rm_exports=rm_exports,
    )


def retrain_query(contents: RoundContents, export: Export) -> dict[str, Any]:
    """The training form's prefill for retraining the reward model on one of the round's exports: a reward
    model run on that export, starting from the reward model the round's runs were scored with."""
    query: dict[str, Any] = {"export": export.pk, "kind": RunKind.RM}
    if contents.reward_models:
        query["base"] = contents.reward_models[-1].pk
    return query


def export_query(batch: FeedbackBatch) -> dict[str, Any]:
    """The exports page's prefill for a batch's judgements as reward-model data, eval-split questions left
    out (a run samples every split it is given; training refuses the eval questions)."""
    export_format = ExportFormat.RM_GROUPS if batch.template == "ranking" else ExportFormat.RM_PAIRS
    return {"batch": batch.pk, "export_format": export_format, "exclude_eval": "on"}


def rm_accuracy(contents: RoundContents) -> dict[str, Any] | None:
    """The validation accuracy of the newest reward model the round trained (with its interval), the data
    it trained on, how many comparisons it trained and validated on (``judgements``: the count behind the
    interval), and a warning when they were too few to read the figure."""
    for run in reversed(contents.training_runs):
        if run.kind == RunKind.RM and run.status == RunStatus.DONE and "eval_accuracy" in run.metrics:
            train, validation = run.metrics.get("train_examples"), run.metrics.get("validation_examples")
            known = train is not None and validation is not None  # runs from before these were recorded
            return {
                "run": run.pk,
                "value": run.metrics["eval_accuracy"],
                "low": run.metrics.get("eval_accuracy_low"),
                "high": run.metrics.get("eval_accuracy_high"),
                "data": export_data(run.export),
                "train_examples": train,
                "judgements": validation,
                "warnings": too_few(train, validation, run.export.export_format) if known else [],
            }
    return None


def export_data(export: Export) -> str:
    """Which data an export holds, as a person reads it ("rm-pairs: everything collected up to round 2
    (...); eval questions left out")."""
    return f"{export.export_format}: " + "; ".join(describe_filters(export.filters))
