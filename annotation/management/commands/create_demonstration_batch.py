"""``manage.py create_demonstration_batch NAME``: questions to demonstrate next, from a dataset or split."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.demonstrations.batches import create_demonstration_batch
from annotation.models import Question, Split
from browser.sources import LOCAL, PROVIDERS, describe_source


class Command(BaseCommand):
    help = "Create an active demonstration batch; demonstrators get its questions before the bc pool."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--dataset", help="only questions of this dataset")
        parser.add_argument("--split", choices=Split.values, help="only questions of this split")
        parser.add_argument("--limit", type=int, help="at most this many questions")
        parser.add_argument("--overlap", type=int, default=1, help="demonstrators per question (1-10)")
        parser.add_argument(
            "--corpus",
            default="",
            help="the corpus its questions are answered with (default: DEFAULT_CORPUS)",
        )
        parser.add_argument(
            "--search",
            default=LOCAL,
            help=f"the search provider: {', '.join(PROVIDERS)} (default: local, which searches --corpus)",
        )
        parser.add_argument(
            "--screening",
            action="store_true",
            help="a screening test: every applicant demonstrates every question (the overlap does not apply)",
        )
        parser.add_argument(
            "--grade-cutoff",
            type=float,
            default=None,
            help="screening: the soft cutoff on the mean 1-7 grade (default 6, InstructGPT's)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        questions = Question.objects.order_by("key")
        if options["dataset"]:
            questions = questions.filter(dataset=options["dataset"])
        if options["split"]:
            questions = questions.filter(split=options["split"])
        ids = list(questions.values_list("pk", flat=True)[: options["limit"]])
        if not ids:
            raise CommandError("no question matches; nothing was created")
        try:
            batch = create_demonstration_batch(
                None,
                options["name"],
                Question.objects.filter(pk__in=ids),
                options["overlap"],
                corpus=options["corpus"],
                search=options["search"],
                is_screening=options["screening"],
                grade_cutoff=options["grade_cutoff"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"batch {batch.pk} {batch.name!r}: {len(ids)} questions, overlap {batch.overlap}, "
            f"{describe_source(batch.search, batch.corpus).lower()}"
            + (f", a screening test (grade cutoff {batch.grade_cutoff:g})" if batch.is_screening else "")
        )
