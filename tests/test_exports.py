"""Exports: the WebGPT comparisons schema and ours, the job on a real worker, downloads and permissions."""

from __future__ import annotations

import hashlib
import io
import json
import time
import uuid

import pyarrow.parquet as pq
import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.exports import service as exports
from annotation.feedback import assignment as work
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import Export, ExportStatus, FeedbackBatch
from annotation.questions.service import import_questions
from tests.conftest import database_url_for_tests, make_user, running_worker


@pytest.fixture(autouse=True)
def exports_in_tmp(settings, tmp_path):
    """Export files (the command writes them where the worker does) go to the test's own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"


def judged_pair(django_user_model) -> tuple[list[int], list[str]]:
    """Two labelers judge one pair, each in the order drawn for them; returns answer ids and labelers."""
    import_questions(
        b'{"id": "q7", "question": "Why is the sky blue?", "dataset": "eli5"}', filename="q.jsonl"
    )
    rows = [
        {
            "question": "why is the sky blue",
            "answer": "Rayleigh scattering [1].",
            "quotes": [
                {
                    "title": "Rayleigh scattering",
                    "url": "https://en.wikipedia.org/wiki/Rayleigh_scattering",
                    "extract": "light scatters",
                }
            ],
        },
        {"question": "why is the sky blue", "answer": "Because it reflects the sea.", "quotes": []},
    ]
    answers = import_answers("\n".join(json.dumps(r) for r in rows).encode())
    config = BatchSettings("pairs", "webgpt_comparison", overlap=2, required_probability=0.0)
    create_feedback_batch(None, config, [answers])
    names = []
    for name, prefers_first in (("bob3", True), ("carol3", False)):
        person = make_user(django_user_model, name, "labeler")
        task = work.next_assignment(person)
        first_shown_is_lower = task.order[0] == min(task.order)
        # "much better" for the lower-id answer (bob) or "better" for the other (carol), whatever the order
        code = ("a" if first_shown_is_lower == prefers_first else "b") + (
            "_much_better" if prefers_first else "_better"
        )
        work.submit(task.pk, person, {"ratings": {"overall": code}}, uuid.uuid4())
        names.append(name)
    return sorted(a.pk for a in answers), names


def export_rows(export_format: str, **filters) -> list:
    out = io.BytesIO()
    exports.write_rows(export_format, filters, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.django_db
def test_webgpt_comparisons_rows_follow_the_public_schema(django_user_model):
    judged_pair(django_user_model)
    rows = export_rows("webgpt-comparisons")
    assert [row["score_0"] for row in rows] == [1.0, -0.5]  # bob: lower id much better; carol: other better
    assert {row.pop("source") for row in rows} == {"platform"}
    row = rows[0]
    assert set(row) == {
        "question",
        "quotes_0",
        "answer_0",
        "tokens_0",
        "score_0",
        "quotes_1",
        "answer_1",
        "tokens_1",
        "score_1",
    }
    assert row["question"] == {"dataset": "eli5", "full_text": "Why is the sky blue?", "id": "q7"}
    assert row["answer_0"] == "Rayleigh scattering [1]."
    assert row["quotes_0"] == {
        "title": ["Rayleigh scattering (en.wikipedia.org)"],
        "extract": ["light scatters"],
    }
    assert row["quotes_1"] == {"title": [], "extract": []}
    assert all(r["score_0"] + r["score_1"] == 0 for r in rows)


@pytest.mark.django_db
def test_raw_pairs_and_full_judgements(django_user_model):
    _, names = judged_pair(django_user_model)
    pair = export_rows("webgpt-comparisons-pairs")[0]
    assert [record["score"] for record in pair] == [1.0, -1.0]
    assert pair[0]["quotes"]["title"] == ["Rayleigh scattering (en.wikipedia.org)"]
    full = export_rows("comparisons-full")
    assert [row["response"]["ratings"]["overall"] for row in full]
    assert all(row["labeler"] not in names and len(row["labeler"]) == 12 for row in full)  # pseudonymous
    assert {row["template"] for row in full} == {"webgpt_comparison"}


@pytest.mark.django_db
def test_demonstrations_and_bc_pairs(freshwiki, dana):
    from annotation.demonstrations import service
    from annotation.models import Question

    import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    episode = service.next_episode(dana)
    for command in (
        "Search AFL Grand Final",
        "Clicked on link 0",
        "Scrolled down 1",
        "Scrolled down 1",
        "Quote: Geelong",
        "End: Answer",
    ):
        episode.refresh_from_db()
        service.record_action(episode.pk, dana, command, uuid.uuid4(), episode.version)
    service.submit_answer(episode.pk, dana, "Geelong [1].")
    (trajectory,) = export_rows("demonstrations")
    assert trajectory["commands_merged"][2] == "Scrolled down 2"
    assert trajectory["answer"] == "Geelong [1]." and trajectory["quotes"][0]["extract"] == "Geelong"
    pairs = export_rows("bc-pairs", split="bc")
    assert [p["completion"] for p in pairs][-1] == "Geelong [1]."
    assert export_rows("bc-pairs", split="eval") == []


@pytest.mark.django_db
def test_export_dataset_command_runs_the_job_and_writes_the_same_rows(tmp_path, django_user_model, capsys):
    judged_pair(django_user_model)
    out = tmp_path / "comparisons.jsonl"
    call_command("export_dataset", "--format", "webgpt-comparisons", "-o", str(out))
    export = Export.objects.get()  # the same job row as the page's, listed in the console
    assert (export.status, export.row_count, export.owner) == (ExportStatus.DONE, 2, None)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == export.sha256
    assert exports.export_path(export).read_bytes() == out.read_bytes()
    assert f"2 rows (webgpt-comparisons, jsonl); export {export.pk}, sha256 {export.sha256}" in (
        capsys.readouterr().out
    )
    assert [json.loads(line) for line in out.read_text().splitlines()] == export_rows("webgpt-comparisons")
    call_command("export_dataset", "--format", "rm-pairs", "--file-type", "parquet")  # no copy: in place
    parquet = Export.objects.get(export_format="rm-pairs")
    assert parquet.file_name.endswith(".parquet") and parquet.row_count == 2
    assert str(exports.export_path(parquet)) in capsys.readouterr().out


@pytest.mark.django_db
def test_a_failed_job_leaves_a_failed_row_and_no_file(settings, tmp_path, monkeypatch):
    settings.MEDIA_ROOT = tmp_path
    export = Export.objects.create(export_format="webgpt-comparisons")

    def broken(filters):
        yield {"row": 1}
        raise RuntimeError("disk full")

    monkeypatch.setitem(exports.ROWS, "webgpt-comparisons", broken)
    with pytest.raises(RuntimeError):
        exports.run_export_job(export.pk)
    export.refresh_from_db()
    assert (export.status, export.error, export.file_name) == (
        ExportStatus.FAILED,
        "RuntimeError: disk full",
        "",
    )
    assert list((tmp_path / "exports").iterdir()) == []


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_export_runs_on_a_real_worker_and_downloads_through_the_permission_check(
    settings, tmp_path, django_user_model, client_for, alice, bob, broker_namespace
):
    settings.MEDIA_ROOT = tmp_path / "media"
    judged_pair(django_user_model)
    response = client_for(alice).post(reverse("console:exports"), {"export_format": "webgpt-comparisons"})
    export = Export.objects.get()
    assert response.url == reverse("console:export", args=[export.pk])
    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "PATH": "/usr/bin:/bin",
    }
    with running_worker(env, queues="exports"):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and Export.objects.get().status not in (
            ExportStatus.DONE,
            ExportStatus.FAILED,
        ):
            time.sleep(0.2)
    export.refresh_from_db()
    assert export.status == ExportStatus.DONE, export.error
    assert export.row_count == 2
    download = client_for(alice).get(reverse("console:export_download", args=[export.pk]))
    body = b"".join(download.streaming_content)
    assert hashlib.sha256(body).hexdigest() == export.sha256
    assert len(body.splitlines()) == 2
    for url in (
        reverse("console:export", args=[export.pk]),
        reverse("console:export_download", args=[export.pk]),
    ):
        assert client_for(bob).get(url).status_code == 404
    assert client_for(bob).get(reverse("console:exports")).status_code == 403


@pytest.mark.django_db
def test_reward_model_pairs_carry_label_margin_and_ids(django_user_model):
    ids, _ = judged_pair(django_user_model)
    bob_pair, carol_pair = export_rows("rm-pairs")
    assert (bob_pair["chosen"], bob_pair["label"], bob_pair["margin"]) == (
        "Rayleigh scattering [1].",
        1.0,
        1.0,
    )
    assert bob_pair["answer_chosen"] == ids[0] and bob_pair["answer_rejected"] == ids[1]
    assert bob_pair["prompt_chosen"] == (
        "Why is the sky blue?■[1] Rayleigh scattering (en.wikipedia.org)\n\nlight scatters■"
    )
    assert (carol_pair["chosen"], carol_pair["margin"]) == ("Because it reflects the sea.", 0.5)


@pytest.mark.django_db
def test_ranking_groups_list_answers_best_first(django_user_model):
    rows = "\n".join(
        json.dumps({"question": "why is the sky blue", "answer": f"answer {i}"}) for i in range(4)
    )
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    answers = import_answers(rows.encode())
    create_feedback_batch(None, BatchSettings("rank", "ranking", required_probability=0.0), [answers])
    person = make_user(django_user_model, "dave3", "labeler")
    task = work.next_assignment(person)
    work.submit(task.pk, person, {"ranks": {"1": 2, "2": 1, "3": 2, "4": 3}}, uuid.uuid4())
    (group,) = export_rows("rm-groups")
    assert group["ranks"] == [1, 2, 2, 3]
    assert group["answer_ids"][0] == task.order[1]
    assert group["prompts"][0] == "Why is the sky blue?■"


@pytest.mark.django_db
def test_public_comparisons_import_round_trips_and_is_idempotent(django_user_model, tmp_path, capsys):
    judged_pair(django_user_model)
    exported = export_rows("webgpt-comparisons")
    path = tmp_path / "comparisons.jsonl"
    path.write_text(
        "\n".join(json.dumps({k: v for k, v in row.items() if k != "source"}) for row in exported)
    )
    call_command("import_comparisons", str(path))
    call_command("import_comparisons", str(path))  # again: nothing new
    assert "2 comparisons imported" in capsys.readouterr().out
    again = export_rows("webgpt-comparisons", source="imported")
    assert [{k: v for k, v in row.items() if k != "source"} for row in again] == [
        {k: v for k, v in row.items() if k != "source"} for row in exported
    ]
    assert {row["source"] for row in again} == {"imported"}
    # An imported comparison is in no batch, has no labeler and no template of ours: those filters drop it.
    batch = FeedbackBatch.objects.get()
    assert len(export_rows("webgpt-comparisons")) == 2 * len(exported)
    for narrowed in ({"batch": batch.pk}, {"template": batch.template}):
        assert [row["source"] for row in export_rows("webgpt-comparisons", **narrowed)] == ["platform"] * len(
            exported
        ), narrowed
    assert export_rows("rm-pairs", labeler="nobody") == []
    raw = tmp_path / "pairs.jsonl"
    raw.write_text(
        "\n".join(json.dumps(pair) for pair in export_rows("webgpt-comparisons-pairs", source="platform"))
    )
    call_command("import_comparisons", str(raw))  # the raw layout of the same judgements


@pytest.mark.django_db
def test_a_malformed_comparison_file_imports_nothing(tmp_path):
    from annotation.models import ImportedComparison

    path = tmp_path / "bad.jsonl"
    good = {
        "question": {"dataset": "eli5", "full_text": "Why?", "id": "1"},
        "quotes_0": {"title": [], "extract": []},
        "answer_0": "a",
        "tokens_0": [],
        "score_0": 1.0,
        "quotes_1": {"title": [], "extract": []},
        "answer_1": "b",
        "tokens_1": [],
        "score_1": -1.0,
    }
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "score_1": 0.5}) + "\n")
    with pytest.raises(CommandError, match="line 2: scores must be opposite"):
        call_command("import_comparisons", str(path))
    assert not ImportedComparison.objects.exists()


def parquet_rows(path) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "source"} for row in pq.read_table(path).to_pylist()]


@pytest.mark.django_db
def test_a_parquet_export_imports_and_exports_again_as_the_same_rows(django_user_model, tmp_path, capsys):
    judged_pair(django_user_model)
    parquet, jsonl = tmp_path / "comparisons.parquet", tmp_path / "comparisons.jsonl"
    call_command("export_dataset", "--format", "webgpt-comparisons", "-o", str(parquet))
    call_command("export_dataset", "--format", "webgpt-comparisons", "-o", str(jsonl))
    capsys.readouterr()
    call_command("import_comparisons", str(parquet))
    call_command("import_comparisons", str(parquet))  # again: nothing new
    call_command("import_comparisons", str(jsonl))  # the same rows as JSONL: nothing new either
    assert capsys.readouterr().out.splitlines() == [
        "comparisons.parquet: 2 comparisons imported",
        "comparisons.parquet: 0 comparisons imported",
        "comparisons.jsonl: 0 comparisons imported",
    ]
    again = tmp_path / "again.parquet"
    call_command("export_dataset", "--format", "webgpt-comparisons", "--source", "imported", "-o", str(again))
    assert parquet_rows(again) == parquet_rows(parquet) and len(parquet_rows(again)) == 2
    assert {row["source"] for row in pq.read_table(again).to_pylist()} == {"imported"}
    call_command("import_comparisons", str(again))  # only the source column differs: the same comparisons
    assert capsys.readouterr().out.endswith("again.parquet: 0 comparisons imported\n")


@pytest.mark.django_db
def test_a_bad_parquet_row_is_named_by_its_number_and_imports_nothing(tmp_path, monkeypatch):
    from annotation.exports import comparisons_import
    from annotation.exports.parquet import WEBGPT_COMPARISONS, write_parquet
    from annotation.models import ImportedComparison, Question

    monkeypatch.setattr(comparisons_import, "CHUNK", 2)  # the bad row comes after a chunk is written
    rows = [
        {
            "question": {"dataset": "eli5", "full_text": f"Why {n}?", "id": str(n)},
            "quotes_0": {"title": ["Sky (en.wikipedia.org)"], "extract": ["blue"]},
            "answer_0": "a",
            "score_0": 0.5,
            "quotes_1": {"title": [], "extract": []},
            "answer_1": "b",
            "score_1": -0.5,
        }
        for n in range(5)
    ]
    rows[3]["score_1"] = 0.5
    path = tmp_path / "bad.parquet"
    with path.open("wb") as out:
        write_parquet(rows, WEBGPT_COMPARISONS, out)
    with pytest.raises(CommandError, match=r"row 4: scores must be opposite .*; nothing was imported"):
        call_command("import_comparisons", str(path))
    assert not ImportedComparison.objects.exists() and not Question.objects.exists()
    path.write_bytes(b"PAR1 but not Parquet")
    with pytest.raises(CommandError, match="not a readable Parquet file"):
        call_command("import_comparisons", str(path))


@pytest.mark.django_db
def test_parquet_and_jsonl_exports_load_with_pandas_and_hugging_face_datasets(
    django_user_model, tmp_path, monkeypatch
):
    import datasets
    import pandas as pd

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    judged_pair(django_user_model)
    parquet, jsonl = tmp_path / "comparisons.parquet", tmp_path / "comparisons.jsonl"
    call_command("export_dataset", "--format", "webgpt-comparisons", "-o", str(parquet))
    call_command("export_dataset", "--format", "webgpt-comparisons", "-o", str(jsonl))
    frame = pd.read_parquet(parquet)
    assert list(frame["score_0"]) == [1.0, -0.5]
    assert list(frame["quotes_0"][0]["title"]) == ["Rayleigh scattering (en.wikipedia.org)"]
    cache = str(tmp_path / "hf-cache")
    from_parquet = datasets.load_dataset("parquet", data_files=str(parquet), split="train", cache_dir=cache)
    from_jsonl = datasets.load_dataset("json", data_files=str(jsonl), split="train", cache_dir=cache)
    assert from_parquet.num_rows == from_jsonl.num_rows == 2
    assert from_parquet[0]["question"] == {"dataset": "eli5", "full_text": "Why is the sky blue?", "id": "q7"}
    assert from_jsonl[1]["score_1"] == 0.5
    rm = tmp_path / "rm.parquet"
    call_command("export_dataset", "--format", "rm-pairs", "-o", str(rm))
    assert list(pd.read_parquet(rm)["label"]) == [1.0, 1.0]
    with pytest.raises(CommandError, match="JSONL only"):
        call_command("export_dataset", "--format", "demonstrations", "-o", str(tmp_path / "d.parquet"))


@pytest.mark.django_db
def test_filters_pick_judgements_by_labeler_template_date_and_source(django_user_model, tmp_path):
    judged_pair(django_user_model)
    assert [r["score_0"] for r in export_rows("webgpt-comparisons", labeler="carol3")] == [-0.5]
    assert export_rows("webgpt-comparisons", template="minimal_comparison") == []
    assert len(export_rows("comparisons-full", since="2000-01-01", until="2999-12-31")) == 2
    assert export_rows("comparisons-full", until="2000-01-01") == []
    assert export_rows("webgpt-comparisons", source="imported") == []
    out = tmp_path / "carol.jsonl"
    call_command("export_dataset", "--format", "webgpt-comparisons", "--labeler", "carol3", "-o", str(out))
    assert len(out.read_text().splitlines()) == 1


@pytest.mark.django_db
def test_a_finished_export_whose_file_is_gone_is_a_404_that_says_so_on_the_page_and_the_api(
    settings, tmp_path, django_user_model, client_for, alice
):
    settings.MEDIA_ROOT = tmp_path
    judged_pair(django_user_model)
    export = exports.run_export_job(exports.request_export(alice, "webgpt-comparisons", {}).pk)
    exports.export_path(export).unlink()  # someone cleaned the media folder
    page = client_for(alice).get(reverse("console:export_download", args=[export.pk]))
    assert page.status_code == 404
    assert "no longer on the server" in page.content.decode()
    api = client_for(alice).get(f"/api/exports/{export.pk}/download")
    assert api.status_code == 404 and "no longer on the server" in api.json()["detail"]


def test_exports_are_shared_by_the_research_team_and_hidden_from_everyone_else(
    settings, tmp_path, django_user_model, client_for, alice, bob
):
    """The team's data is the team's: another researcher downloads alice's export (docs/security.md)."""
    settings.MEDIA_ROOT = tmp_path
    judged_pair(django_user_model)
    export = exports.run_export_job(exports.request_export(alice, "webgpt-comparisons", {}).pk)
    erin = make_user(django_user_model, "erin", "researcher")
    downloads = (reverse("console:export_download", args=[export.pk]), f"/api/exports/{export.pk}/download")
    for url in downloads:
        assert client_for(erin).get(url).status_code == 200
        assert client_for(bob).get(url).status_code == 404


