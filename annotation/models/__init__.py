"""Annotation data: the question bank, demonstrations and feedback tasks."""

from annotation.models.demonstrations import (
    DemonstrationBatch,
    Episode,
    EpisodeAction,
    EpisodeKind,
    EpisodeStatus,
)
from annotation.models.exports import Export, ExportFormat, ExportStatus, ImportedComparison
from annotation.models.feedback import (
    Answer,
    Assignment,
    AssignmentRevision,
    AssignmentStatus,
    FeedbackBatch,
    FeedbackItem,
    FlagDecision,
    FlagReview,
    Preset,
    SourceKind,
    Template,
)
from annotation.models.questions import Question, QuestionImport, Split
from annotation.models.workforce import (
    DEMONSTRATION,
    DemonstrationReview,
    Invitation,
    Qualification,
    QualificationEvent,
    QualificationState,
    TimeCorrection,
    work_kind,
)

__all__ = [
    "DEMONSTRATION",
    "Answer",
    "Assignment",
    "AssignmentRevision",
    "AssignmentStatus",
    "DemonstrationBatch",
    "DemonstrationReview",
    "Episode",
    "EpisodeAction",
    "EpisodeKind",
    "EpisodeStatus",
    "Export",
    "ExportFormat",
    "ExportStatus",
    "FeedbackBatch",
    "FeedbackItem",
    "FlagDecision",
    "FlagReview",
    "ImportedComparison",
    "Invitation",
    "Preset",
    "Qualification",
    "QualificationEvent",
    "QualificationState",
    "Question",
    "QuestionImport",
    "SourceKind",
    "Split",
    "Template",
    "TimeCorrection",
    "work_kind",
]
