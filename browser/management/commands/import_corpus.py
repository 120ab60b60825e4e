"""``manage.py import_corpus NAME PATH``: add pages to a corpus's search index, all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from browser.corpus.readers import FORMATS
from browser.corpus.records import CorpusFileError
from browser.services import import_corpus


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
        try:
            report = import_corpus(
                options["name"], path, source_format=options["source_format"], base_url=options["base_url"]
            )
        except CorpusFileError as exc:
            raise CommandError(f"{exc}; the corpus is unchanged") from None
        except ValidationError:
            raise CommandError(
                f"{options['name']!r}: a corpus name uses letters, digits, - and _ only"
            ) from None
        self.stdout.write(
            f"{report.corpus.name}: {report.record_count} pages imported ({report.source_format}); "
            f"{report.corpus.document_count} pages in the corpus"
        )
