"""What an export request may ask for: the one check of a request and the one builder of its filters, used
alike by the console page, the API and the ``export_dataset`` command (each only maps its own field names
and shows the error its own way)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from annotation.exports.parquet import SCHEMAS
from annotation.feedback.run_source import rounds, sampling_runs
from annotation.models import ExportFormat, FeedbackBatch, Split, Template

# Model judgements (a judge run's, ``judging``) go only where each row says whose judgement it is.
MODEL_JUDGEMENT_FORMATS = (ExportFormat.COMPARISONS_FULL,)

FILE_TYPES = (("jsonl", "JSONL"), ("parquet", "Parquet"))
PARQUET_FORMATS = tuple(SCHEMAS)
SOURCES = (
    ("both", "Platform and imported"),
    ("platform", "Platform only"),
    ("imported", "Imported only"),
)
# Which episodes the demonstrations and bc-pairs exports hold. Human demonstrations by default, so an export
# made as before (and the behaviour cloning trained on it) never takes in model samples unasked.
EPISODE_KINDS = (
    ("human", "Human demonstrations"),
    ("model", "Model samples"),
    ("all", "Both"),
)
PARQUET_HELP = f"Parquet is for the {' and '.join(PARQUET_FORMATS)} formats; the others are JSONL only."


class ExportRequestError(ValueError):
    """The export cannot be made as asked; ``field`` names the input at fault (``export_format``,
    ``file_type``, or a filter's name). Nothing was queued or written."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def file_types(export_format: str) -> tuple[str, ...]:
    """The file types this format is written in (JSONL always; Parquet where it has a schema)."""
    return ("jsonl", "parquet") if export_format in SCHEMAS else ("jsonl",)


def check_file_type(export_format: str, file_type: str) -> None:
    """The format exists and is written in this file type; ExportRequestError otherwise."""
    if export_format not in ExportFormat.values:
        raise ExportRequestError("export_format", f"There is no export format {export_format!r}.")
    if file_type not in dict(FILE_TYPES):
        raise ExportRequestError("file_type", f"The file type is JSONL or Parquet, not {file_type!r}.")
    if file_type not in file_types(export_format):
        raise ExportRequestError("file_type", f"{export_format} is written as JSONL only. {PARQUET_HELP}")


def check_batch(batch: int | None) -> None:
    if batch is not None and not FeedbackBatch.objects.filter(pk=batch).exists():
        raise ExportRequestError("batch", f"There is no feedback batch {batch}.")


def check_sampling_run(sampling_run: int | None) -> None:
    if sampling_run is not None and not sampling_runs().objects.filter(pk=sampling_run).exists():
        raise ExportRequestError("sampling_run", f"There is no sampling run {sampling_run}.")


def check_rounds(round_only: int | None, up_to_round: int | None) -> dict[str, int]:
    """The round filters as stored (only those set, so filters without them stay as they were), or
    ExportRequestError: the round must exist, and one round filter at a time."""
    if round_only is not None and up_to_round is not None:
        raise ExportRequestError("round_only", "Choose one round filter: a round's own or up to a round.")
    named = {"round_only": round_only, "up_to_round": up_to_round}
    for name, number in named.items():
        if number is not None and not rounds().objects.filter(number=number).exists():
            raise ExportRequestError(name, f"There is no round {number}.")
    return {name: number for name, number in named.items() if number is not None}


def episode_kind_for(episode_kind: str | None, sampling_run: int | None) -> str:
    """The kind of episodes exported: a sampling run's episodes are all model samples, so naming a run
    implies "model" whatever the kind field says (its default, "human", would otherwise match none)."""
    if sampling_run is not None:
        return "model"
    episode_kind = episode_kind or "human"
    if episode_kind not in dict(EPISODE_KINDS):
        message = f"The episode kind is human, model or all, not {episode_kind!r}."
        raise ExportRequestError("episode_kind", message)
    return episode_kind


def export_filters(
    *,
    batch: int | None = None,
    split: str | None = None,
    template: str | None = None,
    labeler: str | None = None,
    since: date | None = None,
    until: date | None = None,
    source: str | None = "both",
    include_flagged: bool = True,
    include_gold: bool = True,
    include_late: bool = False,
    episode_kind: str | None = "human",
    sampling_run: int | None = None,
    exclude_eval: bool = False,
    round_only: int | None = None,
    up_to_round: int | None = None,
    include_model_judgements: bool = False,
) -> dict[str, Any]:
    """The filters as the job reads them (JSON on the export row: ids, ISO dates, None for "any");
    ExportRequestError for a value that no export can use. ``episode_kind`` and ``sampling_run`` narrow
    the episodes of the demonstrations and bc-pairs exports; ``exclude_eval`` leaves out the questions of the
    eval split, which training refuses (data for a reward model from a run that sampled every split).
    ``round_only`` (a round's number) keeps the judgements of the batches made from that round's sampling
    runs; ``up_to_round`` keeps everything collected up to that round (every batch but those of later
    rounds only, and the imported comparisons): a round's "Retrain the reward model" data."""
    check_batch(batch)
    rounds = check_rounds(round_only, up_to_round)
    check_sampling_run(sampling_run)
    episode_kind = episode_kind_for(episode_kind, sampling_run)
    if split and split not in Split.values:
        raise ExportRequestError("split", f"There is no question split {split!r}.")
    if exclude_eval and split == Split.EVAL:
        raise ExportRequestError("exclude_eval", "The split is eval and eval is left out: nothing matches.")
    if template and template not in Template.values:
        raise ExportRequestError("template", f"There is no template {template!r}.")
    source = source or "both"
    if source not in dict(SOURCES):
        raise ExportRequestError("source", "The source is both, platform or imported.")
    if since and until and since > until:
        raise ExportRequestError("until", f"'until' ({until}) is before 'since' ({since}): nothing matches.")
    return {
        "batch": batch,
        "split": split or None,
        "include_flagged": include_flagged,
        "include_gold": include_gold,
        "include_late": include_late,
        "template": template or None,
        "labeler": labeler or None,
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "source": source,
        "episode_kind": episode_kind,
        "sampling_run": sampling_run,
        "exclude_eval": bool(exclude_eval),
        **rounds,
        **({"include_model_judgements": True} if include_model_judgements else {}),
    }


def filter_arguments(values: Mapping[str, Any]) -> dict[str, Any]:
    """``export_filters``' arguments from the page's fields or the command's options, which share their
    names and ask "leave out" of flagged and gold judgements where the API asks "include"."""
    named = (
        "batch",
        "split",
        "template",
        "labeler",
        "since",
        "until",
        "source",
        "include_late",
        "episode_kind",
        "sampling_run",
        "exclude_eval",
    )
    return {
        **{name: values[name] for name in named},
        "include_flagged": not values["exclude_flagged"],
        "include_gold": not values["exclude_gold"],
        "include_model_judgements": bool(values.get("include_model_judgements")),
    }


def clean_export_request(export_format: str, file_type: str, **filters: Any) -> dict[str, Any]:
    """Check a whole request; its filters (see ``export_filters``), or ExportRequestError."""
    check_file_type(export_format, file_type)
    if filters.get("include_model_judgements") and export_format not in MODEL_JUDGEMENT_FORMATS:
        message = (
            f"Model judgements are exported in the {', '.join(MODEL_JUDGEMENT_FORMATS)} format only, where "
            "each row says whose judgement it is."
        )
        raise ExportRequestError("include_model_judgements", message)
    return export_filters(**filters)


def describe_filters(filters: Mapping[str, Any]) -> list[str]:
    """An export's filters as a person reads them, one phrase each, defaults left out ("everything" when
    nothing narrows it): what the export page shows instead of the stored JSON. Judgements excluded on
    flag review are never exported, whatever the filters (``rows.submitted_judgements``): the export page
    says so once, not as a filter."""
    filters = filters if isinstance(filters, Mapping) else {}
    phrases = []
    named = (
        ("batch", "feedback batch {}"),
        ("split", "questions of the {} split"),
        ("template", "template {}"),
        ("labeler", "labeler {}"),
        ("since", "from {}"),
        ("until", "until {}"),
        ("sampling_run", "samples of sampling run {}"),
        ("round_only", "the judgements of round {}'s batches"),
        ("up_to_round", "everything collected up to round {} (later rounds' batches left out)"),
    )
    for key, phrase in named:
        if filters.get(key) not in (None, ""):
            phrases.append(phrase.format(filters[key]))
    if filters.get("exclude_eval"):
        phrases.append("eval questions left out")
    if filters.get("source") not in (None, "", "both"):
        phrases.append(dict(SOURCES).get(filters["source"], str(filters["source"])).lower())
    if filters.get("include_flagged") is False:
        phrases.append("flagged judgements left out")
    if filters.get("include_gold") is False:
        phrases.append("gold items left out")
    if filters.get("include_late"):
        phrases.append("late submissions included")
    if filters.get("include_model_judgements"):
        phrases.append("judge runs' model judgements included (marked as a model's)")
    if filters.get("episode_kind") not in (None, "", "human") and filters.get("sampling_run") is None:
        phrases.append(dict(EPISODE_KINDS).get(filters["episode_kind"], str(filters["episode_kind"])).lower())
    return phrases or ["everything"]
