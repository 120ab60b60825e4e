"""``manage.py browse``: the environment in a terminal, exactly as a model sees it.

Reads one command per line on stdin and prints the observation after each; ``--json`` prints one JSON
object per line instead (observation, valid, message, done, end_reason, quotes; answer_prompt at the end).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Question
from browser.engine.browser import Browser, StepResult
from browser.models import Corpus
from browser.services import browser_settings, store_snapshots
from browser.sources import LOCAL, PROVIDERS, open_source, source_error


class Command(BaseCommand):
    help = "Browse a corpus or the live web with the text environment: commands on stdin, observations out."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--corpus", default="", help="corpus name (default: DEFAULT_CORPUS)")
        parser.add_argument(
            "--search", default=LOCAL, help=f"search provider: {', '.join(PROVIDERS)} (default: local)"
        )
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--question", help="the question text")
        source.add_argument(
            "--question-id", type=int, help="a question of the bank (its answers censor pages)"
        )
        parser.add_argument("--json", action="store_true", help="one JSON object per line")

    def handle(self, *args: Any, **options: Any) -> None:
        if problem := source_error(options["search"], options["corpus"]):
            raise CommandError(problem)
        try:
            backend = open_source(options["search"], options["corpus"])
        except Corpus.DoesNotExist:  # DEFAULT_CORPUS names a corpus not imported yet
            raise CommandError(f"no corpus named {settings.DEFAULT_CORPUS!r}: run import_corpus") from None
        question, answers = options["question"], ()
        if options["question_id"] is not None:
            row = Question.objects.filter(pk=options["question_id"]).first()
            if row is None:
                raise CommandError(f"no question with id {options['question_id']}")
            question, answers = row.text, tuple(row.reference_answers)
        browser = Browser(backend, browser_settings())
        browser.reset(question, answers)
        self._emit(browser, None, None, options["json"])
        interactive = sys.stdin.isatty()
        while not browser.done:
            if interactive:
                self.stdout.write("> ", ending="")
                self.stdout.flush()
            line = sys.stdin.readline()
            if not line:
                break
            if not line.strip():
                continue
            result = browser.step(line.rstrip("\n"))
            self._emit(browser, line.strip(), result, options["json"])
        store_snapshots(browser.pages.values())

    def _emit(self, browser: Browser, command: str | None, result: StepResult | None, as_json: bool) -> None:
        if as_json:
            record: dict[str, Any] = {
                "command": command,
                "valid": result.valid if result else True,
                "message": result.message if result else "",
                "done": browser.done,
                "end_reason": browser.end_reason.value if browser.end_reason else None,
                "observation": browser.observation(),
                "quotes": [quote.to_dict() for quote in browser.quotes],
            }
            if browser.done:
                record["answer_prompt"] = browser.answer_prompt()
            self.stdout.write(json.dumps(record, ensure_ascii=False))
            return
        self.stdout.write(browser.observation())
        if browser.done:
            self.stdout.write(f"\nBrowsing ended ({browser.end_reason.value}). Answer prompt:\n")
            self.stdout.write(browser.answer_prompt())
        self.stdout.write("")