def refusals(client, command_args: list[str], page: dict, api: dict) -> tuple[str, dict, str]:
    """The same request through the console page, the API and the command: each one's error text."""
    response = client.post(reverse("console:exports"), page)
    assert response.status_code == 400
    answer = client.post("/api/exports", api, content_type="application/json")
    assert answer.status_code == 400
    with pytest.raises(CommandError) as refused:
        call_command("export_dataset", *command_args)
    return response.content.decode(), answer.json(), str(refused.value)


@pytest.mark.django_db
def test_page_api_and_command_refuse_the_same_bad_export_request_with_the_same_message(
    client_for, alice, tmp_path
):
    from django.utils.html import escape

    client = client_for(alice)
    page, api, command = refusals(
        client,
        ["--format", "demonstrations", "-o", str(tmp_path / "d.parquet")],
        {"export_format": "demonstrations", "file_type": "parquet"},
        {"format": "demonstrations", "file_type": "parquet"},
    )
    message = "demonstrations is written as JSONL only. Parquet is for the webgpt-comparisons and rm-pairs"
    assert message in page and message in api["file_type"][0] and message in command
    page, api, command = refusals(
        client,
        ["--format", "comparisons-full", "--since", "2024-05-02", "--until", "2024-05-01"],
        {"export_format": "comparisons-full", "since": "2024-05-02", "until": "2024-05-01"},
        {"format": "comparisons-full", "since": "2024-05-02", "until": "2024-05-01"},
    )
    message = "'until' (2024-05-01) is before 'since' (2024-05-02): nothing matches."
    assert escape(message) in page and api == {"until": [message]} and message in command
    batch_message = "There is no feedback batch 999999."
    body = {"format": "rm-pairs", "batch": 999999}
    assert client.post("/api/exports", body, content_type="application/json").json() == {
        "batch": [batch_message]
    }
    with pytest.raises(CommandError, match=batch_message):
        call_command("export_dataset", "--format", "rm-pairs", "--batch", "999999")
    assert not Export.objects.exists() and not (tmp_path / "d.parquet").exists()


