"""Rounds: started from sampling runs (the one check for the page and the API, refusals by field, nothing
created), numbered in order, and everything else found from the runs: the batches made from them, the
exports of those batches, the training runs on the exports and the models they left. The pages link every
object to what it came from, and retraining the reward model is the training form prefilled."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from annotation.exports.service import export_path, run_export_job
from annotation.feedback.agreement import wilson_interval
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    Export,
    FeedbackBatch,
    FeedbackItem,
    ImportedComparison,
    Question,
    SourceKind,
    Split,
)
from training.evaluation.round_data import MIN_TRAIN, MIN_VALIDATION, too_few
from training.evaluation.round_views import compare_with_previous
from training.evaluation.rounds import RoundError, create_round, round_contents
from training.models import ModelCheckpoint, Round, RunKind, RunStatus, SamplingRun, TrainingRun
from training.runs.data import comparisons, held_out_split, read_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def reward_model(tmp_path) -> ModelCheckpoint:
    return ModelCheckpoint.objects.create(kind=RunKind.RM, name="demo-rm", base_model="x", path=str(tmp_path))


def sampling_run(reward_model=None, n=2) -> SamplingRun:
    return SamplingRun.objects.create(
        policy_name="SmolLM2 prompted",
        reward_model=reward_model,
        reward_model_name=reward_model.name if reward_model else "",
        n=n,
        status=RunStatus.DONE,
    )


def loop_turn(run: SamplingRun) -> dict:
    """What one turn makes from a run: a batch, its rm-pairs export, a reward model trained on it."""
    batch = FeedbackBatch.objects.create(name=f"batch of run {run.pk}", template="webgpt_comparison")
    batch.sampling_runs.add(run)
    export = Export.objects.create(export_format="rm-pairs", status="done", filters={"batch": batch.pk})
    training = TrainingRun.objects.create(
        kind=RunKind.RM, export=export, status=RunStatus.DONE, metrics={"eval_accuracy": 0.625}
    )
    model = ModelCheckpoint.objects.create(
        kind=RunKind.RM, name="rm round 2", base_model="x", path="/m", run=training
    )
    return {"batch": batch, "export": export, "training": training, "model": model}


def question(split: str = Split.RM) -> Question:
    return Question.objects.create(
        text=f"q {uuid.uuid4()}", key=uuid.uuid4().hex, dataset="eli5", split=split
    )


def answers_to(asked: Question) -> list[Answer]:
    return [
        Answer.objects.create(question=asked, text=text, source_kind=SourceKind.REFERENCE)
        for text in ("A good answer [1].", "A bad one.")
    ]


def judge(batch: FeedbackBatch, labeler, count: int, split: str = Split.RM) -> None:
    """``count`` submitted judgements in ``batch``, one pair of a new question each, A better."""
    now = timezone.now()
    for _ in range(count):
        asked = question(split)
        item = FeedbackItem.objects.create(batch=batch, question=asked)
        pair = answers_to(asked)
        item.answers.set(pair)
        Assignment.objects.create(
            item=item,
            labeler=labeler,
            status=AssignmentStatus.SUBMITTED,
            order=[answer.pk for answer in pair],
            leased_until=now + timedelta(hours=1),
            submitted_at=now,
            response={"ratings": {"overall": "a_better"}},
        )


def imported(count: int, split: str = Split.RM) -> None:
    for _ in range(count):
        asked = question(split)
        first, second = answers_to(asked)
        ImportedComparison.objects.create(
            question=asked, answer_0=first, answer_1=second, score_0=1.0, source="t", row_key=uuid.uuid4().hex
        )


def batch_of(run: SamplingRun, name: str) -> FeedbackBatch:
    batch = FeedbackBatch.objects.create(name=name, template="webgpt_comparison")
    batch.sampling_runs.add(run)
    return batch


def test_rounds_are_numbered_in_order_and_found_from_their_runs(alice, reward_model):
    first, second = sampling_run(reward_model), sampling_run(reward_model, n=4)
    made = loop_turn(first)
    unrelated = FeedbackBatch.objects.create(name="someone else's", template="webgpt_comparison")
    Export.objects.create(export_format="rm-pairs", filters={"batch": unrelated.pk})

    one = create_round(alice, "best-of-2", "", [first.pk])
    two = create_round(alice, "", "", [second.pk])

    assert (one.number, two.number) == (1, 2)
    contents = round_contents(one)
    assert contents.sampling_runs == [first]
    assert contents.reward_models == [reward_model]
    assert contents.policies == ["SmolLM2 prompted"]
    assert contents.batches == [made["batch"]]
    assert contents.exports == [made["export"]]
    assert contents.training_runs == [made["training"]]
    assert contents.checkpoints == [made["model"]]
    assert contents.retrain_exports == [made["export"]]
    empty = round_contents(two)
    assert (empty.batches, empty.exports, empty.training_runs) == ([], [], [])


def test_an_export_of_a_runs_samples_belongs_to_its_round(alice):
    run = sampling_run()
    export = Export.objects.create(export_format="bc-pairs", filters={"sampling_run": run.pk, "batch": None})
    assert round_contents(create_round(alice, "", "", [run.pk])).exports == [export]


@pytest.mark.parametrize(
    ("name", "runs", "field", "message"),
    [
        ("", [], "sampling_runs", "Choose the sampling runs"),
        ("", ["missing"], "sampling_runs", "There is no sampling run"),
        ("", ["twice"], "sampling_runs", "named twice"),
        ("x" * 201, ["one"], "name", "at most 200"),
    ],
)
def test_a_refused_round_names_its_field_and_creates_nothing(alice, name, runs, field, message):
    run = sampling_run()
    ids = (
        {"missing": [2_000_000_000], "twice": [run.pk, run.pk], "one": [run.pk]}.get(runs[0], [])
        if runs
        else []
    )
    with pytest.raises(RoundError) as refused:
        create_round(alice, name, "", ids)
    assert refused.value.field == field
    assert message in refused.value.message
    assert not Round.objects.exists()


def test_the_page_starts_a_round_prefilled_from_a_run_and_refuses_on_the_field(client_for, alice):
    run = sampling_run()
    client = client_for(alice)
    page = client.get(reverse("training:rounds"), {"runs": run.pk})
    assert page.status_code == 200
    assert re.search(
        rf'<option value="{run.pk}" selected title="run {run.pk}: [^"]*">', page.content.decode()
    )

    refused = client.post(reverse("training:round_create"), {"name": "r", "sampling_runs": []})
    assert refused.status_code == 400
    assert "No round was started" in refused.content.decode()
    assert not Round.objects.exists()

    started = client.post(
        reverse("training:round_create"), {"name": "<b>first</b>", "sampling_runs": [run.pk]}
    )
    created = Round.objects.get()
    assert started.url == reverse("training:round", args=[created.pk])
    listing = client.get(reverse("training:rounds")).content.decode()
    assert "&lt;b&gt;first&lt;/b&gt;" in listing and "<b>first</b>" not in listing
    assert reverse("training:sampling_run", args=[run.pk]) in listing
    sampling_page = client.get(reverse("training:sampling_run", args=[run.pk])).content.decode()
    assert reverse("training:round", args=[created.pk]) in sampling_page


def test_the_round_page_links_everything_to_what_it_came_from(client_for, alice, reward_model):
    run = sampling_run(reward_model)
    made = loop_turn(run)
    round_ = create_round(alice, "", "", [run.pk])
    html = client_for(alice).get(reverse("training:round", args=[round_.pk])).content.decode()
    for link in (
        reverse("training:sampling_run", args=[run.pk]),
        reverse("console:feedback_batch", args=[made["batch"].pk]),
        reverse("console:feedback_results", args=[made["batch"].pk]),
        reverse("console:export", args=[made["export"].pk]),
        reverse("training:run", args=[made["training"].pk]),
    ):
        assert f'href="{link}' in html, link
    assert "rm round 2" in html and "0.625" in html


def test_retraining_from_a_round_is_the_training_form_prefilled(client_for, alice, reward_model):
    run = sampling_run(reward_model)
    made = loop_turn(run)
    round_ = create_round(alice, "", "", [run.pk])
    client = client_for(alice)
    html = client.get(reverse("training:round", args=[round_.pk])).content.decode()
    start = html.index(reverse("training:new") + "?")
    link = html[start : html.index('"', start)].replace("&amp;", "&")
    query = parse_qs(urlparse(link).query)
    assert query == {"export": [str(made["export"].pk)], "kind": ["rm"], "base": [str(reward_model.pk)]}
    form = client.get(link).context["form"]
    assert form.initial == {"export": made["export"].pk, "kind": "rm", "base_checkpoint": reward_model.pk}

    export_link = (
        reverse("console:exports")
        + f"?batch={made['batch'].pk}&amp;export_format=rm-pairs&amp;exclude_eval=on"
    )
    assert export_link in html
    export_form = client.get(export_link.replace("&amp;", "&")).context["form"]
    assert export_form.initial == {
        "batch": made["batch"].pk,
        "export_format": "rm-pairs",
        "exclude_eval": True,
    }


def test_runs_are_added_to_a_round_once(client_for, alice):
    first, second = sampling_run(), sampling_run()
    round_ = create_round(alice, "", "", [first.pk])
    client = client_for(alice)
    url = reverse("training:round_add_runs", args=[round_.pk])
    assert client.post(url, {"sampling_runs": [second.pk]}).status_code == 302
    again = client.post(url, {"sampling_runs": [first.pk]})
    assert again.status_code == 400 and "in this round already" in again.content.decode()
    assert set(round_.sampling_runs.all()) == {first, second}


def test_a_change_inside_both_intervals_is_not_called_an_improvement():
    def row(value, low, high):
        return {"batches": [{"headline": {"label": "Preference", "value": value, "low": low, "high": high}}]}

    rows = [row(0.40, 0.30, 0.50), row(0.45, 0.35, 0.55), row(0.70, 0.60, 0.80)]
    compare_with_previous(rows)
    assert "change" not in rows[0]["batches"][0]
    assert rows[1]["batches"][0]["change_text"] == "+0.050" and rows[1]["batches"][0]["separated"] is False
    assert rows[2]["batches"][0]["change_text"] == "+0.250" and rows[2]["batches"][0]["separated"] is True


def test_the_api_lists_starts_and_shows_rounds(client_for, alice, reward_model):
    run = sampling_run(reward_model)
    made = loop_turn(run)
    client = client_for(alice)
    refused = client.post(reverse("api-rounds"), {"sampling_runs": []}, content_type="application/json")
    assert refused.status_code == 400 and "sampling_runs" in refused.json()
    created = client.post(
        reverse("api-rounds"), {"name": "one", "sampling_runs": [run.pk]}, content_type="application/json"
    )
    assert created.status_code == 201, created.json()
    body = client.get(reverse("api-round", args=[created.json()["id"]])).json()
    assert body["number"] == 1 and body["sampling_runs"] == [run.pk]
    contents = body["contents"]
    assert [batch["id"] for batch in contents["batches"]] == [made["batch"].pk]
    assert contents["exports"] == [made["export"].pk]
    assert contents["models"] == [made["model"].pk]
    assert contents["reward_models"] == [reward_model.pk]
    assert contents["reward_model_accuracy"]["value"] == 0.625
    assert [r["number"] for r in client.get(reverse("api-rounds")).json()["results"]] == [1]


def test_the_rounds_table_downloads_as_csv_with_its_figures(client_for, alice, reward_model):
    run = sampling_run(reward_model)
    made = loop_turn(run)
    create_round(alice, "=HYPERLINK()", "", [run.pk])
    response = client_for(alice).get(reverse("training:rounds_csv"))
    assert response["Content-Type"].startswith("text/csv")
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("Round,Round name,Batch,Batch name,Figure,Value,95% CI low,95% CI high")
    assert lines[1].startswith(f"1,'=HYPERLINK(),{made['batch'].pk},batch of run {run.pk},Preference for A")
    assert lines[2].startswith("1,'=HYPERLINK(),,,Validation accuracy of the reward model of training run")
    assert ",0.625," in lines[2]


@pytest.fixture
def collected(alice, bob, reward_model) -> dict:
    """Comparisons collected before round 1 (a batch in no round, imported ones), round 1's own, and a later
    round's; each source also has a question of the eval split, which retraining always leaves out."""
    earlier = FeedbackBatch.objects.create(name="demo pairs", template="webgpt_comparison")
    judge(earlier, bob, 4)
    judge(earlier, bob, 1, Split.EVAL)
    imported(2)
    imported(1, Split.EVAL)
    first = sampling_run(reward_model)
    judge(batch_of(first, "round 1 pairs"), bob, 3)
    judge(FeedbackBatch.objects.get(name="round 1 pairs"), bob, 1, Split.EVAL)
    later = sampling_run(reward_model)
    judge(batch_of(later, "round 2 pairs"), bob, 2)
    return {"one": create_round(alice, "", "", [first.pk]), "two": create_round(alice, "", "", [later.pk])}


