"""API representations. Read serializers expose what each role may see; input serializers check a body's
shape before it reaches a service (the services keep every business rule)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.api.strict import StrictSerializer
from annotation.exports.rules import EPISODE_KINDS as EXPORT_EPISODE_KINDS
from annotation.exports.rules import FILE_TYPES as EXPORT_FILE_TYPES
from annotation.exports.rules import (
    PARQUET_HELP,
    ExportRequestError,
    check_batch,
    check_sampling_run,
    clean_export_request,
)
from annotation.exports.rules import SOURCES as EXPORT_SOURCES
from annotation.feedback.batch_settings import model_default
from annotation.feedback.batches import MAX_NAME as MAX_BATCH_NAME
from annotation.feedback.batches import (
    PAIRS_PER_QUESTION,
    BatchError,
    BatchSettings,
    check_batch_request,
)
from annotation.feedback.batches import SOURCES as BATCH_SOURCES
from annotation.feedback.scales import RANKING_TAG_SETS, RATING_PRESETS, TEMPLATES
from annotation.feedback.stats import batch_progress
from annotation.models import (
    Answer,
    Episode,
    EpisodeAction,
    Export,
    ExportFormat,
    FeedbackBatch,
    Question,
    QuestionImport,
    Split,
    Template,
)
from annotation.questions.formats import FORMATS
from core.inputs import MAX_ID


class QuestionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Question
        fields = (
            "id",
            "text",
            "dataset",
            "external_id",
            "split",
            "reference_answers",
            "metadata",
            "source_import",
            "created_at",
        )


class QuestionImportSerializer(serializers.ModelSerializer):
    class Meta:
        model = QuestionImport
        fields = (
            "id",
            "filename",
            "file_format",
            "dataset",
            "sha256",
            "created_count",
            "duplicate_count",
            "duplicates",
            "created_at",
        )


@extend_schema_field(OpenApiTypes.BINARY)
class UploadField(serializers.FileField):
    """An uploaded file. The schema says binary, so the docs page offers a file picker; a plain FileField
    would be described as the URL a stored file reads back as."""


class QuestionImportInput(StrictSerializer):
    file = UploadField()
    dataset = serializers.SlugField(required=False, allow_blank=True, max_length=100)
    format = serializers.ChoiceField(choices=[*FORMATS], required=False, allow_blank=True)
    explain_statements = serializers.BooleanField(required=False, allow_null=True, default=None)


class EpisodeActionSerializer(serializers.ModelSerializer):
    class Meta:
        model = EpisodeAction
        fields = ("index", "command", "valid", "message", "observation_before", "created_at")


class EpisodeSerializer(serializers.ModelSerializer):
    """A human demonstration (``kind`` human: ``user`` is its demonstrator) or a model sample (``kind``
    model: no user, ``policy`` names the model)."""

    question = serializers.CharField(source="question.text", read_only=True)
    # A plain string in the schema: an enum here would collide by name with the training kinds' enums.
    kind = serializers.CharField(read_only=True, help_text="human (a demonstration) or model (a sample)")
    user = serializers.SerializerMethodField(help_text="The demonstrator's user name; null for a sample")
    policy = serializers.SerializerMethodField(help_text="The model that sampled it; null for a human")
    quotes = serializers.SerializerMethodField()

    class Meta:
        model = Episode
        fields = (
            "id",
            "question",
            "question_id",
            "kind",
            "user",
            "policy",
            "status",
            "end_reason",
            "corpus",
            "answer",
            "note",
            "quotes",
            "started_at",
            "finished_at",
            "active_seconds",
        )

    def get_user(self, episode: Episode) -> str | None:
        return episode.user.get_username() if episode.user is not None else None

    def get_policy(self, episode: Episode) -> str | None:
        return episode.policy or None

    def get_quotes(self, episode: Episode) -> list[dict[str, Any]]:
        return list((episode.state or {}).get("quotes") or [])


class EpisodeDetailSerializer(EpisodeSerializer):
    actions = EpisodeActionSerializer(many=True, read_only=True)

    class Meta(EpisodeSerializer.Meta):
        fields = (*EpisodeSerializer.Meta.fields, "actions")


class AnswerSerializer(serializers.ModelSerializer):
    class Meta:
        model = Answer
        fields = ("id", "question", "text", "quotes", "source_kind", "source", "episode", "created_at")


class BatchSerializer(serializers.ModelSerializer):
    """A batch for researchers: its settings, progress, and how its answers were chosen (``origin``:
    source, pairing, the sides' labels, skipped questions with their reasons; ``sampling_runs``: ids)."""

    progress = serializers.SerializerMethodField()
    origin = serializers.JSONField(read_only=True)
    sampling_runs = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = FeedbackBatch
        fields = (
            "id",
            "name",
            "template",
            "preset",
            "instructions",
            "overlap",
            "priority",
            "required_probability",
            "always_required",
            "lease_seconds",
            "revision_seconds",
            "is_screening",
            "agreement_cutoff",
            "flag_cutoff",
            "gold_threshold",
            "gold_min_items",
            "max_overlap",
            "rank_agreement_threshold",
            "is_active",
            "created_at",
            "progress",
            "origin",
            "sampling_runs",
        )

    def get_progress(self, batch: FeedbackBatch) -> dict[str, int]:
        return batch_progress(batch)


class BatchCreateInput(StrictSerializer):
    """The console's batch form: JSON when the answers come from the demonstrations or the whole bank,
    multipart with ``answers_file`` (answers JSONL, as ``import_answers`` reads it) for ``source=file``.
    Checked by ``batches.check_batch_request``, the same check as the form's and the command's."""

    name = serializers.CharField(help_text=f"At most {MAX_BATCH_NAME} characters")
    template = serializers.ChoiceField(choices=TEMPLATES)
    preset = serializers.ChoiceField(
        choices=[*RATING_PRESETS, *RANKING_TAG_SETS],
        required=False,
        allow_blank=True,
        default="",
        help_text="Ratings: the criteria (required); rankings: the metadata set (default webgpt)",
    )
    source = serializers.ChoiceField(choices=[code for code, _ in BATCH_SOURCES])
    answers_file = UploadField(
        required=False, help_text="source=file only: JSONL {question_id or question, answer, quotes, source}"
    )
    overlap = serializers.IntegerField(default=1, help_text="Labelers per item, 1-10")
    priority = serializers.IntegerField(
        default=1, help_text="Share of each labeler's next tasks against the other active batches, 1-10"
    )
    required_probability = serializers.FloatField(
        default=0.1, help_text="Probability that every part of a task is required, 0-1"
    )
    always_required = serializers.ListField(
        child=serializers.CharField(max_length=50),
        required=False,
        allow_null=True,
        default=None,
        help_text="Field codes required in every task (null: the template's default)",
    )
    instructions = serializers.CharField(required=False, allow_blank=True, default="")
    lease_seconds = serializers.IntegerField(default=1800, help_text="60 s to 24 h")
    revision_seconds = serializers.IntegerField(
        default=3600, help_text="How long after submitting a labeler may revise: 0 s to 7 days"
    )
    gold_pairs = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Comparisons only: '12 > 34' or '12 = 34' a line",
    )
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        required=False,
        default=list,
        help_text="source=runs only: 1 or 2 finished sampling run ids",
    )
    vs_demonstrations = serializers.BooleanField(
        default=False,
        help_text="source=runs, comparisons of one run: its chosen answer vs a human demonstration",
    )
    pairs_per_question = serializers.IntegerField(
        default=1,
        help_text=f"source=runs, comparisons of one run: pairs per question, {PAIRS_PER_QUESTION[0]}-"
        f"{PAIRS_PER_QUESTION[1]}",
    )
    include_declined = serializers.BooleanField(
        default=False, help_text="source=runs: pair the answers to questions a run declined too"
    )
    demonstration_batch = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=MAX_ID,
        help_text="template=step_review, source=demonstrations: the episodes of this demonstration batch "
        "(null: every finished demonstration)",
    )
    judged_worse = serializers.BooleanField(
        default=False,
        help_text="template=step_review, source=runs: only the episodes whose answer a comparison judged "
        "worse",
    )
    is_screening = serializers.BooleanField(
        default=model_default("is_screening"),
        help_text="A screening test: every applicant for its kind of work judges every item (overlap and "
        "max_overlap do not apply)",
    )
    agreement_cutoff = serializers.FloatField(
        default=model_default("agreement_cutoff"),
        help_text="Screening: soft cutoff on agreement with the references' preferences or rankings, 0-1",
    )
    flag_cutoff = serializers.FloatField(
        default=model_default("flag_cutoff"),
        help_text="Screening: soft cutoff on agreement with the references' question flags, 0-1",
    )
    gold_threshold = serializers.FloatField(
        default=model_default("gold_threshold"),
        help_text="Pause a labeler for this kind of work under this rolling gold accuracy, 0-1",
    )
    gold_min_items = serializers.IntegerField(
        default=model_default("gold_min_items"),
        help_text="Gold judgements before the pause may apply, 1-1000",
    )
    max_overlap = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Adaptive overlap: an item whose judgements disagree asks for one more labeler, up to this "
        "many (overlap-10; null: never). Comparisons and rankings only: ratings never ask for more",
    )
    rank_agreement_threshold = serializers.FloatField(
        default=model_default("rank_agreement_threshold"),
        help_text="Rankings with max_overlap: two rankings disagree when their Kendall tau-b is under this "
        "(-1 to 1)",
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        settings = self._settings(data)
        try:
            check_batch_request(
                settings, data["source"], data.get("answers_file") is not None, data["gold_pairs"]
            )
        except BatchError as exc:
            raise serializers.ValidationError({exc.field or "non_field_errors": exc.message}) from None
        return data

    def batch_settings(self) -> BatchSettings:
        return self._settings(self.validated_data)

    @staticmethod
    def _settings(data: dict[str, Any]) -> BatchSettings:
        return BatchSettings(
            name=data["name"],
            template=data["template"],
            preset=data["preset"],
            instructions=data["instructions"],
            overlap=data["overlap"],
            priority=data["priority"],
            required_probability=data["required_probability"],
            always_required=data["always_required"] or None,
            lease_seconds=data["lease_seconds"],
            revision_seconds=data["revision_seconds"],
            runs=data["runs"],
            vs_demonstrations=data["vs_demonstrations"],
            pairs_per_question=data["pairs_per_question"],
            include_declined=data["include_declined"],
            demonstration_batch=data["demonstration_batch"],
            judged_worse=data["judged_worse"],
            is_screening=data["is_screening"],
            agreement_cutoff=data["agreement_cutoff"],
            flag_cutoff=data["flag_cutoff"],
            gold_threshold=data["gold_threshold"],
            gold_min_items=data["gold_min_items"],
            max_overlap=data["max_overlap"],
            rank_agreement_threshold=data["rank_agreement_threshold"],
        )


class ExportSerializer(serializers.ModelSerializer):
    format = serializers.CharField(source="export_format", read_only=True)

    class Meta:
        model = Export
        fields = (
            "id",
            "format",
            "file_type",
            "filters",
            "status",
            "progress",
            "row_count",
            "file_name",
            "sha256",
            "error",
            "created_at",
            "finished_at",
        )


class ExportCreateInput(StrictSerializer):
    """An export request: the format, the file type, and filters that narrow which judgements or
    demonstrations it holds (all optional). Checked by ``rules.clean_export_request``, the same check as
    the console page's and the ``export_dataset`` command's."""

    format = serializers.ChoiceField(
        choices=ExportFormat.choices,
        help_text="The dataset's layout (docs/data-formats.md); file_type says JSONL or Parquet",
    )
    file_type = serializers.ChoiceField(choices=EXPORT_FILE_TYPES, default="jsonl", help_text=PARQUET_HELP)
    batch = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="Only this feedback batch's judgements"
    )
    split = serializers.ChoiceField(
        choices=Split.choices,
        required=False,
        allow_null=True,
        allow_blank=True,
        help_text="Questions of this split only",
    )
    include_flagged = serializers.BooleanField(default=True, help_text="Judgements flagged for review")
    include_gold = serializers.BooleanField(default=True, help_text="Gold items")
    include_late = serializers.BooleanField(
        default=False,
        help_text="Late submissions (stored after the slot went to another labeler): left out by default",
    )
    exclude_eval = serializers.BooleanField(
        default=False, help_text="Leave out the eval split's questions (training refuses them)"
    )
    include_model_judgements = serializers.BooleanField(
        default=False,
        help_text="comparisons-full only: judge runs' judgements too, each marked as a model's "
        '(source "model", the judge and its prompt version); left out by default',
    )
    template = serializers.ChoiceField(choices=Template.choices, required=False, allow_null=True)
    labeler = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=150,
        help_text="Only this labeler's judgements (user name)",
    )
    since = serializers.DateField(
        required=False, allow_null=True, help_text="Submitted or finished on or after (YYYY-MM-DD)"
    )
    until = serializers.DateField(
        required=False, allow_null=True, help_text="Submitted or finished on or before (YYYY-MM-DD)"
    )
    source = serializers.ChoiceField(
        choices=EXPORT_SOURCES, default="both", help_text="Comparisons judged here, imported ones, or both"
    )
    episode_kind = serializers.ChoiceField(
        choices=EXPORT_EPISODE_KINDS,
        default="human",
        help_text="Demonstrations and bc-pairs: human demonstrations (default), model samples, or all",
    )
    sampling_run = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Demonstrations and bc-pairs: only this sampling run's samples (implies model)",
    )

    def validate_batch(self, batch: int | None) -> int | None:
        try:  # here too, so a bad batch is reported with the other fields' errors
            check_batch(batch)
        except ExportRequestError as exc:
            raise serializers.ValidationError(exc.message) from None
        return batch

    def validate_sampling_run(self, sampling_run: int | None) -> int | None:
        try:
            check_sampling_run(sampling_run)
        except ExportRequestError as exc:
            raise serializers.ValidationError(exc.message) from None
        return sampling_run

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        filters = {key: value for key, value in data.items() if key not in ("format", "file_type")}
        try:
            data["filters"] = clean_export_request(data["format"], data["file_type"], **filters)
        except ExportRequestError as exc:
            field = "format" if exc.field == "export_format" else exc.field
            raise serializers.ValidationError({field: exc.message}) from None
        return data