@pytest.mark.django_db
def test_page_api_and_command_store_the_same_filters(client_for, alice, django_user_model):
    judged_pair(django_user_model)
    batch = FeedbackBatch.objects.get()
    client = client_for(alice)
    client.post(
        reverse("console:exports"),
        {
            "export_format": "comparisons-full",
            "batch": batch.pk,
            "split": "rm",
            "labeler": "carol3",
            "since": "2000-01-01",
            "exclude_gold": "on",
            "source": "platform",
        },
    )
    body = {
        "format": "comparisons-full",
        "batch": batch.pk,
        "split": "rm",
        "labeler": "carol3",
        "since": "2000-01-01",
        "include_gold": False,
        "source": "platform",
    }
    assert client.post("/api/exports", body, content_type="application/json").status_code == 202
    call_command(
        "export_dataset", "--format", "comparisons-full", "--batch", str(batch.pk), "--split", "rm",
        "--labeler", "carol3", "--since", "2000-01-01", "--exclude-gold", "--source", "platform",
    )  # fmt: skip
    page, api, command = (export.filters for export in Export.objects.order_by("id"))
    assert (
        page
        == api
        == command
        == {
            "batch": batch.pk,
            "split": "rm",
            "include_flagged": True,
            "include_gold": False,
            "include_late": False,
            "template": None,
            "labeler": "carol3",
            "since": "2000-01-01",
            "until": None,
            "source": "platform",
            "episode_kind": "human",
            "sampling_run": None,
            "exclude_eval": False,
        }
    )


