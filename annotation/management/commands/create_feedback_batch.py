"""``manage.py create_feedback_batch NAME --template T``: a batch of comparisons, rankings or ratings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.feedback.batches import SOURCES, BatchError, BatchSettings, create_batch_from_source
from annotation.feedback.scales import RATING_PRESETS, TEMPLATES
from annotation.questions.formats import QuestionFileError


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
        )
        try:
            data = options["answers"].read_bytes() if options["answers"] else None
            gold = options["gold"].replace(";", "\n")
            batch = create_batch_from_source(None, config, options["source"], data, gold_pairs=gold)
        except OSError as exc:
            raise CommandError(f"{options['answers']}: {exc.strerror}") from None
        except (BatchError, QuestionFileError) as exc:
            raise CommandError(f"{exc}; nothing was created") from None
        self.stdout.write(f"batch {batch.pk} {batch.name!r}: {batch.items.count()} items ({batch.template})")
