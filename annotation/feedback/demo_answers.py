"""The demo's hand-written answers to the FreshWiki demo questions (``data/answers/``), loaded as Answer
rows only once every quote is found, verbatim, on the page the browser shows for its URL.

The check renders each cited page the way a demonstrator sees it (the index's document through the
browser's own renderer and settings) and looks for the extract in the page's running text, the text the
Quote command copies from. So a quote that passes here is one a demonstrator could have made, and a
corpus re-import or a renderer change that moves the text makes ``load_demo`` fail loudly instead of
shipping evidence that is not on the page.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotation.demo import DEMO_BATCH_DATASET, DEMO_CORPUS_NAME
from annotation.models import Answer, Question, SourceKind
from browser.engine.backend import PageNotFound
from browser.engine.page import Page
from browser.engine.render import render_document
from browser.models import Corpus
from browser.services import backend_for, browser_settings

DEMO_ANSWERS_FILE = Path(settings.BASE_DIR) / "data" / "answers" / "freshwiki_demo_answers.jsonl"
DEMO_ANSWERS_DATASET = "freshwiki_demo_answers"  # Answer.source["dataset"]
# Best first: every claim supported and the whole question answered; true and supported but leaving part
# of the question out; a claim its quotes do not support (misread or taken from the wrong passage);
# the main claim false.
QUALITIES = ("complete", "partial", "unsupported", "wrong")
QUOTE_KEYS = ("title", "url", "domain", "extract")


class DemoAnswersError(ValueError):
    """The answers file cannot be loaded; ``line`` is 1-based (0 when the file as a whole is wrong)."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"{path.name}: line {line}: {reason}" if line else f"{path.name}: {reason}")


@dataclass(frozen=True)
class DemoAnswer:
    line: int
    question_external_id: str
    quality: str
    text: str
    quotes: list[dict[str, str]]


def read_demo_answers(path: Path, page_for: Callable[[str], Page]) -> list[DemoAnswer]:
    """Every row of ``path``, checked: known fields, a quality of QUALITIES, citations [1]..[n] only for
    quotes it has, and each quote's title, domain and extract as on ``page_for(url)``."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            rows.append(_row(path, number, line, page_for))
    if not rows:
        raise DemoAnswersError(path, 0, "the file holds no answers")
    return rows


def _row(path: Path, number: int, line: str, page_for: Callable[[str], Page]) -> DemoAnswer:
    def refuse(reason: str) -> DemoAnswersError:
        return DemoAnswersError(path, number, reason)

    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise refuse(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(row, dict) or set(row) != {"question_external_id", "quality", "answer", "quotes"}:
        raise refuse("expected an object with question_external_id, quality, answer and quotes")
    if row["quality"] not in QUALITIES:
        raise refuse(f"'quality' must be one of {', '.join(QUALITIES)}, not {row['quality']!r}")
    text, quotes = row["answer"], row["quotes"]
    if not isinstance(text, str) or not text.strip():
        raise refuse("'answer' must be a non-empty string")
    if not isinstance(quotes, list) or not quotes:
        raise refuse("'quotes' must be a non-empty list: a demo answer cites its evidence")
    for index, quote in enumerate(quotes, start=1):
        if not isinstance(quote, dict) or set(quote) != set(QUOTE_KEYS):
            raise refuse(f"quote {index} must have exactly {', '.join(QUOTE_KEYS)}")
        if not all(isinstance(quote[key], str) for key in QUOTE_KEYS):
            raise refuse(f"quote {index}: {', '.join(QUOTE_KEYS)} must be strings")
        if f"[{index}]" not in text:
            raise refuse(f"quote {index} is never cited as [{index}] in the answer")
        _check_on_page(quote, index, page_for, refuse)
    if f"[{len(quotes) + 1}]" in text:
        raise refuse(f"the answer cites [{len(quotes) + 1}] but has {len(quotes)} quotes")
    return DemoAnswer(number, str(row["question_external_id"]), row["quality"], text.strip(), quotes)


def _check_on_page(
    quote: dict, index: int, page_for: Callable[[str], Page], refuse: Callable[[str], DemoAnswersError]
) -> None:
    try:
        page = page_for(quote["url"])
    except PageNotFound:
        raise refuse(f"quote {index}: {quote['url']} is not in the corpus") from None
    if (quote["title"], quote["domain"]) != (page.title, page.domain):
        raise refuse(
            f"quote {index}: title and domain must be the page's ({page.title!r}, {page.domain!r}), "
            f"not ({quote['title']!r}, {quote['domain']!r})"
        )
    if not quote["extract"].strip() or quote["extract"] not in page.plain:
        raise refuse(f"quote {index} is not on {quote['url']} verbatim: {quote['extract']!r}")


def corpus_pages(corpus_name: str = DEMO_CORPUS_NAME) -> Callable[[str], Page]:
    """The pages of an indexed corpus as the browser renders them (each rendered once per call)."""
    if not Corpus.objects.filter(name=corpus_name).exists():
        raise DemoAnswersError(DEMO_ANSWERS_FILE, 0, f"the corpus {corpus_name!r} is not imported")
    index, browser = backend_for(corpus_name), browser_settings()
    pages: dict[str, Page] = {}

    def page_for(url: str) -> Page:
        if url not in pages:
            pages[url] = render_document(index.fetch(url), browser)
        return pages[url]

    return page_for


@transaction.atomic
def load_demo_answers(path: Path = DEMO_ANSWERS_FILE, corpus_name: str = DEMO_CORPUS_NAME) -> list[Answer]:
    """The file's answers in file order, created once (the same question and text is the same answer).
    All rows are checked first: a bad row raises DemoAnswersError naming its line, and nothing is created.
    """
    rows = read_demo_answers(path, corpus_pages(corpus_name))
    questions = {
        q.external_id: q
        for q in Question.objects.filter(
            dataset=DEMO_BATCH_DATASET, external_id__in={row.question_external_id for row in rows}
        )
    }
    for row in rows:
        if row.question_external_id not in questions:
            raise DemoAnswersError(
                path,
                row.line,
                f"no {DEMO_BATCH_DATASET} question {row.question_external_id!r} (import it first)",
            )
    answers = []
    for row in rows:
        answer, _ = Answer.objects.get_or_create(
            question=questions[row.question_external_id],
            text=row.text,
            source_kind=SourceKind.REFERENCE,
            defaults={
                "quotes": row.quotes,
                "source": {"dataset": DEMO_ANSWERS_DATASET, "quality": row.quality},
            },
        )
        answers.append(answer)
    return answers
