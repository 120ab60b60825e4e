"""What a round's reward model is retrained on, offered before the export is made: the data collected up to
the round (the default: WebGPT trains each reward model on all the comparisons collected so far) or the
round's own judgements, each with its rows counted and split into training and validation as the training
run will split them, and a warning when either side is too small to read. The data is an export with the
round filters (``annotation.exports.rules``), so the export, its training run and the model it leaves are
found from the round like every other export of it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import count

from django.db import transaction

from annotation.exports.rows import row_questions
from annotation.exports.rules import export_filters
from annotation.exports.service import request_export
from annotation.feedback.agreement import wilson_interval
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.models import Export, ExportFormat, FeedbackBatch
from core.models import log_action
from core.permissions import AnyUser
from training.models import Round
from training.runs.config import RMConfig
from training.runs.data import held_out_split

# "so_far" first: the default, as in the paper. "round": only the judgements of the round's own batches.
SCOPES = {
    "so_far": "Everything collected up to this round",
    "round": "This round's judgements only",
}
SCOPE_DETAILS = {
    "so_far": "every batch's judgements (later rounds' batches left out) and the imported comparisons",
    "round": "the batches made from this round's sampling runs",
}
# What a row of each format is, one and many.
NOUNS = {ExportFormat.RM_PAIRS: ("pair", "pairs"), ExportFormat.RM_GROUPS: ("ranked group", "ranked groups")}
# Below these a run still starts (a warning, not a refusal). Training: fewer than 50 comparisons are a few
# optimizer steps at the reward model's batch size of 8, too few to learn the labelers' preference from.
# Validation: the fewest comparisons whose 95% Wilson interval around a typical reward model's accuracy
# (0.65) stays above 0.5, so that the figure can tell the model from chance: 43 (at 20 it reads 0.43 to 0.82).
MIN_TRAIN = 50
TYPICAL_ACCURACY = 0.65
MIN_VALIDATION = next(n for n in count(1) if wilson_interval(TYPICAL_ACCURACY * n, n)[0] > 0.5)


class RetrainError(ValueError):
    """The data asked for is not one the round offers; nothing was exported."""


@dataclass(frozen=True)
class RetrainData:
    """One choice of data: its rows and questions, and how a run with the default settings splits them."""

    scope: str
    export_format: str
    rows: int
    questions: int
    train: int
    validation: int
    warnings: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.scope}:{self.export_format}"

    @property
    def label(self) -> str:
        return f"{SCOPES[self.scope]}: {self.export_format}"

    @property
    def details(self) -> str:
        return SCOPE_DETAILS[self.scope]

    @property
    def noun(self) -> str:
        return NOUNS[self.export_format][self.rows != 1]


def retrain_formats(batches: Iterable[FeedbackBatch]) -> list[str]:
    """The reward-model formats of the round's batches (rankings train from ``rm-groups``, comparisons from
    ``rm-pairs``); ``rm-pairs`` when it has none that judge comparisons, as the data so far still does."""
    templates = {batch.template for batch in batches}
    formats = [ExportFormat.RM_PAIRS] if templates & set(COMPARISON_TEMPLATES) else []
    formats += [ExportFormat.RM_GROUPS] if "ranking" in templates else []
    return formats or [ExportFormat.RM_PAIRS]


def retrain_filters(round_: Round, scope: str) -> dict:
    """The export filters of a choice; the eval split is always left out (training refuses it)."""
    if scope == "so_far":
        return export_filters(up_to_round=round_.number, exclude_eval=True)
    return export_filters(round_only=round_.number, exclude_eval=True)


def retrain_options(batches: Iterable[FeedbackBatch]) -> list[str]:
    """The keys (``scope:format``) of the choices the round offers, the default first."""
    formats = retrain_formats(batches)
    return [f"{scope}:{export_format}" for scope in SCOPES for export_format in formats]


def retrain_data(round_: Round, batches: Iterable[FeedbackBatch]) -> list[RetrainData]:
    """Every choice the round offers, the default first, counted now (a few ints a row, no answer text)."""
    return [counted(round_, *key.split(":")) for key in retrain_options(batches)]


def counted(round_: Round, scope: str, export_format: str) -> RetrainData:
    questions = [str(pk) for pk in row_questions(export_format, retrain_filters(round_, scope))]
    defaults = RMConfig()
    # The training run's own split (by question, the same fraction and seed), so these are its numbers.
    train, validation = held_out_split(questions, str, defaults.validation_fraction, defaults.seed)
    return RetrainData(
        scope=scope,
        export_format=export_format,
        rows=len(questions),
        questions=len(set(questions)),
        train=len(train),
        validation=len(validation),
        warnings=tuple(too_few(len(train), len(validation), export_format)),
    )


def counting(number: int, export_format: str = ExportFormat.RM_PAIRS) -> str:
    """ "1 pair", "3 pairs", "2 ranked groups"."""
    return f"{number} {NOUNS[export_format][number != 1]}"


def too_few(train: int, validation: int, export_format: str = ExportFormat.RM_PAIRS) -> list[str]:
    """Why a run on this many rows would mislead, in a researcher's words (nothing when it would not)."""
    if train == 0:
        many = NOUNS[export_format][1]
        return [f"No {many} to train on yet: judge the round's batches first, or choose the data so far."]
    warnings = []
    if train < MIN_TRAIN:
        warnings.append(
            f"Only {counting(train, export_format)} to train on: fewer than {MIN_TRAIN} are a few optimizer "
            "steps, too few for the reward model to learn the labelers' preference."
        )
    if validation < MIN_VALIDATION:
        low, high = wilson_interval(TYPICAL_ACCURACY * validation, validation)
        warnings.append(
            f"Only {counting(validation, export_format)} to validate on: an accuracy of "
            f"{TYPICAL_ACCURACY:.2f} would read {low:.2f} to {high:.2f} (95% interval), too wide to tell "
            f"the model from chance (that takes {MIN_VALIDATION} or more)."
        )
    return warnings


def request_retrain_export(user: AnyUser | None, round_: Round, key: str) -> Export:
    """Queue the export of one of the round's choices (its ``scope:format`` key) on the exports queue,
    audited with the round."""
    scope, _, export_format = key.partition(":")
    if scope not in SCOPES or export_format not in NOUNS:
        raise RetrainError(f"The round offers no data {key!r}.")
    filters = retrain_filters(round_, scope)
    with transaction.atomic():
        export = request_export(user, export_format, filters)
        log_action(user, "round.retrain_export", round_, export=export.pk, scope=scope)
    return export
