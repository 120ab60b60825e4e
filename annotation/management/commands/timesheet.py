"""``manage.py timesheet [--week YYYY-MM-DD | --start D --end D] [--user NAME] [--csv PATH]``: a time sheet
on the terminal (each person's days and totals, hours:minutes), or its CSV for payment (``-`` for stdout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from annotation.workforce.periods import PeriodError, period_from
from annotation.workforce.sheets import correction_words, hours_minutes, sheet, write_csv


class Command(BaseCommand):
    help = (
        "Each person's active time per day, work done and corrections, for a week (Monday to Sunday; any "
        "day of it; default this week) or a range of days; --csv writes the console's CSV."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--week", help="any day of the week wanted, YYYY-MM-DD (default: this week)")
        parser.add_argument("--start", help="first day of a range, YYYY-MM-DD (with --end)")
        parser.add_argument("--end", help="last day of a range (at most 92 days)")
        parser.add_argument("--user", help="only this person (user name)")
        parser.add_argument("--csv", help="write the CSV to this file instead ('-': standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            period = period_from(options, timezone.localdate())
        except PeriodError as exc:
            raise CommandError(exc.message.replace(f"'{exc.field}'", f"--{exc.field}")) from None
        users = None
        if options["user"]:
            found = get_user_model().objects.filter(username=options["user"]).first()
            if found is None:
                raise CommandError(f"No one is called '{options['user']}'.")
            users = [found.pk]
        people = sheet(period, users)
        if options["csv"] == "-":
            write_csv(self.stdout, people)
        elif options["csv"]:
            with Path(options["csv"]).open("w", newline="", encoding="utf-8") as out:
                write_csv(out, people)
            lines = sum(len(person.days) for person in people)
            self.stdout.write(
                f"{period.label}: {lines} line{'s' if lines != 1 else ''} written to {options['csv']}"
            )
        else:
            self._print(period.label, people)

    def _print(self, label: str, people: list) -> None:
        self.stdout.write(label)
        if not people:
            self.stdout.write("Nobody worked in these days, and no time was corrected.")
        header = f"{'day':<12}{'total':>8}{'tasks':>8}{'demos':>8}{'corr.':>8}  done late skip demos skip"
        for person in people:
            self.stdout.write(f"\n{person.username}\n  {header}")
            for day in person.days:
                self.stdout.write(
                    self._line(day.day.isoformat(), day.__dict__ | {"total_seconds": day.total_seconds})
                )
                if day.corrections:
                    self.stdout.write(f"    corrections: {correction_words(day)}")
            self.stdout.write(self._line("total", person.totals))

    @staticmethod
    def _line(name: str, figures: dict) -> str:
        times = "".join(
            f"{hours_minutes(figures[key]):>8}"
            for key in ("total_seconds", "task_seconds", "demonstration_seconds", "corrected_seconds")
        )
        counts = (
            f"{int(figures['tasks']):>6}{int(figures['late']):>5}{int(figures['skipped']):>5}"
            f"{int(figures['demonstrations']):>6}{int(figures['demonstrations_skipped']):>5}"
        )
        return f"  {name:<12}{times}{counts}"
