"""Model judgements in exports: human exports leave them out; ``include_model_judgements`` adds a judge
run's judgements to ``comparisons-full``, each marked as a model's (no labeler, the judge, its prompt
version, the order asked), through the page, the API and the command alike; any other format refuses it."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils.html import escape

from annotation.exports.rules import describe_filters
from annotation.models import Export, FeedbackBatch, JudgeKind, JudgeRun, ModelJudgement
from tests.test_exports import export_rows, exports_in_tmp, judged_pair, refusals  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged(django_user_model):
    """The pair two labelers judged, and a judge run that judged it in both orders; a third output it could
    not read."""
    ids, _ = judged_pair(django_user_model)
    batch = FeedbackBatch.objects.get()
    item = batch.items.get()
    run = JudgeRun.objects.create(
        batch=batch,
        judge_kind=JudgeKind.ENDPOINT,
        endpoint="local",
        judge_name="SmolLM2",
        prompt_version="v2",
    )
    for swapped, code in ((False, "a_better"), (True, "b_better")):
        ModelJudgement.objects.create(
            run=run,
            item=item,
            swapped=swapped,
            order=ids[::-1] if swapped else ids,
            response={"ratings": {"overall": code}, "flags": {}},
            raw_output='{"overall": "A better"}',
            confidence=0.75,
        )
    other = JudgeRun.objects.create(batch=batch, judge_kind=JudgeKind.ENDPOINT, judge_name="broken")
    ModelJudgement.objects.create(run=other, item=item, order=ids, response=None, error="not JSON")
    return batch, run, ids


def test_human_exports_leave_model_judgements_out_unless_asked(judged):
    _, run, ids = judged
    human = export_rows("comparisons-full")
    assert [row["source"] for row in human] == ["platform", "platform"]
    assert len(export_rows("webgpt-comparisons")) == len(export_rows("rm-pairs")) == 2
    rows = export_rows("comparisons-full", include_model_judgements=True)
    assert rows[:2] == human  # the labelers' rows first, unchanged
    model = rows[2:]
    assert [(row["source"], row["labeler"], row["judge"]["swapped"]) for row in model] == [
        ("model", None, False),
        ("model", None, True),
    ]  # the unreadable output is left out
    assert model[0]["judge"] == {
        "run": run.pk,
        "kind": "endpoint",
        "name": "SmolLM2",
        "prompt_version": "v2",
        "swapped": False,
        "confidence": 0.75,
    }
    assert model[1]["answer_ids_in_order_shown"] == ids[::-1]
    assert model[1]["response"]["ratings"] == {"overall": "b_better"}
    assert (model[0]["batch"], model[0]["template"], model[0]["question"]["id"]) == (
        "pairs",
        "webgpt_comparison",
        "q7",
    )


def test_the_filters_apply_to_model_judgements_as_to_the_labelers(judged):
    batch, _, _ = judged
    model = {"include_model_judgements": True}

    def sources(**filters) -> list[str]:
        return [row["source"] for row in export_rows("comparisons-full", **model, **filters)]

    assert sources(batch=batch.pk).count("model") == 2
    assert sources(batch=batch.pk + 1) == []
    assert sources(labeler="bob3") == ["platform"]  # a labeler's export holds no model's work
    assert "model" not in sources(source="imported")
    assert sources(template="ranking") == []
    assert sources(until="2000-01-01") == []
    batch.items.update(is_gold=True)
    assert sources(include_gold=False) == []
    batch.items.update(is_gold=False)
    batch.is_screening = True
    batch.save()
    assert "model" not in sources()  # a screening test's judgements are no data


def test_page_api_and_command_take_the_option_alike_and_other_formats_refuse_it(
    judged, client_for, alice, tmp_path
):
    client = client_for(alice)
    client.post(
        reverse("console:exports"), {"export_format": "comparisons-full", "include_model_judgements": "on"}
    )
    body = {"format": "comparisons-full", "include_model_judgements": True}
    assert client.post("/api/exports", body, content_type="application/json").status_code == 202
    call_command("export_dataset", "--format", "comparisons-full", "--include-model-judgements")
    stored = [export.filters for export in Export.objects.order_by("id")]
    assert len(stored) == 3 and all(filters == stored[0] for filters in stored)
    assert stored[0]["include_model_judgements"] is True
    assert "judge runs' model judgements included (marked as a model's)" in describe_filters(stored[0])
    page, api, command = refusals(
        client,
        ["--format", "rm-pairs", "--include-model-judgements"],
        {"export_format": "rm-pairs", "include_model_judgements": "on"},
        {"format": "rm-pairs", "include_model_judgements": True},
    )
    message = "Model judgements are exported in the comparisons-full format only, where each row says whose"
    assert escape(message) in page and message in api["include_model_judgements"][0] and message in command
    assert Export.objects.count() == 3
