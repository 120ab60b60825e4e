"""Importing question files into the bank: counts, atomicity, duplicates, splits."""

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Question, QuestionImport
from annotation.questions.formats import QuestionFileError
from annotation.questions.service import import_questions
from core.models import AuditEntry
from tests.conftest import QUESTION_DATA

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("name", "rows", "created", "dataset"),
    [
        ("TruthfulQA.csv", 790, 790, "truthfulqa"),
        ("triviaqa_sm_sub.jsonl", 3000, 3000, "triviaqa"),
        # WebGLM's files repeat some questions (same text once normalised): reported, not doubled.
        ("nq_open.jsonl", 400, 393, "nq_open"),
        ("web_questions.jsonl", 400, 381, "web_questions"),
    ],
)
def test_each_shipped_format_imports_with_the_right_counts(name, rows, created, dataset):
    report = import_questions((QUESTION_DATA / name).read_bytes(), filename=name)
    assert (report.created_count, report.duplicate_count) == (created, rows - created)
    assert Question.objects.filter(dataset=dataset).count() == created
    assert Question.objects.filter(source_import=report).count() == created


def test_reimport_adds_nothing_and_reports_every_row_as_duplicate():
    data = (QUESTION_DATA / "TruthfulQA.csv").read_bytes()
    import_questions(data, filename="TruthfulQA.csv")
    again = import_questions(data, filename="TruthfulQA.csv")
    assert again.created_count == 0
    assert again.duplicate_count == 790
    assert again.duplicates[0] == {"line": 2, "reason": "already in the bank (truthfulqa)"}
    assert Question.objects.count() == 790


def test_duplicates_inside_one_file_are_reported_with_the_first_line():
    data = b'{"question": "Why is the sky blue?"}\n{"question": "why is the sky  blue"}\n'
    report = import_questions(data, filename="mine.jsonl")
    assert (report.created_count, report.duplicate_count) == (1, 1)
    assert report.duplicates == [{"line": 2, "reason": "same question as line 1"}]


def test_a_bad_row_rejects_the_whole_file_and_changes_nothing():
    good = b'{"question": "What is a quark?", "answer": ["a particle"]}\n' * 1
    bad = (
        good
        + b'{"question": "How do tides work?", "answer": ["the moon"]}\n{"question": "Why?", "answer": [\n'
    )
    with pytest.raises(QuestionFileError) as caught:
        import_questions(bad, filename="webglm.jsonl")
    assert caught.value.line == 3
    assert Question.objects.count() == 0
    assert QuestionImport.objects.count() == 0
    assert AuditEntry.objects.count() == 0


def test_missing_csv_column_is_refused():
    with pytest.raises(QuestionFileError, match="missing column"):
        import_questions(b"Question,Best Answer\nWhy?,Because\n", filename="tqa.csv")
    assert Question.objects.count() == 0


def test_an_id_reused_for_another_question_is_refused():
    import_questions(b'{"id": "q1", "question": "What is a quark?"}\n', filename="a.jsonl", dataset="mine")
    with pytest.raises(QuestionFileError) as caught:
        import_questions(
            b'{"id": "q2", "question": "What is a lepton?"}\n{"id": "q1", "question": "What is a boson?"}\n',
            filename="b.jsonl",
            dataset="mine",
        )
    assert caught.value.line == 2
    assert Question.objects.count() == 1


def test_splits_are_disjoint_stable_and_follow_the_ratios(settings):
    data = (QUESTION_DATA / "triviaqa_sm_sub.jsonl").read_bytes()
    import_questions(data, filename="triviaqa_sm_sub.jsonl")
    first = dict(Question.objects.values_list("key", "split"))
    assert set(first.values()) == {"bc", "rm", "rl", "eval"}
    Question.objects.all().delete()
    import_questions(data, filename="triviaqa_sm_sub.jsonl")
    assert dict(Question.objects.values_list("key", "split")) == first
    counts = {s: sum(1 for v in first.values() if v == s) for s in settings.QUESTION_SPLIT_RATIOS}
    for split, ratio in settings.QUESTION_SPLIT_RATIOS.items():
        assert abs(counts[split] / len(first) - ratio) < 0.03


