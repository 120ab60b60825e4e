"""``manage.py import_answers FILE``: answers to judge (model outputs, references), all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.feedback.answers_import import import_answers
from annotation.questions.formats import QuestionFileError


class Command(BaseCommand):
    help = "Import answers JSONL: {question_id or question, answer, quotes: [{title, url, extract}], source}."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        try:
            answers = import_answers(path.read_bytes())
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None
        except QuestionFileError as exc:
            raise CommandError(f"{path}: {exc}; nothing was imported") from None
        self.stdout.write(f"{path.name}: {len(answers)} answers imported")
