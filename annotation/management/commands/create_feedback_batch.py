"""``manage.py create_feedback_batch NAME --template T``: a batch of comparisons, rankings or ratings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.feedback.batches import (
    SOURCES,
    BatchError,
    BatchSettings,
    check_batch_request,
    create_batch_from_source,
)
from annotation.feedback.scales import RATING_PRESETS, TEMPLATES
from annotation.questions.formats import QuestionFileError

# The check names BatchSettings' fields; how this command spells those that are not plain options.
OPTIONS = {
    "name": "NAME",
    "answers_file": "--answers",
    "gold_pairs": "--gold",
    "lease_seconds": "--lease-minutes",
    "revision_seconds": "--revision-minutes",
}


class Command(BaseCommand):
    help = (
        "Create a feedback batch from finished demonstrations, the answers in the bank, or an answers file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--template", required=True, choices=[code for code, _ in TEMPLATES])
        parser.add_argument("--preset", default="", choices=["", *RATING_PRESETS], help="for rating batches")
        parser.add_argument("--source", default="demonstrations", choices=[code for code, _ in SOURCES])
        parser.add_argument("--answers", type=Path, help="answers JSONL (with --source file)")
        parser.add_argument("--overlap", type=int, default=1)
        parser.add_argument("--required-probability", type=float, default=0.1)
        parser.add_argument("--always-required", default="", help="comma-separated field codes")
        parser.add_argument("--instructions", default="")
        parser.add_argument("--lease-minutes", type=int, default=30)
        parser.add_argument("--revision-minutes", type=int, default=60, help="how long a labeler may revise")
        parser.add_argument("--gold", default="", help="gold comparisons: '12>34;56=78' (answer ids)")

    def handle(self, *args: Any, **options: Any) -> None:
        config = BatchSettings(
            name=options["name"],
            template=options["template"],
            preset=options["preset"],
            instructions=options["instructions"],
            overlap=options["overlap"],
            required_probability=options["required_probability"],
            always_required=[c.strip() for c in options["always_required"].split(",") if c.strip()] or None,
            lease_seconds=options["lease_minutes"] * 60,
            revision_seconds=options["revision_minutes"] * 60,
        )
        gold = options["gold"].replace(";", "\n")
        try:  # the same check as the console form's and the API's, before any file is read
            check_batch_request(config, options["source"], options["answers"] is not None, gold)
            data = options["answers"].read_bytes() if options["answers"] else None
            batch = create_batch_from_source(None, config, options["source"], data, gold_pairs=gold)
        except OSError as exc:
            raise CommandError(f"{options['answers']}: {exc.strerror}") from None
        except BatchError as exc:
            where = f"{OPTIONS.get(exc.field) or '--' + exc.field.replace('_', '-')}: " if exc.field else ""
            raise CommandError(f"{where}{exc.message.rstrip('.')}; nothing was created") from None
        except QuestionFileError as exc:
            raise CommandError(f"{exc}; nothing was created") from None
        self.stdout.write(f"batch {batch.pk} {batch.name!r}: {batch.items.count()} items ({batch.template})")