def test_eli5_statements_get_the_explain_prefix():
    report = import_questions(
        b'{"question": "the causes of inflation", "dataset": "eli5"}\n{"question": "the Krebs cycle"}\n',
        filename="mixed.jsonl",
    )
    assert report.created_count == 2
    assert set(Question.objects.values_list("text", flat=True)) == {
        "Explain: the causes of inflation",
        "the Krebs cycle",
    }


def test_the_command_reports_counts_and_errors(tmp_path, capsys):
    call_command("import_questions", str(QUESTION_DATA / "nq_open.jsonl"), "--dataset", "nq")
    out = capsys.readouterr().out
    assert "393 questions imported (webglm), 7 duplicates skipped" in out
    assert Question.objects.filter(dataset="nq").count() == 393

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "fine?"}\n{"question": 5}\n')
    with pytest.raises(
        CommandError, match=r"bad.jsonl: line 2: 'question' must be a non-empty string; nothing"
    ):
        call_command("import_questions", str(bad))
    with pytest.raises(CommandError, match="No such file"):
        call_command("import_questions", str(tmp_path / "missing.jsonl"))


GOOD = b'{"question": "What is a quark?"}\n'


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (b'{"question": "Why?", "dataset": "' + b"d" * 101 + b'"}', "'dataset' is longer than 100"),
        (b'{"question": "Why?", "id": "' + b"i" * 201 + b'"}', "'id' is longer than 200 characters"),
        (b'{"question": "Why?", "id": ' + b"9" * 250 + b"}", "'id' is longer than 200 characters"),
        (b'{"question": "Why?", "metadata": {"n": ' + b"9" * 5000 + b"}}", "more than 4300 digits"),
        (b'{"question": "Why?", "metadata": {"n": 1e999}}', "too large"),
        (b'{"question": "Why?", "metadata": {"n": NaN}}', "not a number"),
        (b'{"question": "Why?", "metadata": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested more than"),
        (b'{"question": "Why?", "metadata": {"k": "a\\u0000b"}}', "NUL"),
    ],
    ids=["dataset-101", "id-201", "id-250-digits", "int-5000-digits", "1e999", "NaN", "deep", "nul"],
)
def test_values_the_database_cannot_hold_are_refused_with_their_line(row, reason):
    """On PostgreSQL each of these was a 500 (SQLite stored the long names: the databases disagreed)."""
    with pytest.raises(QuestionFileError) as caught:
        import_questions(GOOD + row + b"\n", filename="mine.jsonl")
    assert caught.value.line == 2 and reason in caught.value.reason, caught.value
    assert not Question.objects.exists() and not QuestionImport.objects.exists()


def test_a_nul_in_a_csv_file_names_its_line():
    data = (QUESTION_DATA / "TruthfulQA.csv").read_bytes().replace(b"What happens", b"What\x00 happens", 1)
    with pytest.raises(QuestionFileError, match="NUL") as caught:
        import_questions(data, filename="TruthfulQA.csv")
    assert caught.value.line == data[: data.index(b"\x00")].count(b"\n") + 1
    assert not Question.objects.exists()


def test_names_longer_than_the_model_holds_are_refused_or_shortened():
    with pytest.raises(QuestionFileError, match="dataset name is longer than 100 characters"):
        import_questions(GOOD, filename="q.jsonl", dataset="d" * 101)
    report = import_questions(GOOD, filename=("f" * 250) + ".jsonl\x00")  # a name from an upload
    question = Question.objects.get()
    assert question.dataset == "f" * 100 and "\x00" not in report.filename and len(report.filename) <= 255
