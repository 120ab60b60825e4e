"""RL runs that can be audited (issue 39): every episode of every step is kept (RLEpisode rows) with the
quotes its answer was prompted with and its part in the step's objective, so that each step's logged
figures (the run's timeline) are recomputed from the rows alone, without the models; the API and the run
page's download give them to the research team, and to nobody else."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any

import pytest
from django.urls import reverse

from browser.engine.browser import Browser
from browser.engine.page import Quote
from browser.search.local import LocalIndex
from tests.test_api import api
from tests.test_rl_runs import QUOTE, answered, model, questions
from tests.test_rl_trainer import QUESTIONS, Recorder, config
from tests.test_sampling_core import ENV, seeded_tiny_llama
from tests.tiny_models import tiny_reward_model
from training.models import RLEpisode, RunKind, TrainingRun
from training.rl.config import BROWSE
from training.rl.episodes import EPISODE_FIELDS, episode_records
from training.rl.inputs import RLRequest
from training.rl.job import LatestSamples
from training.rl.runs import request_rl_run
from training.rl.trainer import train_rl
from training.rl.types import EpisodeReport, EpisodeTerms

pytestmark = pytest.mark.usefixtures("model_store")

# The figures a step logs that its episodes determine (the rest are timings).
RECOMPUTED = ("reward_mean", "reward_std", "kl", "loss", "entropy", "episodes", "answered", "answer_tokens")


def step_figures(rows: list[dict[str, Any]]) -> dict[str, float]:
    """One step's figures from its episodes, as docs/training.md ("Auditing a run") writes them out. The
    loss is the objective at the step's first pass, where the policy ratio is 1 and each of an episode's
    tokens carries its advantage and its KL term."""
    tokens = max(1, sum(row["tokens"] for row in rows))
    answered_rows = [row for row in rows if row["answered"]]
    rewards = [row["reward"] for row in rows]
    figures = {
        "reward_mean": statistics.fmean(rewards),
        "reward_std": statistics.stdev(rewards) if len(rewards) > 1 else 0.0,
        "kl": statistics.fmean(row["kl"] for row in rows),
        "loss": sum(row["kl_penalty"] - row["advantage"] * row["tokens"] for row in rows) / tokens,
        "entropy": sum(row["entropy"] for row in rows) / tokens,
        "episodes": float(len(rows)),
        "answered": len(answered_rows) / len(rows),
        "answer_tokens": statistics.fmean(row["answer_tokens"] for row in answered_rows)
        if answered_rows
        else 0.0,
    }
    actions = sum(len(row["commands"]) for row in rows)
    if actions:
        figures["valid_actions"] = (actions - sum(row["invalid_actions"] for row in rows)) / actions
    return figures


def assert_recomputed(rows: list[dict[str, Any]], logs: dict[str, float], kl_coef: float) -> None:
    """The step's logs equal what its rows give (float32 in the trainer, float64 here), and each row's
    advantage is its reward against its group's."""
    figures = step_figures(rows)
    for name in (*RECOMPUTED, *(("valid_actions",) if "valid_actions" in logs else ())):
        # abs: a loss whose advantages nearly cancel is a difference of float32 sums near 0
        assert figures[name] == pytest.approx(logs[name], rel=1e-6, abs=1e-7), name
    groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["group"]].append(row)
        assert row["kl_penalty"] == pytest.approx(kl_coef * row["kl"])
        assert row["advantage"] == pytest.approx((row["reward"] - row["baseline"]) / row["scale"], abs=1e-6)
    for members in groups.values():
        rewards = [row["reward"] for row in members]
        assert {row["baseline"] for row in members} == {members[0]["baseline"]}
        assert members[0]["baseline"] == pytest.approx(statistics.fmean(rewards), abs=1e-6)
        spread = statistics.stdev(rewards)
        assert members[0]["scale"] == pytest.approx(spread if spread > 0 else 1.0, rel=1e-5)


