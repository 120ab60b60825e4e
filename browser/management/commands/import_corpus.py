"""``manage.py import_corpus NAME PATH``: add pages to a corpus's search index, all or nothing.

The records stream into the index (any size of corpus, bounded memory); progress goes to stdout: a bar
redrawn in place on a terminal, else a line every PROGRESS_LINE_EVERY records (for logs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from browser.corpus.readers import FORMATS
from browser.corpus.records import CorpusFileError
from browser.services import import_corpus

PROGRESS_LINE_EVERY = 10_000  # records between progress lines when stdout is not a terminal
BAR_WIDTH = 30


class Command(BaseCommand):
    help = (
        "Import a corpus: JSONL {url,title,text|html}, a folder of HTML/text files, FreshWiki JSON, or a ZIM."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="corpus name (a slug), created if new")
        parser.add_argument("path", type=Path)
        parser.add_argument("--format", choices=FORMATS, dest="source_format", help="default: detected")
        parser.add_argument("--base-url", help="URL prefix for folder and ZIM pages")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder")
        tty = self.stdout.isatty()
        try:
            report = import_corpus(
                options["name"],
                path,
                source_format=options["source_format"],
                base_url=options["base_url"],
                on_progress=self._redraw if tty else self._line,
            )
        except CorpusFileError as exc:
            raise CommandError(f"{exc}; the corpus is unchanged") from None
        except ValidationError:
            raise CommandError(
                f"{options['name']!r}: a corpus name uses letters, digits, - and _ only"
            ) from None
        finally:
            if tty:
                self.stdout.write("")  # end the bar's line (also before an error)
        self.stdout.write(
            f"{report.corpus.name}: {report.record_count} pages imported ({report.source_format}); "
            f"{report.corpus.document_count} pages in the corpus"
        )

    def _line(self, done: int, total: int | None) -> None:
        if done and done % PROGRESS_LINE_EVERY == 0:
            self.stdout.write(f"{done} records" + (f" of {total}" if total else "") + " indexed")

    def _redraw(self, done: int, total: int | None) -> None:
        if total:
            filled = BAR_WIDTH * min(done, total) // total
            bar = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done} of {total} records"
        else:  # total unknown while streaming (a ZIM): a count only
            bar = f"{done} records indexed"
        self.stdout.write(f"\r{bar}", ending="")
        self.stdout.flush()
