"""``manage.py export_dataset --format F [--batch ID] [--split S] -o FILE``: the export job, run here."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.exports.service import write_rows
from annotation.models import ExportFormat, Split


class Command(BaseCommand):
    help = "Write a dataset export (JSONL) synchronously, from one consistent snapshot of the database."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=ExportFormat.values, dest="export_format")
        parser.add_argument("--batch", type=int, help="only this feedback batch")
        parser.add_argument("--split", choices=Split.values, help="only questions of this split")
        parser.add_argument("--template", help="only judgements of this template")
        parser.add_argument("--labeler", help="only this labeler's judgements (user name)")
        parser.add_argument(
            "--since", type=date.fromisoformat, help="submitted or finished on or after (YYYY-MM-DD)"
        )
        parser.add_argument("--until", type=date.fromisoformat, help="submitted or finished on or before")
        parser.add_argument("--source", choices=["both", "platform", "imported"], default="both")
        parser.add_argument("--exclude-flagged", action="store_true", help="comparisons flagged for review")
        parser.add_argument("--exclude-gold", action="store_true")
        parser.add_argument("-o", "--output", type=Path, required=True, help="*.parquet: Parquet, else JSONL")

    def handle(self, *args: Any, **options: Any) -> None:
        filters = {
            "batch": options["batch"],
            "split": options["split"],
            "include_flagged": not options["exclude_flagged"],
            "include_gold": not options["exclude_gold"],
            "template": options["template"],
            "labeler": options["labeler"],
            "since": options["since"].isoformat() if options["since"] else None,
            "until": options["until"].isoformat() if options["until"] else None,
            "source": options["source"],
        }
        file_type = "parquet" if options["output"].suffix == ".parquet" else "jsonl"
        try:
            with options["output"].open("wb") as out:
                count = write_rows(options["export_format"], filters, out, file_type=file_type)
        except ValueError as exc:
            options["output"].unlink(missing_ok=True)
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{options['output']}: {count} rows ({options['export_format']})")
