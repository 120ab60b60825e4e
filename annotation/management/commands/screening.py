"""``manage.py screening <kind>``: the kind's screening candidates with their scores against the cutoffs and
the suggestion, as on the candidates page (decisions: ``manage.py qualify`` or the page)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.workforce.screening import GRADE, candidates_for
from annotation.workforce.states import all_kinds, kind_label


class Command(BaseCommand):
    help = "List a kind of work's screening candidates: scores (counts, 95% intervals), cutoffs, suggestion."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", help=f"one of: {', '.join(all_kinds())}")

    def handle(self, *args: Any, **options: Any) -> None:
        kind = options["kind"]
        if kind not in all_kinds():
            raise CommandError(f"unknown kind of work {kind!r}; one of: {', '.join(all_kinds())}")
        rows = candidates_for(kind)
        self.stdout.write(f"{kind_label(kind)}: {len(rows)} candidate(s)")
        for candidate in rows:
            self.stdout.write(
                f"{candidate.username} ({candidate.state}): {candidate.done}/{candidate.total} items, "
                f"suggestion {candidate.suggestion}"
            )
            for score in candidate.scores:
                shown = (
                    f"{score.value:.2f} [{score.low:.2f}, {score.high:.2f}] cutoff {score.cutoff:.0f}"
                    if score.measure == GRADE
                    else f"{score.value:.0%} [{score.low:.0%}, {score.high:.0%}] cutoff {score.cutoff:.0%}"
                )
                self.stdout.write(f"  {score.label}: {shown}, n = {score.count}")
