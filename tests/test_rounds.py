"""Rounds: started from sampling runs (the one check for the page and the API, refusals by field, nothing
created), numbered in order, and everything else found from the runs: the batches made from them, the
exports of those batches, the training runs on the exports and the models they left. The pages link every
object to what it came from, and retraining the reward model is the training form prefilled."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from django.urls import reverse

from annotation.models import Export, FeedbackBatch
from training.models import ModelCheckpoint, Round, RunKind, RunStatus, SamplingRun, TrainingRun
from training.round_views import compare_with_previous
from training.rounds import RoundError, create_round, round_contents

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
    assert f'<option value="{run.pk}" selected>' in page.content.decode()

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
