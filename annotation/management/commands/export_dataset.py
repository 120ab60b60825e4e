"""``manage.py export_dataset --format F [filters] [--file-type T] [-o FILE]``: the export job, run here."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.exports.rules import (
    EPISODE_KINDS,
    FILE_TYPES,
    SOURCES,
    ExportRequestError,
    clean_export_request,
    filter_arguments,
)
from annotation.exports.service import export_now, export_path
from annotation.models import ExportFormat, Split
from core.storage import EXPORTS, get_storage


class Command(BaseCommand):
    help = (
        "Run a dataset export in this process, as the exports worker would (one consistent snapshot, a job "
        "row listed in the console, the file in the exports storage with its sha256); -o copies it out."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=ExportFormat.values, dest="export_format")
        parser.add_argument(
            "--file-type",
            choices=[code for code, _ in FILE_TYPES],
            help="default: parquet if the output's name ends in .parquet, else jsonl",
        )
        parser.add_argument("--batch", type=int, help="only this feedback batch")
        parser.add_argument("--split", choices=Split.values, help="only questions of this split")
        parser.add_argument(
            "--exclude-eval", action="store_true", help="leave out eval-split questions (training data)"
        )
        parser.add_argument("--template", help="only judgements of this template")
        parser.add_argument("--labeler", help="only this labeler's judgements (user name)")
        parser.add_argument(
            "--since", type=date.fromisoformat, help="submitted or finished on or after (YYYY-MM-DD)"
        )
        parser.add_argument("--until", type=date.fromisoformat, help="submitted or finished on or before")
        parser.add_argument("--source", choices=[code for code, _ in SOURCES], default="both")
        parser.add_argument("--exclude-flagged", action="store_true", help="comparisons flagged for review")
        parser.add_argument("--exclude-gold", action="store_true")
        parser.add_argument(
            "--include-late", action="store_true", help="late submissions (the slot went to someone else)"
        )
        parser.add_argument(
            "--include-model-judgements",
            action="store_true",
            help="comparisons-full: judge runs' judgements too, each marked as a model's",
        )
        parser.add_argument(
            "--episode-kind",
            choices=[code for code, _ in EPISODE_KINDS],
            default="human",
            help="demonstrations and bc-pairs: human demonstrations (default), model samples or all",
        )
        parser.add_argument(
            "--sampling-run", type=int, help="demonstrations and bc-pairs: only this sampling run's samples"
        )
        parser.add_argument("-o", "--output", type=Path, help="also copy the finished file here")

    def handle(self, *args: Any, **options: Any) -> None:
        output: Path | None = options["output"]
        file_type = options["file_type"] or (
            "parquet" if output is not None and output.suffix == ".parquet" else "jsonl"
        )
        try:
            filters = clean_export_request(options["export_format"], file_type, **filter_arguments(options))
        except ExportRequestError as exc:
            raise CommandError(f"{exc.field}: {exc.message} Nothing was exported.") from None
        export = export_now(None, options["export_format"], filters, file_type)
        path = get_storage(EXPORTS).describe(export.file_name)  # a path here, or s3://bucket/key
        if output is not None:
            try:
                shutil.copyfile(export_path(export), output)
            except OSError as exc:
                raise CommandError(f"{output}: {exc.strerror}; the export is still at {path}") from None
            path = output
        self.stdout.write(
            f"{path}: {export.row_count} rows ({export.export_format}, {export.file_type}); "
            f"export {export.pk}, sha256 {export.sha256}"
        )
