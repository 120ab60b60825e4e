"""Feedback batches from sampling runs (training.evaluation.pairing): every pairing (two samples of a run,
two runs' chosen answers, a run against the demonstrations, a ranking group, ratings), the sides each item
records, the questions skipped and why, declined answers left out unless asked for, the refusals of the
console form, the API and the command (the field named, nothing created), the batch's page and API view,
and the blinding of model-vs-human pairs (nothing a labeler receives says which answer is the model's).

Runs are made as rows (a SamplingRun, its Samples and their episodes): the pairing reads only those rows,
so no model has to run."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from rest_framework.test import APIClient

from annotation.feedback import assignment as work
from annotation.feedback.batches import BatchError, BatchSettings, create_batch_from_source
from annotation.models import (
    Answer,
    Episode,
    EpisodeKind,
    EpisodeStatus,
    FeedbackBatch,
    Question,
    SourceKind,
)
from training.models import RunStatus, Sample, SamplingRun

pytestmark = pytest.mark.django_db
POLICY = "zebra-policy-7"  # a name no page would show by chance
QUOTE = {
    "title": "Sky",
    "url": "https://en.wikipedia.org/wiki/Sky",
    "domain": "en.wikipedia.org",
    "extract": "x",
}
NASTY = '<script>alert("x")</script>'


def ask(*texts: str) -> list[Question]:
    return [Question.objects.create(text=text, key=f"key-{text}", dataset="demo") for text in texts]


def episode(question: Question, answer: str, *, user: Any = None) -> Episode:
    """A finished episode: a human demonstration when ``user`` is given, else a model sample."""
    return Episode.objects.create(
        kind=EpisodeKind.HUMAN if user else EpisodeKind.MODEL,
        user=user,
        policy="" if user else POLICY,
        question=question,
        status=EpisodeStatus.FINISHED,
        corpus="freshwiki",
        settings={},
        state={"quotes": [QUOTE]},
        answer=answer,
        finished_at=timezone.now(),
    )


def make_run(
    samples: dict[Question, list[float | str | None]],
    *,
    declined: tuple[Question, ...] = (),
    scored: bool = True,
    status: str = RunStatus.DONE,
    policy: str = POLICY,
) -> SamplingRun:
    """A run as the sampling job leaves it. Per question, one entry per sample: its score, or "" for a
    sample without an answer. The chosen sample is the best-scored answered one (unscored: the first), none
    for the ``declined`` questions, whose samples all say declined."""
    run = SamplingRun.objects.create(
        policy_name=policy,
        reward_model_name="tiny-rm" if scored else "",
        n=max(len(scores) for scores in samples.values()),
        question_ids=[question.pk for question in samples],
        status=status,
    )
    for question, scores in samples.items():
        answered = [i for i, score in enumerate(scores) if score != ""]
        if scored:
            best = max(answered, key=lambda i: (scores[i] or 0, -i), default=None)
        else:
            best = answered[0] if answered else None
        for index, score in enumerate(scores):
            Sample.objects.create(
                run=run,
                episode=episode(question, "" if score == "" else f"Answer {index} to {question.text}"),
                question=question,
                index=index,
                score=None if score == "" else score,
                chosen=index == best and question not in declined,
                declined=question in declined,
            )
    return run


def sample_answer(run: SamplingRun, question: Question, index: int) -> Answer:
    return Answer.objects.get(
        episode__sample__run=run, episode__sample__question=question, episode__sample__index=index
    )


def batch_from(template: str, runs: list[SamplingRun], preset: str = "", **settings: Any) -> FeedbackBatch:
    config = BatchSettings("From runs", template, preset, runs=[run.pk for run in runs], **settings)
    return create_batch_from_source(None, config, "runs")


def items_of(batch: FeedbackBatch) -> list[tuple[int, dict[str, str], set[int]]]:
    return [
        (item.question_id, item.sides, set(item.answers.values_list("pk", flat=True)))
        for item in batch.items.order_by("pk")
    ]


def test_one_run_pairs_its_samples_with_the_reward_models_favourite_on_side_a():
    sky, sea, dry = ask("Why is the sky blue?", "Why is the sea salty?", "Why is the desert dry?")
    run = make_run({sky: [0.1, 0.9, 0.5], sea: [0.4, ""], dry: [0.3, 0.3]})
    batch = batch_from("webgpt_comparison", [run], pairs_per_question=2)
    s = {(q, i): sample_answer(run, q, i).pk for q, i in [(sky, 0), (sky, 1), (sky, 2), (dry, 0), (dry, 1)]}
    # Sky: the first pair is (0, 1); the next spreads the work to sample 2: (0, 2), not (1, 2). Sample 1
    # scored 0.9 > 0.1 and sample 2 0.5 > 0.1, so they are side A. Dry: equal scores, the lower index is A.
    assert items_of(batch) == [
        (sky.pk, {str(s[sky, 1]): "A", str(s[sky, 0]): "B"}, {s[sky, 0], s[sky, 1]}),
        (sky.pk, {str(s[sky, 2]): "A", str(s[sky, 0]): "B"}, {s[sky, 0], s[sky, 2]}),
        (dry.pk, {str(s[dry, 0]): "A", str(s[dry, 1]): "B"}, {s[dry, 0], s[dry, 1]}),
    ]
    assert batch.origin == {
        "source": "runs",
        "pairing": "samples",
        "runs": [run.pk],
        "run_labels": {str(run.pk): f"run {run.pk}: {POLICY} best-of-3"},
        "sides": {
            "A": f"run {run.pk}: {POLICY} best-of-3, the sample scored higher by tiny-rm",
            "B": f"run {run.pk}: {POLICY} best-of-3, the other sample",
        },
        "include_declined": False,
        "pairs_per_question": 2,
        "declined_answers": [],
        "skipped": [
            {"question": sea.pk, "text": sea.text, "reason": "only 1 answered sample (a pair needs 2)"}
        ],
    }
    assert list(batch.sampling_runs.all()) == [run]
    answer = Answer.objects.get(pk=s[sky, 1])  # where it came from is kept, for researchers
    assert answer.source_kind == SourceKind.MODEL
    assert answer.source | {"episode": 0} == {
        "episode": 0,
        "policy": POLICY,
        "sampling_run": run.pk,
        "sample_index": 1,
    }


def test_an_unscored_run_puts_the_lower_index_on_side_a():
    (sky,) = ask("Why is the sky blue?")
    run = make_run({sky: [None, None, None]}, scored=False)
    batch = batch_from("minimal_comparison", [run], pairs_per_question=10)  # 3 samples make 3 pairs
    pairs = [
        (sample_answer(run, sky, a).pk, sample_answer(run, sky, b).pk) for a, b in [(0, 1), (0, 2), (1, 2)]
    ]
    assert [side for _, side, _ in items_of(batch)] == [{str(a): "A", str(b): "B"} for a, b in pairs]
    assert batch.origin["sides"]["A"].endswith("the lower sample index")


def test_two_runs_pair_their_chosen_answers_on_the_questions_both_cover():
    sky, sea, dry, wet = ask("Why is the sky blue?", "Why is the sea salty?", "Why is it dry?", "Why wet?")
    four = make_run({sky: [0.2, 0.8, 0.1, 0.3], sea: [0.5, 0.1, 0.2, 0.2], dry: [0.1, 0.2, 0.3, 0.4]})
    one = make_run({sky: [0.7], sea: [0.1], wet: [0.4]}, declined=(sea,), policy="other-policy")
    batch = batch_from("webgpt_comparison", [four, one])
    chosen_four, chosen_one = sample_answer(four, sky, 1).pk, sample_answer(one, sky, 0).pk
    assert items_of(batch) == [
        (sky.pk, {str(chosen_four): "A", str(chosen_one): "B"}, {chosen_four, chosen_one})
    ]
    assert batch.origin["pairing"] == "runs"
    assert batch.origin["sides"] == {
        "A": f"run {four.pk}: {POLICY} best-of-4",
        "B": f"run {one.pk}: other-policy best-of-1",
    }
    assert batch.origin["skipped"] == [
        {"question": sea.pk, "text": sea.text, "reason": f"run {one.pk} declined it"},
        {"question": dry.pk, "text": dry.text, "reason": f"run {one.pk} has no samples of it"},
        {"question": wet.pk, "text": wet.text, "reason": f"run {four.pk} has no samples of it"},
    ]
    assert set(batch.sampling_runs.all()) == {four, one}


def test_a_run_against_the_demonstrations_pairs_its_chosen_answer_with_each_human_one(
    dana, django_user_model
):
    from tests.conftest import make_user

    erin = make_user(django_user_model, "erin", "demonstrator")
    sky, sea, dry, wet = ask("Why is the sky blue?", "Why is the sea salty?", "Why is it dry?", "Why wet?")
    run = make_run({sky: [0.2, 0.6], sea: [0.5, 0.4], dry: [0.1, 0.2], wet: ["", ""]}, declined=(dry,))
    humans = [episode(sky, "Rayleigh scattering.", user=dana), episode(sky, "Scattering.", user=erin)]
    episode(dry, "Little rain.", user=dana)
    unfinished = episode(sea, "", user=erin)
    unfinished.status = EpisodeStatus.BROWSING  # not finished: not a demonstration to compare with
    unfinished.save()
    batch = batch_from("webgpt_comparison", [run], vs_demonstrations=True, pairs_per_question=2)
    model = sample_answer(run, sky, 1).pk
    human = [Answer.objects.get(episode=h).pk for h in humans]
    assert items_of(batch) == [
        (sky.pk, {str(model): "A", str(human[0]): "B"}, {model, human[0]}),
        (sky.pk, {str(model): "A", str(human[1]): "B"}, {model, human[1]}),
    ]
    assert batch.origin["pairing"] == "vs_demonstrations"
    assert batch.origin["sides"] == {"A": f"run {run.pk}: {POLICY} best-of-2", "B": "human demonstrations"}
    assert [(s["question"], s["reason"]) for s in batch.origin["skipped"]] == [
        (sea.pk, "no human demonstration"),
        (dry.pk, f"run {run.pk} declined it"),
        (wet.pk, f"run {run.pk} has no answer to it; no human demonstration"),
    ]
    assert Answer.objects.get(pk=human[0]).source_kind == SourceKind.DEMONSTRATION
    one_each = batch_from("minimal_comparison", [run], vs_demonstrations=True)  # pairs per question: 1
    assert [answers for _, _, answers in items_of(one_each)] == [{model, human[0]}]


def test_a_ranking_groups_4_to_9_answered_samples_of_a_question():
    sky, sea = ask("Why is the sky blue?", "Why is the sea salty?")
    run = make_run({sky: [0.1 * i for i in range(11)], sea: [0.1, "", 0.3, 0.2]})
    batch = batch_from("ranking", [run])
    ((question, sides, answers),) = items_of(batch)
    assert question == sky.pk and sides == {}
    assert answers == {sample_answer(run, sky, i).pk for i in range(9)}  # the 9 lowest indices
    assert batch.origin["pairing"] == "group" and batch.origin["sides"] == {}
    assert batch.origin["skipped"] == [
        {"question": sea.pk, "text": sea.text, "reason": "only 3 answered samples (a ranking needs 4)"}
    ]


def test_ratings_take_each_runs_chosen_answer_and_declined_ones_only_when_asked():
    sky, sea = ask("Why is the sky blue?", "Why is the sea salty?")
    run = make_run({sky: [0.2, 0.6], sea: [0.1, 0.3, ""]}, declined=(sea,))
    other = make_run({sky: [0.5], sea: [0.4]}, policy="other-policy")
    batch = batch_from("rating", [run], "gophercite")
    chosen = sample_answer(run, sky, 1).pk
    assert items_of(batch) == [(sky.pk, {}, {chosen})]
    assert batch.origin["pairing"] == "chosen" and batch.origin["include_declined"] is False
    assert batch.origin["skipped"] == [
        {"question": sea.pk, "text": sea.text, "reason": f"run {run.pk} declined it"}
    ]
    with_declined = batch_from("rating", [run], "gophercite", include_declined=True)
    declined = sample_answer(run, sea, 1).pk  # the declined answer: the best-scored answered sample
    assert items_of(with_declined) == [(sky.pk, {}, {chosen}), (sea.pk, {}, {declined})]
    assert with_declined.origin["declined_answers"] == [declined] and with_declined.origin["skipped"] == []
    both = batch_from("rating", [run, other], "truthfulqa")
    assert [answers for _, _, answers in items_of(both)] == [
        {chosen},
        {sample_answer(other, sky, 0).pk},
        {sample_answer(other, sea, 0).pk},
    ]
    assert [s["reason"] for s in both.origin["skipped"]] == [f"run {run.pk} declined it"]


def test_declined_questions_are_paired_only_when_asked_for():
    sky, sea = ask("Why is the sky blue?", "Why is the sea salty?")
    run = make_run({sky: [0.2, 0.6], sea: [0.1, 0.3]}, declined=(sea,))
    left_out = batch_from("minimal_comparison", [run])
    assert [question for question, _, _ in items_of(left_out)] == [sky.pk]
    assert left_out.origin["skipped"][0]["reason"] == f"run {run.pk} declined it"
    paired = batch_from("minimal_comparison", [run], include_declined=True)
    assert [question for question, _, _ in items_of(paired)] == [sky.pk, sea.pk]
    declined = [sample_answer(run, sea, i).pk for i in (0, 1)]
    assert paired.origin["declined_answers"] == sorted(declined) and paired.origin["include_declined"] is True
    other = make_run({sky: [0.5], sea: [0.5]}, policy="other-policy")
    runs = batch_from("minimal_comparison", [run, other], include_declined=True)
    assert items_of(runs)[1][2] == {declined[1], sample_answer(other, sea, 0).pk}  # its best-scored answer


def test_when_every_question_is_skipped_nothing_is_created_and_the_error_says_why():
    sky, sea = ask("Why is the sky blue?", "Why is the sea salty?")
    run = make_run({sky: [0.2, 0.6], sea: [0.1, 0.3]}, declined=(sky, sea))
    with pytest.raises(BatchError) as refused:
        batch_from("ranking", [run])
    assert refused.value.message == (
        f"Every question was skipped, so there is nothing to judge: run {run.pk} declined it (2)"
    )
    assert not FeedbackBatch.objects.exists() and not Answer.objects.exists()


# The refusals: the console form, the API and the command name the same field ----------------------------


def _runs() -> dict[str, SamplingRun]:
    sky, sea = ask("Why is the sky blue?", "Why is the sea salty?")
    return {
        "done": make_run({sky: [0.2, 0.6], sea: [0.1, 0.3]}),
        "other": make_run({sky: [0.4], sea: [0.5]}, policy="other-policy"),
        "third": make_run({sky: [0.4]}),
        "queued": make_run({sky: [0.4]}, status=RunStatus.QUEUED),
    }


# (id, source, template, preset, run names, other inputs, field, message)
REFUSALS = [
    (
        "three runs",
        "runs",
        "minimal_comparison",
        "",
        ["done", "other", "third"],
        {},
        "runs",
        "Choose one or two sampling runs.",
    ),
    ("no run", "runs", "minimal_comparison", "", [], {}, "runs", "Choose one or two sampling runs."),
    (
        "queued run",
        "runs",
        "minimal_comparison",
        "",
        ["queued"],
        {},
        "runs",
        "is queued: only finished runs can be paired",
    ),
    (
        "missing run",
        "runs",
        "minimal_comparison",
        "",
        [999999],
        {},
        "runs",
        "There is no sampling run 999999.",
    ),
    (
        "same run twice",
        "runs",
        "minimal_comparison",
        "",
        ["done", "done"],
        {},
        "runs",
        "Choose two different sampling runs",
    ),
    (
        "runs, another source",
        "bank",
        "minimal_comparison",
        "",
        ["done"],
        {},
        "runs",
        "Sampling runs: read only when",
    ),
    (
        "two runs vs humans",
        "runs",
        "webgpt_comparison",
        "",
        ["done", "other"],
        {"vs_demonstrations": True},
        "vs_demonstrations",
        "A comparison with the demonstrations takes one run",
    ),
    (
        "ratings vs humans",
        "runs",
        "rating",
        "gophercite",
        ["done"],
        {"vs_demonstrations": True},
        "vs_demonstrations",
        "in comparison batches only",
    ),
    (
        "ranking of two runs",
        "runs",
        "ranking",
        "",
        ["done", "other"],
        {},
        "runs",
        "A ranking groups the samples of one run",
    ),
    (
        "11 pairs",
        "runs",
        "minimal_comparison",
        "",
        ["done"],
        {"pairs_per_question": 11},
        "pairs_per_question",
        "Pairs per question are 1 to 10.",
    ),
    (
        "0 pairs",
        "runs",
        "minimal_comparison",
        "",
        ["done"],
        {"pairs_per_question": 0},
        "pairs_per_question",
        "Pairs per question are 1 to 10.",
    ),
    (
        "pairs of two runs",
        "runs",
        "minimal_comparison",
        "",
        ["done", "other"],
        {"pairs_per_question": 2},
        "pairs_per_question",
        "Two runs give one pair per question",
    ),
    (
        "declined, another source",
        "demonstrations",
        "minimal_comparison",
        "",
        [],
        {"include_declined": True},
        "include_declined",
        "Include declined answers: read only when",
    ),
    (
        "nothing left",
        "runs",
        "ranking",
        "",
        ["done"],
        {},
        None,
        "Every question was skipped, so there is nothing to judge",
    ),
]
COMMAND_OPTIONS = {"runs": "--from-run", "vs_demonstrations": "--vs-demonstrations"}
COMMAND_OPTIONS |= {"pairs_per_question": "--pairs-per-question", "include_declined": "--include-declined"}


@pytest.mark.parametrize(
    ("source", "template", "preset", "names", "inputs", "field", "message"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_the_form_the_api_and_the_command_refuse_alike_and_create_nothing(
    client_for, alice, source, template, preset, names, inputs, field, message
):
    runs = _runs()
    ids = [runs[name].pk if isinstance(name, str) else name for name in names]
    form = {
        "name": "Bad",
        "template": template,
        "preset": preset,
        "source": source,
        "runs": ids,
        "overlap": 1,
        "required_probability": 0.1,
        "lease_minutes": 30,
        "revision_minutes": 60,
        **{key: ("on" if value is True else value) for key, value in inputs.items()},
    }
    response = client_for(alice).post(reverse("console:feedback_create"), form)
    assert response.status_code == 400
    errors = response.context["form"].errors.get(field or "__all__", [])
    assert any(message in error for error in errors), response.context["form"].errors
    assert escape(message) in response.content.decode()

    body = {"name": "Bad", "template": template, "preset": preset, "source": source, "runs": ids, **inputs}
    answer = client_for(alice).post("/api/batches", body, content_type="application/json")
    assert answer.status_code == 400
    assert any(message in error for error in answer.json()[field or "non_field_errors"]), answer.json()

    arguments = ["--template", template, "--source", source, *(["--preset", preset] if preset else [])]
    arguments += [part for pk in ids for part in ("--from-run", str(pk))]
    for key, value in inputs.items():
        arguments += [COMMAND_OPTIONS[key]] if value is True else [COMMAND_OPTIONS[key], str(value)]
    with pytest.raises(CommandError) as refused:
        call_command("create_feedback_batch", "Bad", *arguments)
    assert message.rstrip(".") in str(refused.value) and "nothing was created" in str(refused.value)
    if field:
        assert str(refused.value).startswith(f"{COMMAND_OPTIONS[field]}: ")
    assert not FeedbackBatch.objects.exists() and not Answer.objects.exists()


# The console, the API and the command -----------------------------------------------------------------


def test_the_run_page_links_to_a_prefilled_form_and_the_batch_page_shows_the_origin(client_for, alice):
    sky, sea = ask("Why is the sky blue?", NASTY)
    run = make_run({sky: [0.2, 0.6], sea: [0.1, ""]})
    queued = make_run({sky: [0.1]}, status=RunStatus.QUEUED)
    client = client_for(alice)
    link = f"{reverse('console:feedback')}?source=runs&amp;runs={run.pk}"
    assert link in client.get(reverse("training:sampling_run", args=[run.pk])).content.decode()
    assert (
        "Make a feedback batch"
        not in client.get(reverse("training:sampling_run", args=[queued.pk])).content.decode()
    )
    page = client.get(f"{reverse('console:feedback')}?source=runs&runs={run.pk}&runs=x&pairs_per_question=99")
    form = page.context["form"]
    assert form.initial == {"source": "runs", "runs": [run.pk], "name": f"Answers of run {run.pk}"}
    html = page.content.decode()
    assert re.search(
        rf'<option value="{run.pk}" selected>run {run.pk}: {POLICY} best-of-2, 2 questions', html
    )
    assert f'<option value="{queued.pk}"' not in html  # only finished runs are offered
    assert 'name="vs_demonstrations"' in html and 'name="include_declined"' in html
    assert 'name="pairs_per_question"' in html and 'select name="runs"' in html and "multiple" in html

    data = {
        "name": "Samples of run",
        "template": "minimal_comparison",
        "source": "runs",
        "runs": [run.pk],
        "pairs_per_question": "",  # left empty: 1
        "overlap": 1,
        "required_probability": 0.1,
        "lease_minutes": 30,
        "revision_minutes": 60,
    }
    response = client.post(reverse("console:feedback_create"), data)
    batch = FeedbackBatch.objects.get()
    assert response.status_code == 302 and response.url == reverse("console:feedback_batch", args=[batch.pk])
    assert batch.origin["pairs_per_question"] == 1 and batch.items.count() == 1
    page = client.get(response.url).content.decode()
    assert f'<a href="{reverse("training:sampling_run", args=[run.pk])}">run {run.pk}</a>' in page
    assert f"run {run.pk}: {POLICY} best-of-2, the sample scored higher by tiny-rm" in page
    assert "Skipped questions (1)" in page and "only 1 answered sample (a pair needs 2)" in page
    assert escape(NASTY) in page and NASTY not in page


def test_the_api_makes_a_batch_from_runs_and_shows_its_origin(alice):
    sky, sea = ask("Why is the sky blue?", "Why is the sea salty?")
    four = make_run({sky: [0.2, 0.6], sea: [0.1, 0.3]})
    one = make_run({sky: [0.5]}, policy="other-policy")
    client = APIClient()
    client.force_authenticate(alice)
    body = {
        "name": "Four vs one",
        "template": "minimal_comparison",
        "source": "runs",
        "runs": [four.pk, one.pk],
    }
    created = client.post("/api/batches", body, format="json")
    assert created.status_code == 201, created.json()
    batch = created.json()
    assert sorted(batch["sampling_runs"]) == sorted([four.pk, one.pk])
    assert batch["origin"]["pairing"] == "runs" and batch["origin"]["runs"] == [four.pk, one.pk]
    assert batch["origin"]["skipped"] == [
        {"question": sea.pk, "text": sea.text, "reason": f"run {one.pk} has no samples of it"}
    ]
    shown = client.get(f"/api/batches/{batch['id']}").json()
    assert shown["origin"] == batch["origin"] and shown["progress"]["items"] == 1
    listed = client.get("/api/batches").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows[0]["origin"]["sides"]["B"] == f"run {one.pk}: other-policy best-of-1"
    old = client.post(
        "/api/batches",
        {"name": "Old", "template": "rating", "preset": "gophercite", "source": "bank"},
        format="json",
    )
    assert (
        old.status_code == 201
        and old.json()["origin"] == {"source": "bank"}
        and old.json()["sampling_runs"] == []
    )


def test_the_command_makes_a_batch_from_runs_and_prints_the_skipped_questions(capsys):
    sky, sea = ask("Why is the sky blue?", "Why is the sea salty?")
    run = make_run({sky: [0.2, 0.6], sea: [0.1, 0.3]}, declined=(sea,))
    call_command(
        "create_feedback_batch",
        "From the command",
        "--template",
        "minimal_comparison",
        "--from-run",
        str(run.pk),
    )
    out = capsys.readouterr().out
    batch = FeedbackBatch.objects.get()
    assert f"batch {batch.pk} 'From the command': 1 items (minimal_comparison)" in out
    assert f"side A: run {run.pk}: {POLICY} best-of-2, the sample scored higher by tiny-rm" in out
    assert f"skipped question {sea.pk} ('Why is the sea salty?'): run {run.pk} declined it" in out
    options = ["--template", "minimal_comparison", "--from-run", str(run.pk), "--include-declined"]
    call_command("create_feedback_batch", "With declined", *options)
    assert FeedbackBatch.objects.get(name="With declined").items.count() == 2


# Blinding ---------------------------------------------------------------------------------------------


def _walk_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for part in value.values() for key in _walk_keys(part)}
    if isinstance(value, list):
        return {key for part in value for key in _walk_keys(part)}
    return set()


def test_labelers_cannot_tell_the_models_answer_from_the_humans(client_for, alice, bob, dana):
    questions = ask(*[f"Question number {i}?" for i in range(30)])
    run = make_run({question: [0.3, 0.7] for question in questions})
    for question in questions:
        episode(question, f"A human answer to {question.text}", user=dana)
    batch = batch_from("webgpt_comparison", [run], vs_demonstrations=True)
    assert batch.items.count() == 30
    forbidden = [
        POLICY.lower(),
        f"run {run.pk}",
        "sampling",
        "sample",
        "demonstration",
        "model",
        "episode",
        "best-of",
        "tiny-rm",
    ]

    def check(text: str) -> None:
        for word in forbidden:
            assert word not in text.lower(), word

    client = client_for(bob)
    started = client.post(reverse("annotation:task_start"))
    task = work.next_assignment(bob)
    assert started.url == reverse("annotation:task", args=[task.pk])
    check(client.get(started.url).content.decode())
    api = APIClient()
    api.force_authenticate(bob)
    for data in (api.post("/api/tasks/next").json(), api.get(f"/api/tasks/{task.pk}").json()):
        assert data["id"] == task.pk
        check(json.dumps(data))
        first, second = data["answers"]
        assert _walk_keys(first) == _walk_keys(second) == {"slot", "text", "quotes", "index", *QUOTE}
        assert "A human answer" in first["text"] + second["text"]
    # The order is drawn per assignment and recorded: the model's answer is not always shown first.
    model_first = []
    for _ in range(30):
        task = work.next_assignment(bob)
        sides = task.item.sides
        assert set(task.order) == {int(pk) for pk in sides}
        model_first.append(sides[str(task.order[0])] == "A")
        work.skip(task.pk, bob, "testing the order")
    assert work.next_assignment(bob) is None
    assert 0 < sum(model_first) < 30
    assert client_for(bob).get(reverse("console:feedback_batch", args=[batch.pk])).status_code == 403
    assert api.get(f"/api/batches/{batch.pk}").status_code == 404