@pytest.mark.django_db
def test_a_late_submission_is_kept_out_of_exports_unless_asked_for_and_no_other_status_gets_in(
    django_user_model, client_for, alice, tmp_path
):
    from datetime import timedelta

    from django.utils import timezone

    from annotation.models import Assignment, AssignmentStatus

    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    rows = [{"question": "why is the sky blue", "answer": text} for text in ("Scattering.", "The sea.")]
    answers = import_answers("\n".join(json.dumps(r) for r in rows).encode())
    config = BatchSettings("one slot", "minimal_comparison", overlap=1, required_probability=0.0)
    create_feedback_batch(None, config, [answers])
    bob, carol = (make_user(django_user_model, name, "labeler") for name in ("bob5", "carol5"))
    start = timezone.now()
    slow = work.next_assignment(bob, now=start)
    later = start + timedelta(hours=1)  # bob's lease ran out and carol got the slot
    quick = work.next_assignment(carol, now=later)
    work.submit(quick.pk, carol, {"ratings": {"overall": "a_better"}}, uuid.uuid4(), now=later)
    work.submit(slow.pk, bob, {"ratings": {"overall": "b_much_better"}}, uuid.uuid4(), now=later)
    assert Assignment.objects.get(pk=slow.pk).status == AssignmentStatus.LATE  # kept, not thrown away
    for export_format in ("webgpt-comparisons", "webgpt-comparisons-pairs", "rm-pairs", "comparisons-full"):
        assert len(export_rows(export_format)) == 1, export_format  # carol's only
    assert [row["assignment"] for row in export_rows("comparisons-full")] == [quick.pk]
    with_late = export_rows("comparisons-full", include_late=True)
    assert [(row["assignment"], row["late"]) for row in with_late] == [(slow.pk, True), (quick.pk, False)]
    assert len(export_rows("rm-pairs", include_late=True)) == 2
    # Asked for through the page, the API and the command alike.
    client = client_for(alice)
    client.post(reverse("console:exports"), {"export_format": "comparisons-full", "include_late": "on"})
    body = {"format": "comparisons-full", "include_late": True}
    assert client.post("/api/exports", body, content_type="application/json").status_code == 202
    call_command(
        "export_dataset", "--format", "comparisons-full", "--include-late", "-o", str(tmp_path / "f")
    )
    assert [export.filters["include_late"] for export in Export.objects.all()] == [True, True, True]
    assert len((tmp_path / "f").read_text().splitlines()) == 2
    # Only SUBMITTED (and LATE when asked) counts: every other status, including any added later, stays out.
    for status in set(AssignmentStatus.values) - {AssignmentStatus.SUBMITTED, AssignmentStatus.LATE}:
        Assignment.objects.update(status=status)
        assert export_rows("comparisons-full", include_late=True) == [], status


