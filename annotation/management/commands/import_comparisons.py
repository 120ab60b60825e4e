"""``manage.py import_comparisons FILE``: WebGPT-format comparisons (raw pairs or flattened rows, JSONL; or
flattened rows in Parquet, recognised by the file's first bytes whatever its name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.exports.comparisons_import import (
    PARQUET_MAGIC,
    import_comparisons,
    import_comparisons_parquet,
)
from annotation.questions.formats import QuestionFileError


class Command(BaseCommand):
    help = "Import comparisons in the public WebGPT format; all or nothing, re-imports add nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--source", help="a name for where they came from (default: the file name)")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        source = options["source"] or path.name
        try:
            with path.open("rb") as file:
                is_parquet = file.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC
            if is_parquet:
                created = import_comparisons_parquet(path, source=source)
            else:
                created = import_comparisons(path.read_bytes(), source=source)
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None
        except QuestionFileError as exc:
            raise CommandError(f"{path}: {exc}; nothing was imported") from None
        self.stdout.write(f"{path.name}: {created} comparisons imported")
