"""``manage.py import_questions FILE [--dataset NAME] [--format F]``: load a question file into the bank."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.questions.formats import FORMATS, QuestionFileError
from annotation.questions.service import import_questions


class Command(BaseCommand):
    help = "Import questions (TruthfulQA CSV, TriviaQA JSONL, WebGLM JSONL or plain JSONL). All or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--dataset", help="dataset name (default: from the format or the file name)")
        parser.add_argument("--format", choices=FORMATS, dest="file_format", help="default: detected")
        parser.add_argument(
            "--explain-statements",
            action="store_true",
            default=None,
            help='prefix statements that are not questions with "Explain: " (default only for dataset eli5)',
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None
        try:
            report = import_questions(
                data,
                filename=path.name,
                dataset=options["dataset"],
                file_format=options["file_format"],
                explain_statements=options["explain_statements"],
            )
        except QuestionFileError as exc:
            raise CommandError(f"{path}: {exc}; nothing was imported") from None
        self.stdout.write(
            f"{path.name}: {report.created_count} questions imported ({report.file_format}), "
            f"{report.duplicate_count} duplicates skipped"
        )
        for duplicate in report.duplicates[:10]:
            self.stdout.write(f"  duplicate, line {duplicate['line']}: {duplicate['reason']}")
        if report.duplicate_count > 10:
            self.stdout.write(f"  ... and {report.duplicate_count - 10} more")