def test_retraining_offers_the_data_so_far_by_default_and_the_rounds_own_with_their_counts(
    client_for, alice, collected, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    one = collected["one"]
    client = client_for(alice)
    page = client.get(reverse("training:round", args=[one.pk]))
    choices = {choice.key: choice for choice in page.context["retrain_choices"]}
    assert list(choices) == ["so_far:rm-pairs", "round:rm-pairs"]  # the default first
    # So far: the earlier batch's 4, the 2 imported and round 1's 3; round 2's and eval questions left out.
    assert (choices["so_far:rm-pairs"].rows, choices["round:rm-pairs"].rows) == (9, 3)
    html = page.content.decode()
    assert 'value="so_far:rm-pairs" checked' in html and 'value="round:rm-pairs" checked' not in html
    assert "9 pairs on 9 questions" in html and "3 pairs on 3 questions" in html
    warnings = choices["round:rm-pairs"].warnings
    assert warnings and all(escape(warning) in html for warning in warnings)  # warned, not refused

    url = reverse("training:round_retrain", args=[one.pk])
    for key, rows in (("so_far:rm-pairs", 9), ("round:rm-pairs", 3)):
        response = client.post(url, {"choice": key})
        assert response.status_code == 302 and response.url.endswith("#retrain")
        export = run_export_job(Export.objects.latest("pk").pk)
        assert export.row_count == rows
        # The page's split is the training run's own: the same questions held out from the written file.
        items = comparisons(read_rows(export_path(export)))
        train, validation = held_out_split(items, lambda item: item.question, 0.1, 0)
        assert (len(train), len(validation)) == (choices[key].train, choices[key].validation)
    so_far, own = Export.objects.order_by("pk")
    assert so_far.filters["up_to_round"] == 1 and so_far.filters["exclude_eval"] is True
    assert own.filters["round_only"] == 1 and "up_to_round" not in own.filters
    assert round_contents(one).rm_exports == [so_far, own]
    assert round_contents(collected["two"]).rm_exports == []

    html = client.get(reverse("training:round", args=[one.pk])).content.decode()
    for export in (so_far, own):
        assert f"Retrain the reward model on export {export.pk}</a>" in html
    assert "everything collected up to round 1" in html and "the judgements of round 1&#x27;s batches" in html
    assert client.post(url, {"choice": "so_far:rm-groups"}).status_code == 400  # not a choice this round has
    assert Export.objects.count() == 2


def test_the_retraining_block_polls_until_its_export_is_written(client_for, alice, collected):
    one = collected["one"]
    client = client_for(alice)
    client.post(reverse("training:round_retrain", args=[one.pk]), {"choice": "so_far:rm-pairs"})
    polled = client.get(reverse("training:round", args=[one.pk]), headers={"HX-Request": "true"})
    html = polled.content.decode()
    assert html.lstrip().startswith('<div id="round-retrain" hx-get=') and "being written" in html
    assert "HX-Request" in polled["Vary"]
    run_export_job(Export.objects.get().pk)
    html = client.get(
        reverse("training:round", args=[one.pk]), headers={"HX-Request": "true"}
    ).content.decode()
    assert "hx-get" not in html and "Retrain the reward model on export" in html


def test_a_run_on_too_few_rows_is_warned_about_with_the_interval_it_would_read():
    # The validation threshold is where a typical accuracy's interval leaves chance (0.5) behind.
    assert wilson_interval(0.65 * (MIN_VALIDATION - 1), MIN_VALIDATION - 1)[0] <= 0.5
    assert wilson_interval(0.65 * MIN_VALIDATION, MIN_VALIDATION)[0] > 0.5
    assert too_few(MIN_TRAIN, MIN_VALIDATION) == []
    assert too_few(0, 0) == [
        "No pairs to train on yet: judge the round's batches first, or choose the data so far."
    ]
    few = too_few(2, 1)
    assert few[0].startswith("Only 2 pairs to train on")
    assert few[1].startswith("Only 1 pair to validate on: an accuracy of 0.65 would read 0.09 to 0.97")
    assert too_few(MIN_TRAIN - 1, MIN_VALIDATION)[0].startswith(f"Only {MIN_TRAIN - 1} pairs to train on")
    assert too_few(MIN_TRAIN, MIN_VALIDATION - 1)[0].startswith(
        f"Only {MIN_VALIDATION - 1} pairs to validate"
    )


def test_the_round_says_what_its_reward_model_trained_on_and_warns_when_it_was_too_little(
    client_for, alice, reward_model
):
    run = sampling_run(reward_model)
    round_ = create_round(alice, "", "", [run.pk])
    export = Export.objects.create(
        export_format="rm-pairs", status="done", row_count=3, filters={"up_to_round": 1, "exclude_eval": True}
    )
    metrics = {"eval_accuracy": 0.0, "eval_accuracy_low": 0.0, "eval_accuracy_high": 0.793}
    TrainingRun.objects.create(
        kind=RunKind.RM, export=export, status=RunStatus.DONE,
        metrics=metrics | {"train_examples": 2, "validation_examples": 1},
    )  # fmt: skip
    html = client_for(alice).get(reverse("training:round", args=[round_.pk])).content.decode()
    assert "trained on rm-pairs: everything collected up to round 1" in html
    assert "Only 1 pair to validate on" in html and "Only 2 pairs to train on" in html


def test_a_round_offers_only_the_runs_not_in_it_yet(client_for, alice):
    first, second = sampling_run(), sampling_run()
    round_ = create_round(alice, "", "", [first.pk])
    client = client_for(alice)
    offered = client.get(reverse("training:round", args=[round_.pk])).context["form"]
    assert list(offered.fields["sampling_runs"].queryset) == [second]
    client.post(reverse("training:round_add_runs", args=[round_.pk]), {"sampling_runs": [second.pk]})
    html = client.get(reverse("training:round", args=[round_.pk])).content.decode()
    assert "Every sampling run is in this round already" in html
    assert 'name="sampling_runs"' not in html


@pytest.mark.parametrize(
    ("name", "shown"),
    [("Round 1", "round 1"), ("round 1: pairs", "round 1: pairs"), ("Round 12", "round 1: Round 12")],
)
def test_a_name_that_repeats_the_rounds_number_is_shown_once(client_for, alice, name, shown):
    round_ = create_round(alice, name, "", [sampling_run().pk])
    assert str(round_) == shown
    html = client_for(alice).get(reverse("training:round", args=[round_.pk])).content.decode()
    assert f"<h1>{shown}</h1>" in html
