"""Annotation data: the question bank and demonstrations (feedback tasks follow)."""

from annotation.models.demonstrations import DemonstrationBatch, Episode, EpisodeAction, EpisodeStatus
from annotation.models.questions import Question, QuestionImport, Split

__all__ = [
    "DemonstrationBatch",
    "Episode",
    "EpisodeAction",
    "EpisodeStatus",
    "Question",
    "QuestionImport",
    "Split",
]