@pytest.fixture
def tiny_models(tiny_bert_dir, tmp_path):
    """A registered tiny reward model and a tiny BC policy (fixed weights), as RL runs start from them."""
    rm_dir = tiny_reward_model(tmp_path / "rm", tiny_bert_dir, offset=0.25, max_length=128)
    policy_dir = seeded_tiny_llama(tmp_path / "bc")
    return model(RunKind.RM, "tiny-rm", str(rm_dir)), model(RunKind.BC, "tiny-bc", str(policy_dir))


@pytest.mark.django_db
def test_a_run_keeps_every_episode_of_every_step_and_its_timeline_is_recomputed_from_them(
    alice, tiny_models, monkeypatch
):
    from training.runs.jobs import run_training_job

    monkeypatch.setattr("core.progress.SAVE_EVERY_S", 0.0)
    reward, start = tiny_models
    asked = questions(2)
    for question in asked:
        answered(question)
    fast = {"steps": 2, "group_size": 3, "questions_per_step": 2, "max_answer_tokens": 8}
    fast |= {"learning_rate": 1e-2, "kl_coef": 1.0}  # a KL term the objective shows at step 2
    run = run_training_job(request_rl_run(alice, RLRequest(reward, start, settings=fast), queue=False).pk)
    assert run.status == "done", run.error

    rows = list(episode_records(run))
    # 2 steps x 2 prompts x 3 answers, each step's numbered from 0, in two groups of three
    assert [(row["step"], row["index"]) for row in rows] == [(s, i) for s in (1, 2) for i in range(6)]
    assert [row["group"] for row in rows] == [0, 0, 0, 1, 1, 1] * 2
    by_question = {question.pk: question.text for question in asked}
    for row in rows:
        assert row["kind"] == "answer" and row["quotes"] == [QUOTE]  # the reference it answered from
        assert by_question[row["question"]] == row["question_text"]
        assert row["tokens"] == row["answer_tokens"] > 0  # an answer's tokens are all the policy's
    for step, logs in enumerate(run.timeline, start=1):
        assert_recomputed([row for row in rows if row["step"] == step], logs, kl_coef=1.0)
    assert run.timeline[0]["kl"] == 0 < run.timeline[1]["kl"]  # one update later the KL is not 0

    # The page keeps showing the latest step, as before.
    assert [sample["step"] for sample in run.samples] == [2] * 6
    assert set(run.samples[0]) == {
        "question_id", "question", "kind", "answer", "reward", "answer_tokens", "commands", "invalid_actions",
        "step",
    }  # fmt: skip
    assert [sample["reward"] for sample in run.samples] == [row["reward"] for row in rows[6:]]


def test_a_browsing_steps_episodes_keep_the_quotes_they_gathered_and_recompute_its_figures(
    tmp_path, rl_model_dirs, freshwiki_index_dir
):
    policy_dir, reward_dir = rl_model_dirs
    index = LocalIndex.open(freshwiki_index_dir / "freshwiki")
    recorder = Recorder()
    settings = {"episodes": BROWSE, "steps": 1, "group_size": 2, "max_actions": 3, "max_command_tokens": 12}
    cfg = config(tmp_path, policy_dir, reward_dir, answers_per_browse=2, **settings)
    train_rl(cfg, QUESTIONS[1:], recorder.hooks(), browser_factory=lambda: Browser(index, ENV))

    (_, _, logs), (_, reports) = recorder.logs[0], recorder.samples[0]
    rows = [report_row(report) for report in reports]
    assert_recomputed(rows, logs, kl_coef=cfg.kl_coef)
    browsing = [report for report in reports if report.kind == "browse"]
    assert [report.terms.group for report in browsing] == [0, 0]
    for report in reports:
        if report.kind == "answer":  # answer-only episodes on a browsing episode's quotes, a group each
            assert report.quotes in {b.quotes for b in browsing} and report.terms.group >= 1
    assert sum(len(report.commands) for report in browsing) > 0


