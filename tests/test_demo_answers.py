"""The demo's hand-written FreshWiki answers: every quote is on its page verbatim (as the browser shows it),
a file whose quote is not is refused with its line and creates nothing, loading is idempotent, and the demo
batches are built from these answers, with their evidence on the task pages."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from django.urls import reverse

from annotation.demo import DEMO_BATCH_DATASET, DEMO_QUESTION_DIR
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.feedback.demo import create_demo_feedback_batches
from annotation.feedback.demo_answers import (
    DEMO_ANSWERS_FILE,
    QUALITIES,
    DemoAnswersError,
    corpus_pages,
    load_demo_answers,
    read_demo_answers,
)
from annotation.models import Answer, Assignment, FeedbackBatch, FeedbackItem, Question, SourceKind, Template
from annotation.questions.service import import_questions
from browser.engine.render import render_document
from browser.services import backend_for, browser_settings
from tests.conftest import FRESHWIKI
from training.sampling.runs import QuestionSet, SamplingRequest, check_sampling
from training.sampling.views import QUICK_START

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_questions(freshwiki):
    path = DEMO_QUESTION_DIR / "freshwiki_demo.jsonl"
    import_questions(path.read_bytes(), filename=path.name)
    return {q.external_id: q for q in Question.objects.filter(dataset="freshwiki_demo")}


def shipped_rows() -> list[dict]:
    return [json.loads(line) for line in DEMO_ANSWERS_FILE.read_text(encoding="utf-8").splitlines()]


def test_every_shipped_quote_is_verbatim_on_its_page_in_the_indexed_corpus(freshwiki):
    """Checked here on its own, without the loader: the page fetched from the index and rendered by the
    browser holds each extract exactly, and title and domain are the page's and the article record's."""
    index, browser = backend_for("freshwiki"), browser_settings()
    titles = {
        article["url"]: article["title"].replace("_", " ")
        for article in (json.loads(path.read_text(encoding="utf-8")) for path in FRESHWIKI.glob("*.json"))
    }
    rows = shipped_rows()
    quotes = [quote for row in rows for quote in row["quotes"]]
    assert len(quotes) > 2 * len(rows)
    for quote in quotes:
        page = render_document(index.fetch(quote["url"]), browser)
        assert quote["extract"] in page.plain, quote["extract"]
        assert (quote["title"], quote["domain"]) == (page.title, page.domain)
        assert (quote["title"], quote["domain"]) == (titles[quote["url"]], "en.wikipedia.org")
    for row in rows:  # citations [1]..[n], one per quote
        assert {int(n) for n in re.findall(r"\[(\d+)\]", row["answer"])} == set(
            range(1, len(row["quotes"]) + 1)
        )


def test_each_demo_question_has_one_answer_of_each_quality(demo_questions):
    rows = read_demo_answers(DEMO_ANSWERS_FILE, corpus_pages())
    assert Counter((row.question_external_id, row.quality) for row in rows) == {
        (key, quality): 1 for key in demo_questions for quality in QUALITIES
    }
    assert len(demo_questions) == 12


def tampered(tmp_path: Path, line: int, change) -> Path:
    rows = shipped_rows()
    change(rows[line - 1])
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def test_a_quote_not_on_its_page_is_refused_with_its_line_and_nothing_is_created(demo_questions, tmp_path):
    def reword(row):  # one word changed in the second quote: still plausible, no longer verbatim
        row["quotes"][1]["extract"] = row["quotes"][1]["extract"].replace("the", "a", 1)

    path = tampered(tmp_path, 5, reword)
    with pytest.raises(
        DemoAnswersError,
        match=r"^answers\.jsonl: line 5: quote 2 is not on https://en\.wikipedia\.org/wiki/"
        r"2023_Odisha_train_collision verbatim: 'At about 19:00 IST \(13:30 GMT\), a Coromandel",
    ):
        load_demo_answers(path)
    assert Answer.objects.count() == 0


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda row: row["quotes"][0].update(title="Odisha"),
            r"line 7: quote 1: title and domain must be the page's",
        ),
        (
            lambda row: row["quotes"][0].update(url="https://en.wikipedia.org/wiki/Nowhere"),
            r"line 7: quote 1: https://en.wikipedia.org/wiki/Nowhere is not in the corpus",
        ),
        (
            lambda row: row.update(quality="great"),
            r"line 7: 'quality' must be one of complete, partial, unsupported, wrong",
        ),
        (
            lambda row: row.update(answer=row["answer"] + " [3]"),
            r"line 7: the answer cites \[3\] but has 2 quotes",
        ),
        (lambda row: row.update(quotes=[]), r"line 7: 'quotes' must be a non-empty list"),
        (lambda row: row.update(question_external_id="fw-99"), r"line 7: no freshwiki_demo question 'fw-99'"),
    ],
)
def test_a_bad_row_is_refused_with_its_line(demo_questions, tmp_path, change, reason):
    with pytest.raises(DemoAnswersError, match=reason):
        load_demo_answers(tampered(tmp_path, 7, change))
    assert Answer.objects.count() == 0


def test_loading_twice_creates_each_answer_once(demo_questions):
    first = load_demo_answers()
    again = load_demo_answers()
    assert [a.pk for a in again] == [a.pk for a in first] and Answer.objects.count() == 48
    answer = first[0]
    assert (answer.question, answer.source_kind, answer.source) == (
        demo_questions["fw-1"],
        SourceKind.REFERENCE,
        {"dataset": "freshwiki_demo_answers", "quality": "complete"},
    )
    assert answer.quotes[0] == shipped_rows()[0]["quotes"][0]


def test_without_the_corpus_the_answers_are_refused(db):
    with pytest.raises(DemoAnswersError, match="the corpus 'freshwiki' is not imported"):
        load_demo_answers()


def test_the_demo_batches_are_built_from_the_freshwiki_answers_with_their_quotes(demo_questions):
    old = FeedbackBatch.objects.create(
        name="TruthfulQA demo: WebGPT comparison", template="webgpt_comparison"
    )
    batches = {(b.template, b.preset): b for b in create_demo_feedback_batches()}
    assert {key: batch.items.count() for key, batch in batches.items()} == {  # 8 of the 12 questions
        (Template.WEBGPT_COMPARISON, ""): 24,  # each answer against the next one down, 3 per question
        (Template.MINIMAL_COMPARISON, ""): 24,
        (Template.RANKING, ""): 8,  # the four answers of a question together
        (Template.RATING, "gophercite"): 32,
        (Template.RATING, "truthfulqa"): 32,
        (Template.RATING, "webglm"): 32,
        (Template.STEP_REVIEW, ""): 2,  # two episodes browsed by the demo's script (demo_steps)
        (Template.STEP_PREFERENCE, ""): 3,  # their clicks: one, then a wrong one and the right one
    }
    assert batches[(Template.RANKING, "")].name == "FreshWiki demo: K-way ranking"
    rank = {quality: index for index, quality in enumerate(QUALITIES)}
    for item in batches[(Template.WEBGPT_COMPARISON, "")].items.prefetch_related("answers"):
        better, worse = sorted(item.answers.all(), key=lambda a: rank[a.source["quality"]])
        assert rank[worse.source["quality"]] == rank[better.source["quality"]] + 1
    for answer in Answer.objects.filter(items__batch__in=batches.values()).distinct():
        assert answer.source["dataset"] == "freshwiki_demo_answers"
        assert answer.quotes and all(quote["extract"] and quote["domain"] for quote in answer.quotes)
    old.refresh_from_db()
    assert not old.is_active  # the old evidence-less batches stop handing out tasks, their data kept
    assert create_demo_feedback_batches() == []
    assert FeedbackBatch.objects.count() == 9 and Answer.objects.count() == 48


def test_the_questions_the_quick_start_samples_are_in_no_demo_batch(demo_questions):
    """One labeler walks the loop: the quick-start's questions reach them first in the batch made from its
    samples, not held back for a day because a demo batch had them under another template (issue 24)."""
    create_demo_feedback_batches()
    quick = QuestionSet(dataset=DEMO_BATCH_DATASET, limit=QUICK_START["limit"])
    _, sampled = check_sampling(SamplingRequest(questions=quick, settings={"n": QUICK_START["n"]}))
    judged = set(FeedbackItem.objects.values_list("question", flat=True))  # answers' and episodes' items
    assert len(sampled) == 4 and not judged & set(sampled)
    assert len(judged) == 8  # the other eight questions, with all their answers


def task_page(client, user, batch: FeedbackBatch) -> str:
    FeedbackBatch.objects.exclude(pk=batch.pk).update(is_active=False)
    client.force_login(user)
    assert client.post(reverse("annotation:task_start")).status_code == 302
    task = Assignment.objects.filter(labeler=user).latest("id")
    return client.get(reverse("annotation:task", args=[task.pk])).content.decode()


def test_a_demo_task_shows_each_quote_with_title_domain_and_extract(client, bob, demo_questions):
    create_demo_feedback_batches()
    batch = FeedbackBatch.objects.get(template=Template.RANKING)
    html = task_page(client, bob, batch)
    task = Assignment.objects.get(labeler=bob)
    for answer in Answer.objects.filter(pk__in=task.order):
        for quote in answer.quotes:
            assert f"<blockquote>{escape(quote['extract'])}</blockquote>" in html
            assert f">{escape(quote['title'])}</a> ({quote['domain']})" in html
    assert "No quotes." not in html and "freshwiki_demo_answers" not in html


def escape(text: str) -> str:
    from django.utils.html import escape as django_escape

    return str(django_escape(text))


@pytest.mark.parametrize(
    ("template", "preset", "says"), [("rating", "webglm", True), ("minimal_comparison", "", False)]
)
def test_an_answer_without_quotes_says_no_quotes(client, bob, demo_questions, template, preset, says):
    """Except in the minimal comparison, which removes references from every answer on purpose."""
    question = demo_questions["fw-1"]
    answers = [
        Answer.objects.create(question=question, text=f"Geelong won ({n}).", source_kind=SourceKind.MODEL)
        for n in range(2 if template != "rating" else 1)
    ]
    batch = create_feedback_batch(
        None, BatchSettings("bare", template, preset, required_probability=0.0), [answers]
    )
    html = task_page(client, bob, batch)
    assert ("No quotes." in html) is says
    assert "<h3>References</h3>" not in html
