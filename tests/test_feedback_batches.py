"""Making feedback batches: answers import, sources, grouping per template, console and commands."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.feedback import assignment as work
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchError, BatchSettings, create_feedback_batch, group_answers
from annotation.feedback.scales import ranking_tags
from annotation.feedback.stats import batch_progress, labeler_stats
from annotation.models import Answer, FeedbackBatch, FeedbackItem
from annotation.questions.formats import QuestionFileError
from annotation.questions.service import import_questions
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def questions():
    import_questions(
        b'{"question": "Why is the sky blue?"}\n{"question": "Why is the sea salty?"}', filename="q.jsonl"
    )


def answers_file(*rows: dict) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode()


SKY = {
    "question": "why is the sky blue",
    "answer": "Rayleigh scattering [1].",
    "quotes": [
        {
            "title": "Rayleigh scattering",
            "url": "https://en.wikipedia.org/wiki/Rayleigh_scattering",
            "extract": "scattering of light",
        }
    ],
    "source": {"model": "policy-1", "temperature": 0.7},
}


def test_answers_import_resolves_questions_and_keeps_the_hidden_source(questions):
    (answer,) = import_answers(answers_file(SKY))
    assert answer.question.text == "Why is the sky blue?"
    assert answer.quotes[0]["domain"] == "en.wikipedia.org"
    assert (answer.source_kind, answer.source) == ("model", {"model": "policy-1", "temperature": 0.7})


def test_a_bad_answer_row_rejects_the_file_with_its_line(questions):
    bad = answers_file(SKY, {"question": "Unknown question?", "answer": "x"})
    with pytest.raises(QuestionFileError) as caught:
        import_answers(bad)
    assert caught.value.line == 2 and "not in the bank" in caught.value.reason
    with pytest.raises(QuestionFileError, match="line 1: 'answer' must be a non-empty string"):
        import_answers(answers_file({"question": "why is the sky blue", "answer": ""}))
    assert Answer.objects.count() == 0


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"answer": "x" * 1_000_000}, "'answer' is longer than 20000 characters"),
        (
            {"quotes": [{**SKY["quotes"][0], "extract": "x" * 1_000_000}]},
            "quote 0: 'extract' is longer than 10000",
        ),
        ({"quotes": [{**SKY["quotes"][0], "title": "t" * 1_001}]}, "quote 0: 'title' is longer than 1000"),
        (
            {"quotes": [{**SKY["quotes"][0], "url": "https://a.org/" + "p" * 2_000}]},
            "'url' is longer than 2000",
        ),
        ({"quotes": SKY["quotes"] * 101}, "'quotes' holds 101 quotes; at most 100"),
        ({"source": {"model": "m" * 20_000}}, "'source' is longer than 20000 characters as JSON"),
        ({"question": "why " * 1_001}, "'question' is longer than 4000 characters"),
    ],
)
def test_an_answer_file_row_over_a_field_limit_is_refused_with_its_line(questions, change, reason):
    """The 50 MiB file cap alone let one answer or quote be a megabyte, carried by every task page."""
    with pytest.raises(QuestionFileError) as caught:
        import_answers(answers_file(SKY, {**SKY, **change}))
    assert caught.value.line == 2 and reason in caught.value.reason
    assert Answer.objects.count() == 0


def test_groups_follow_the_template(questions):
    answers = import_answers(answers_file(*[{**SKY, "answer": f"answer {i}"} for i in range(5)]))
    assert len(group_answers(answers, "webgpt_comparison")) == 10  # every pair
    assert [len(g) for g in group_answers(answers, "ranking")] == [5]
    assert len(group_answers(answers, "rating")) == 5
    assert group_answers(answers[:3], "ranking") == []  # a ranking needs at least 4


def test_batches_refuse_groups_that_do_not_fit(questions):
    answers = import_answers(answers_file(SKY, {**SKY, "answer": "other"}))
    with pytest.raises(BatchError, match="needs 2-2"):
        create_feedback_batch(None, BatchSettings("x", "webgpt_comparison"), [answers[:1]])
    with pytest.raises(BatchError, match="Choose a preset for a rating batch"):
        create_feedback_batch(None, BatchSettings("x", "rating"), [answers[:1]])
    assert not FeedbackBatch.objects.exists()


def test_a_researcher_creates_a_batch_from_an_answers_file_in_the_console(client_for, alice, questions):
    data = answers_file(
        SKY, {**SKY, "answer": "Because of scattering."}, {**SKY, "question": "Why is the sea salty?"}
    )
    form = {
        "name": "Policy vs policy",
        "template": "webgpt_comparison",
        "source": "file",
        "overlap": 2,
        "required_probability": 0.1,
        "lease_minutes": 30,
        "revision_minutes": 60,
        "answers_file": SimpleUploadedFile("answers.jsonl", data),
    }
    response = client_for(alice).post(reverse("console:feedback_create"), form)
    batch = FeedbackBatch.objects.get()
    assert response.url == reverse("console:feedback_batch", args=[batch.pk])
    assert (batch.template, batch.overlap, batch.always_required) == ("webgpt_comparison", 2, ["overall"])
    assert FeedbackItem.objects.get().answers.count() == 2  # the lone sea answer has no partner
    page = client_for(alice).get(response.url).content.decode()
    assert "Policy vs policy" in page and "0 of 2" in page


def test_a_bad_console_upload_creates_nothing(client_for, alice, questions):
    form = {
        "name": "Bad",
        "template": "rating",
        "preset": "gophercite",
        "source": "file",
        "overlap": 1,
        "required_probability": 0.1,
        "lease_minutes": 30,
        "revision_minutes": 60,
        "answers_file": SimpleUploadedFile("answers.jsonl", b'{"question": "nope?", "answer": "x"}'),
    }
    response = client_for(alice).post(reverse("console:feedback_create"), form)
    assert response.status_code == 400 and "line 1" in response.content.decode()
    assert not FeedbackBatch.objects.exists() and not Answer.objects.exists()


@pytest.mark.parametrize(
    ("source", "template", "reason"),
    [
        ("bank", "webgpt_comparison", "give 1 answer on 1 question, and an item needs 2 answers"),
        ("bank", "ranking", "the answer bank give 1 answer on 1 question, and an item needs 4 answers"),
        ("demonstrations", "webgpt_comparison", "the finished demonstrations give 0 answers on 0 questions"),
    ],
)
def test_a_batch_with_nothing_to_judge_says_why_once(client_for, alice, questions, source, template, reason):
    import_answers(answers_file(SKY))
    form = {"name": "Few", "template": template, "source": source, "overlap": 1, "required_probability": 0.1,
            "lease_minutes": 30, "revision_minutes": 60}  # fmt: skip
    response = client_for(alice).post(reverse("console:feedback_create"), form)
    html = response.content.decode()
    assert response.status_code == 400 and html.count("no items") == 1 and reason in html
    assert html.count("Nothing was created.") == 1 and not FeedbackBatch.objects.exists()


def test_only_researchers_manage_batches(client_for, bob, dana, questions):
    batch = create_feedback_batch(
        None, BatchSettings("x", "rating", "truthfulqa"), [import_answers(answers_file(SKY))]
    )
    for user in (bob, dana):
        assert client_for(user).get(reverse("console:feedback")).status_code == 403
        assert client_for(user).get(reverse("console:feedback_batch", args=[batch.pk])).status_code == 403


def test_commands_import_answers_and_create_batches(tmp_path, questions, capsys):
    path = tmp_path / "answers.jsonl"
    path.write_bytes(answers_file(SKY, {**SKY, "answer": "Blue light scatters more."}))
    call_command("import_answers", str(path))
    assert sorted(Answer.objects.values_list("text", flat=True)) == sorted(
        [SKY["answer"], "Blue light scatters more."]
    )
    call_command(
        "create_feedback_batch", "From the bank", "--template", "minimal_comparison", "--source", "bank"
    )
    assert "1 items (minimal_comparison)" in capsys.readouterr().out
    batch = FeedbackBatch.objects.get(name="From the bank")
    (item,) = batch.items.all()
    assert batch.template == "minimal_comparison"
    assert set(item.answers.values_list("id", flat=True)) == set(Answer.objects.values_list("id", flat=True))
    with pytest.raises(CommandError, match="nothing was created"):
        call_command("create_feedback_batch", "Empty", "--template", "ranking", "--source", "bank")
    assert not FeedbackBatch.objects.filter(name="Empty").exists()


def test_progress_and_labeler_agreement_and_gold_accuracy(django_user_model, questions):
    answers = import_answers(answers_file(SKY, {**SKY, "answer": "Because of scattering."}))
    batch = create_feedback_batch(
        None,
        BatchSettings("pairs", "minimal_comparison", overlap=2, required_probability=0.0),
        [answers],
    )
    FeedbackItem.objects.update(
        is_gold=True, gold_expected={"preference": 1.0}
    )  # the lower-id answer is better
    bob, carol = (make_user(django_user_model, name, "labeler") for name in ("bob2", "carol2"))
    for person in (bob, carol):
        task = work.next_assignment(person)
        first = "a_better" if task.order[0] == min(task.order) else "b_better"
        work.submit(task.pk, person, {"ratings": {"overall": first}}, uuid.uuid4())
    progress = batch_progress(batch)
    assert (progress["items"], progress["submitted"], progress["needed"]) == (1, 2, 2)
    rows = labeler_stats(batch)
    assert [(row["labeler"], row["agreement"], row["gold_accuracy"]) for row in rows] == [
        ("bob2", 1.0, 1.0),
        ("carol2", 1.0, 1.0),
    ]


def test_gold_pairs_mark_items_with_the_expected_preference(questions, capsys):
    first, second = import_answers(answers_file(SKY, {**SKY, "answer": "It just is."}))
    call_command(
        "create_feedback_batch",
        "Gold",
        "--template",
        "minimal_comparison",
        "--source",
        "bank",
        "--gold",
        f"{second.pk}>{first.pk}",
    )
    item = FeedbackItem.objects.get()
    assert item.is_gold and item.gold_expected == {"preference": -1.0}  # the higher-id answer is better
    with pytest.raises(CommandError, match="gold pair 999998 / 999999 is not an item"):
        call_command(
            "create_feedback_batch",
            "Bad",
            "--template",
            "minimal_comparison",
            "--source",
            "bank",
            "--gold",
            "999998>999999",
        )
    with pytest.raises(CommandError, match="gold line 1"):
        call_command(
            "create_feedback_batch",
            "Bad",
            "--template",
            "minimal_comparison",
            "--source",
            "bank",
            "--gold",
            "better: 5",
        )


BAD_REQUESTS = [
    # (what is wrong, page fields, API fields, command arguments, the message all three give)
    (
        "the file source without a file",
        {"source": "file"},
        {"source": "file"},
        ["--source", "file"],
        "Choose the answers file (the source is an answers file)",
    ),
    (
        "a file with another source",
        {"source": "bank", "answers_file": True},
        {"source": "bank", "answers_file": True},
        ["--source", "bank", "--answers", True],
        "An answers file is read only when the source is an answers file: choose that source, or leave the "
        "file out",
    ),
    (
        "a rating batch without a preset",
        {"template": "rating"},
        {"template": "rating"},
        ["--template", "rating"],
        "Choose a preset for a rating batch (gophercite, truthfulqa, webglm)",
    ),
    (
        "a lease shorter than a minute",
        {"lease_minutes": 0},
        {"lease_seconds": 0},
        ["--lease-minutes", "0"],
        "The lease is 1 minute to 24 hours",
    ),
    (
        "an always-required field the template does not have",
        {"always_required": "overall, nope"},
        {"always_required": ["overall", "nope"]},
        ["--always-required", "overall,nope"],
        "'nope' is not a field of this template; choose from accuracy, coherence, overall",
    ),
    (
        "gold pairs on a ranking batch",
        {"template": "ranking", "gold_pairs": "1 > 2"},
        {"template": "ranking", "gold_pairs": "1 > 2"},
        ["--template", "ranking", "--gold", "1>2"],
        "Gold pairs are for comparison batches",
    ),
    (
        "a maximum overlap under the overlap",
        {"overlap": 3, "max_overlap": 2},
        {"overlap": 3, "max_overlap": 2},
        ["--overlap", "3", "--max-overlap", "2"],
        "The maximum overlap is at least the overlap (3): leave it empty for no extra judgements",
    ),
    (
        "a maximum overlap over 10",
        {"max_overlap": 11},
        {"max_overlap": 11},
        ["--max-overlap", "11"],
        "The maximum overlap is 1 to 10 labelers per item",
    ),
    (
        "a rank agreement threshold that is no tau",
        {"rank_agreement_threshold": 1.5},
        {"rank_agreement_threshold": 1.5},
        ["--rank-agreement-threshold", "1.5"],
        "The rank agreement threshold is a Kendall tau, -1 to 1",
    ),
    (
        "an agreement cutoff over 1",
        {"agreement_cutoff": 1.2},
        {"agreement_cutoff": 1.2},
        ["--agreement-cutoff", "1.2"],
        "The agreement cutoff is a share of judgements, 0 to 1",
    ),
    (
        "a flag cutoff under 0",
        {"flag_cutoff": -0.1},
        {"flag_cutoff": -0.1},
        ["--flag-cutoff", "-0.1"],
        "The flag cutoff is a share of judgements, 0 to 1",
    ),
    (
        "a gold threshold over 1",
        {"gold_threshold": 1.5},
        {"gold_threshold": 1.5},
        ["--gold-threshold", "1.5"],
        "The gold accuracy threshold is a share of judgements, 0 to 1",
    ),
    (
        "no gold items before a pause",
        {"gold_min_items": 0},
        {"gold_min_items": 0},
        ["--gold-min-items", "0"],
        "Gold items before a pause: 1 to 1000",
    ),
]


@pytest.mark.parametrize(
    ("page", "api", "command", "message"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_the_console_form_the_api_and_the_command_refuse_a_bad_batch_with_the_same_message(
    client_for, alice, questions, tmp_path, page, api, command, message
):
    from django.utils.html import escape

    data = answers_file(SKY, {**SKY, "answer": "Blue light scatters more."})
    path = tmp_path / "answers.jsonl"
    path.write_bytes(data)

    def upload(value):
        return SimpleUploadedFile("answers.jsonl", data) if value is True else value

    client = client_for(alice)
    form = {
        "name": "Bad",
        "template": "minimal_comparison",
        "source": "bank",
        "overlap": 1,
        "required_probability": 0.1,
        "lease_minutes": 30,
        "revision_minutes": 60,
    }
    response = client.post(
        reverse("console:feedback_create"), {**form, **{k: upload(v) for k, v in page.items()}}
    )
    assert response.status_code == 400
    assert escape(message) in response.content.decode()
    body = {"name": "Bad", "template": "minimal_comparison", "source": "bank"}
    answer = client.post("/api/batches", {**body, **{k: upload(v) for k, v in api.items()}})
    assert answer.status_code == 400
    assert any(message in error for errors in answer.json().values() for error in errors), answer.json()
    arguments = [str(path) if value is True else value for value in command]
    with pytest.raises(CommandError) as refused:
        call_command(
            "create_feedback_batch", "Bad", "--template", "minimal_comparison", "--source", "bank", *arguments
        )
    assert message in str(refused.value) and "nothing was created" in str(refused.value)
    assert not FeedbackBatch.objects.exists() and not Answer.objects.exists()


def test_a_ranking_batch_takes_a_metadata_set_and_gets_webgpts_by_default(client_for, alice, questions):
    answers = import_answers(answers_file(*[{**SKY, "answer": f"answer {i}"} for i in range(4)]))
    chosen = create_feedback_batch(alice, BatchSettings("plain", "ranking", "webgpt"), [answers])
    assert chosen.preset == ""  # the default set, stored as no preset: one kind of task, chosen or not
    assert ranking_tags(chosen.preset) == ranking_tags("webgpt")
    form = {"name": "assistant", "template": "ranking", "preset": "instructgpt", "source": "bank"}
    form |= {"overlap": 1, "required_probability": 0.1, "lease_minutes": 30, "revision_minutes": 60}
    assert client_for(alice).post(reverse("console:feedback_create"), form).status_code == 302
    assert FeedbackBatch.objects.get(name="assistant").preset == "instructgpt"
    with pytest.raises(BatchError, match=r"There is no ranking preset 'gophercite' \(webgpt, instructgpt\)"):
        create_feedback_batch(alice, BatchSettings("x", "ranking", "gophercite"), [answers])
    with pytest.raises(BatchError, match="Only rating and ranking batches take a preset"):
        create_feedback_batch(alice, BatchSettings("x", "webgpt_comparison", "webgpt"), [answers[:2]])