@pytest.mark.django_db
def test_eval_questions_are_left_out_when_asked_and_training_then_accepts_the_export(
    django_user_model, client_for, alice
):
    from annotation.models import Question, Split
    from training.runs.jobs import check_splits

    import_questions(
        b'{"question": "Why is the sky blue?"}\n{"question": "Why is grass green?"}', filename="q.jsonl"
    )
    Question.objects.filter(text__startswith="Why is the sky").update(split=Split.EVAL)
    Question.objects.filter(text__startswith="Why is grass").update(split=Split.RM)
    labeler = make_user(django_user_model, "lee", "labeler")
    for question in ("why is the sky blue", "why is grass green"):
        rows = [{"question": question, "answer": text} for text in ("Scattering.", "Chlorophyll.")]
        answers = import_answers("\n".join(json.dumps(r) for r in rows).encode())
        create_feedback_batch(
            None, BatchSettings(question, "minimal_comparison", required_probability=0.0), [answers]
        )
        task = work.next_assignment(labeler)
        work.submit(task.pk, labeler, {"ratings": {"overall": "a_better"}}, uuid.uuid4())
    everything = export_rows("rm-pairs")
    kept = export_rows("rm-pairs", exclude_eval=True)
    assert len(everything) == 2 and len(kept) == 1
    with pytest.raises(Exception, match="eval split"):
        check_splits(everything)
    check_splits(kept)
    # The page, the API and the command ask alike; eval-only and eval-left-out is refused on its field.
    client = client_for(alice)
    client.post(reverse("console:exports"), {"export_format": "rm-pairs", "exclude_eval": "on"})
    body = {"format": "rm-pairs", "exclude_eval": True}
    assert client.post("/api/exports", body, content_type="application/json").status_code == 202
    call_command("export_dataset", "--format", "rm-pairs", "--exclude-eval")
    assert [export.filters["exclude_eval"] for export in Export.objects.all()] == [True, True, True]
    refused = client.post("/api/exports", {**body, "split": "eval"}, content_type="application/json")
    assert refused.status_code == 400 and "nothing matches" in refused.json()["exclude_eval"][0]
    assert Export.objects.count() == 3


def test_an_exports_page_shows_its_filters_as_words(client_for, alice):
    from annotation.exports.rules import describe_filters, export_filters

    assert describe_filters(export_filters()) == ["everything"]
    filters = export_filters(split="rm", labeler="<b>bob</b>", include_gold=False, exclude_eval=False)
    assert describe_filters(filters) == [
        "questions of the rm split",
        "labeler <b>bob</b>",
        "gold items left out",
    ]
    later = export_filters(exclude_eval=True, include_late=True, source="platform", episode_kind="model")
    assert describe_filters(later) == [
        "eval questions left out", "platform only", "late submissions included", "model samples",
    ]  # fmt: skip
    export = Export.objects.create(export_format="rm-pairs", filters=filters)
    html = client_for(alice).get(reverse("console:export", args=[export.pk])).content.decode()
    assert "questions of the rm split; labeler &lt;b&gt;bob&lt;/b&gt;; gold items left out" in html