def report_row(report: EpisodeReport) -> dict[str, Any]:
    """An episode as the trainer reports it, in the fields of its row."""
    quotes = [quote.to_dict() for quote in report.quotes]
    return report.shown() | vars(report.terms) | {"quotes": quotes, "answered": report.answer is not None}


def terms(group: int, reward: float, tokens: int, kl: float) -> EpisodeTerms:
    return EpisodeTerms(group, 0.5, 1.0, reward - 0.5, tokens, kl, 0.02 * kl, 1.5 * tokens)


@pytest.fixture
def audited_run(alice) -> TrainingRun:
    """An RL run whose job reported two steps (through its own hook), the second's last question deleted
    since it asked it."""
    rm = model(RunKind.RM, "tiny-rm")
    asked = questions(2)
    answered(asked[0])
    run = request_rl_run(alice, RLRequest(rm), queue=False)
    quote = Quote(QUOTE["title"], QUOTE["url"], QUOTE["domain"], QUOTE["extract"])
    hook = LatestSamples(run)
    for step in (1, 2):
        reports = [
            EpisodeReport(asked[0].pk, asked[0].text, "answer", "Rayleigh [1].", 1.0, 4, quotes=(quote,)),
            EpisodeReport(asked[1].pk, asked[1].text, "browse", None, -1.0, 0, commands=["Search sky"]),
        ]
        reports[0].terms, reports[1].terms = terms(0, 1.0, 5, 0.25), terms(0, -1.0, 3, 0.5)
        if step == 2:
            asked[1].delete()
        hook.on_samples(step, reports)
    hook.save()
    return run


@pytest.mark.django_db
def test_the_api_gives_a_runs_episodes_to_researchers_and_no_one_else(audited_run, alice, bob, charlie):
    url = f"/api/training-runs/{audited_run.pk}/episodes"
    body = api(alice).get(url).json()
    assert body["count"] == 4 and [(e["step"], e["index"]) for e in body["results"]] == [
        (1, 0), (1, 1), (2, 0), (2, 1),
    ]  # fmt: skip
    first = body["results"][0]
    assert tuple(first) == EPISODE_FIELDS
    assert first["quotes"] == [QUOTE] and first["answer"] == "Rayleigh [1]." and first["kl_penalty"] == 0.005
    assert first["answered"] and not body["results"][1]["answered"]
    assert body["results"][1]["commands"] == ["Search sky"]
    deleted = body["results"][3]
    assert deleted["question"] is None and deleted["question_text"].startswith("Why is the sky blue?")
    second = api(alice).get(url, {"step": 2}).json()
    assert [e["step"] for e in second["results"]] == [2, 2]
    assert api(alice).get(url, {"step": 0}).status_code == 400
    assert api(alice).get(url, {"stpe": 2}).status_code == 400  # a misspelt filter is not ignored
    for outsider in (bob, charlie):
        assert api(outsider).get(url).status_code == 404
    assert api().get(url).status_code == 401
    assert RLEpisode.objects.filter(run=audited_run).count() == 4


@pytest.mark.django_db
def test_the_run_page_links_the_download_of_every_episode_a_json_object_a_line(
    audited_run, alice, charlie, client_for
):
    download = reverse("training:rl_episodes", args=[audited_run.pk])
    page = client_for(alice).get(reverse("training:run", args=[audited_run.pk])).content.decode()
    assert f'href="{download}"' in page and "Episodes of step 2" in page

    response = client_for(alice).get(download)
    assert response.status_code == 200 and response["Content-Type"].startswith("application/x-ndjson")
    assert f"rl-run-{audited_run.pk}-episodes.jsonl" in response["Content-Disposition"]
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert lines == api(alice).get(f"/api/training-runs/{audited_run.pk}/episodes").json()["results"]
    assert client_for(charlie).get(download).status_code == 404
