"""``manage.py create_feedback_batch NAME --template T``: a batch of comparisons, rankings or ratings, from
demonstrations, the bank, an answers file or sampling runs (``--from-run N``, once or twice); or of step
reviews of demonstrations' or runs' episodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.feedback.batch_settings import model_default
from annotation.feedback.batches import (
    SOURCES,
    BatchError,
    BatchSettings,
    check_batch_request,
    create_batch_from_source,
)
from annotation.feedback.scales import RANKING_TAG_SETS, RATING_PRESETS, TEMPLATES
from annotation.questions.formats import QuestionFileError

# The check names BatchSettings' fields; how this command spells those that are not plain options.
OPTIONS = {
    "name": "NAME",
    "answers_file": "--answers",
    "gold_pairs": "--gold",
    "lease_seconds": "--lease-minutes",
    "revision_seconds": "--revision-minutes",
    "runs": "--from-run",
    "is_screening": "--screening",
}


class Command(BaseCommand):
    help = (
        "Create a feedback batch from finished demonstrations, the answers in the bank, an answers file, or "
        "the answers of one or two sampling runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--template", required=True, choices=[code for code, _ in TEMPLATES])
        parser.add_argument(
            "--preset",
            default="",
            choices=["", *RATING_PRESETS, *RANKING_TAG_SETS],
            help="rating batches: the criteria; ranking batches: the metadata set (default webgpt)",
        )
        parser.add_argument(
            "--source",
            choices=[code for code, _ in SOURCES],
            help="default: runs with --from-run, demonstrations otherwise",
        )
        parser.add_argument("--answers", type=Path, help="answers JSONL (with --source file)")
        parser.add_argument("--overlap", type=int, default=1)
        parser.add_argument("--priority", type=int, default=1, help="share of labelers' tasks, 1-10")
        parser.add_argument("--required-probability", type=float, default=0.1)
        parser.add_argument("--always-required", default="", help="comma-separated field codes")
        parser.add_argument("--instructions", default="")
        parser.add_argument("--lease-minutes", type=int, default=30)
        parser.add_argument("--revision-minutes", type=int, default=60, help="how long a labeler may revise")
        parser.add_argument("--gold", default="", help="gold comparisons: '12>34;56=78' (answer ids)")
        parser.add_argument(
            "--from-run",
            type=int,
            action="append",
            default=[],
            metavar="N",
            help="a finished sampling run's answers (at most twice: two runs' chosen answers side by side)",
        )
        parser.add_argument(
            "--vs-demonstrations",
            action="store_true",
            help="one run's chosen answer against a human demonstration of the question",
        )
        parser.add_argument(
            "--pairs-per-question", type=int, default=1, metavar="K", help="one run's comparisons: 1-10"
        )
        parser.add_argument(
            "--include-declined", action="store_true", help="pair the answers to questions a run declined"
        )
        parser.add_argument(
            "--demonstration-batch",
            type=int,
            default=None,
            metavar="N",
            help="step reviews of demonstrations: the episodes of this demonstration batch (default: every "
            "finished demonstration)",
        )
        parser.add_argument(
            "--judged-worse",
            action="store_true",
            help="step reviews of runs: only the episodes whose answer a comparison judged worse",
        )
        parser.add_argument(
            "--max-overlap",
            type=int,
            default=None,
            metavar="K",
            help="adaptive overlap: an item whose judgements disagree asks for one more labeler, up to K "
            "(overlap-10; default: never); comparisons and rankings only",
        )
        parser.add_argument(
            "--rank-agreement-threshold",
            type=float,
            default=model_default("rank_agreement_threshold"),
            metavar="TAU",
            help="rankings with --max-overlap: two rankings disagree under this Kendall tau-b (-1 to 1; "
            "default %(default)s)",
        )
        parser.add_argument(
            "--screening",
            action="store_true",
            help="a screening test: every applicant judges every item (the overlaps do not apply)",
        )
        for name, what in (
            ("agreement_cutoff", "screening: soft cutoff on agreement with the references (0-1"),
            ("flag_cutoff", "screening: soft cutoff on agreement on the question flags (0-1"),
            ("gold_threshold", "pause a labeler under this rolling gold accuracy (0-1"),
        ):
            parser.add_argument(
                "--" + name.replace("_", "-"),
                type=float,
                default=model_default(name),
                help=f"{what}; default %(default)s)",
            )
        parser.add_argument(
            "--gold-min-items",
            type=int,
            default=model_default("gold_min_items"),
            help="gold judgements before the pause may apply (1-1000; default %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        config = BatchSettings(
            name=options["name"],
            template=options["template"],
            preset=options["preset"],
            instructions=options["instructions"],
            overlap=options["overlap"],
            priority=options["priority"],
            required_probability=options["required_probability"],
            always_required=[c.strip() for c in options["always_required"].split(",") if c.strip()] or None,
            lease_seconds=options["lease_minutes"] * 60,
            revision_seconds=options["revision_minutes"] * 60,
            runs=options["from_run"],
            vs_demonstrations=options["vs_demonstrations"],
            pairs_per_question=options["pairs_per_question"],
            include_declined=options["include_declined"],
            demonstration_batch=options["demonstration_batch"],
            judged_worse=options["judged_worse"],
            is_screening=options["screening"],
            agreement_cutoff=options["agreement_cutoff"],
            flag_cutoff=options["flag_cutoff"],
            gold_threshold=options["gold_threshold"],
            gold_min_items=options["gold_min_items"],
            max_overlap=options["max_overlap"],
            rank_agreement_threshold=options["rank_agreement_threshold"],
        )
        source = options["source"] or ("runs" if options["from_run"] else "demonstrations")
        gold = options["gold"].replace(";", "\n")
        try:  # the same check as the console form's and the API's, before any file is read
            check_batch_request(config, source, options["answers"] is not None, gold)
            data = options["answers"].read_bytes() if options["answers"] else None
            batch = create_batch_from_source(None, config, source, data, gold_pairs=gold)
        except OSError as exc:
            raise CommandError(f"{options['answers']}: {exc.strerror}") from None
        except BatchError as exc:
            where = f"{OPTIONS.get(exc.field) or '--' + exc.field.replace('_', '-')}: " if exc.field else ""
            raise CommandError(f"{where}{exc.message.rstrip('.')}; nothing was created") from None
        except QuestionFileError as exc:
            raise CommandError(f"{exc}; nothing was created") from None
        self.stdout.write(f"batch {batch.pk} {batch.name!r}: {batch.items.count()} items ({batch.template})")
        for side, label in batch.origin.get("sides", {}).items():
            self.stdout.write(f"  side {side}: {label}")
        for entry in batch.origin.get("skipped", []):
            self.stdout.write(
                f"  skipped question {entry['question']} ({entry['text'][:60]!r}): {entry['reason']}"
            )
