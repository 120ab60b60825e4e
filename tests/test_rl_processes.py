"""The RL trainer on several processes (training/rl/ranks.py) and ``train_rl``'s file form: a real 2-process
CPU run under ``torchrun`` (gloo) of ``manage.py train_rl --questions-file`` on tiny random models, against
the same run in one process; how a step's prompts are shared and seeded; the questions file's checks."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from django.core.management import CommandError, call_command
from transformers import AutoModelForCausalLM

from tests.conftest import ROOT
from tests.test_rl_trainer import QUESTIONS, QUOTE
from tests.test_sampling_core import seeded_tiny_llama
from tests.tiny_models import tiny_reward_model
from training.models import TrainingRun
from training.rl.inputs import check_file_run
from training.rl.questions_file import read_questions
from training.rl.ranks import share, weights_digest
from training.rl.trainer import train_rl

SETTINGS = {"steps": 2, "questions_per_step": 2, "group_size": 2, "max_answer_tokens": 8}
MONA_LISA = {
    "title": "Mona Lisa",
    "url": "https://en.wikipedia.org/wiki/Mona_Lisa",
    "domain": "en.wikipedia.org",
    "extract": "The Mona Lisa is a half-length portrait by Leonardo da Vinci.",
}


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return seeded_tiny_llama(tmp_path_factory.mktemp("rl-policy"))


@pytest.fixture(scope="module")
def reward_dir(tiny_bert_dir, tmp_path_factory):
    return tiny_reward_model(tmp_path_factory.mktemp("rl-rm"), tiny_bert_dir, offset=0.25, max_length=128)


@pytest.fixture
def questions_file(tmp_path: Path) -> Path:
    rows = [
        {"id": 1, "question": QUESTIONS[0].text, "references": [[QUOTE.to_dict()]]},
        {"id": 2, "question": QUESTIONS[1].text, "reference_answers": ["It was damaged by a blast"]},
        {"id": 3, "question": "Who painted the Mona Lisa?", "references": [[MONA_LISA], [MONA_LISA]]},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def parameters(folder: Path) -> dict[str, torch.Tensor]:
    return {name: p.detach() for name, p in AutoModelForCausalLM.from_pretrained(folder).named_parameters()}


@pytest.mark.worker  # two processes of their own
@pytest.mark.timeout(120)
def test_two_processes_train_the_policy_one_process_trains_and_only_the_first_saves_it(
    tmp_path, policy_dir, reward_dir, questions_file
):
    # Each process in a folder of its own, with a relative --output: whatever a process saved is in its
    # own folder. The database is unreachable: the file form must not touch it.
    for rank in (0, 1):
        (tmp_path / f"rank{rank}").mkdir()
    options = [f"--{name.replace('_', '-')}={value}" for name, value in SETTINGS.items()]
    command = [
        sys.executable, str(ROOT / "manage.py"), "train_rl", "--reward-model-dir", str(reward_dir),
        "--base-model", str(policy_dir), "--questions-file", str(questions_file), "--output", "policy",
        *options,
    ]  # fmt: skip
    each = f"cd {shlex.quote(str(tmp_path))}/rank$RANK && exec {shlex.join(command)} >out.txt 2>err.txt"
    env = os.environ | {"DATABASE_URL": "postgres://nobody@127.0.0.1:9/none", "OMP_NUM_THREADS": "1"}
    launcher = Path(sys.executable).parent / "torchrun"
    launched = subprocess.run(
        [str(launcher), "--standalone", "--nproc-per-node", "2", "--no-python", "bash", "-c", each],
        env=env, capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    outputs = [(tmp_path / f"rank{rank}" / "out.txt").read_text() for rank in (0, 1)]
    errors = [(tmp_path / f"rank{rank}" / "err.txt").read_text()[-3000:] for rank in (0, 1)]
    assert launched.returncode == 0, (launched.stderr[-3000:], outputs, errors)

    saved = tmp_path / "rank0" / "policy"
    assert (saved / "training.json").is_file()
    assert not (tmp_path / "rank1" / "policy").exists()  # the second process saved nothing
    digests = [
        line.rsplit(" ", 1)[1] for out in outputs for line in out.splitlines() if "weights sha256" in line
    ]
    assert len(digests) == 2 and digests[0] == digests[1] == weights_digest(
        AutoModelForCausalLM.from_pretrained(saved)
    )
    metrics = json.loads((saved / "training.json").read_text())["metrics"]
    # both processes' episodes: 2 steps x 2 prompts (one each) x 2 episodes
    assert metrics["episodes"] == 8 and metrics["processes"] == 2 and metrics["steps"] == 2

    # One process on the same step's two prompts samples the same episodes (they are seeded by their
    # place in the whole step) and takes the same update (the loss over the step's tokens, the gradients
    # summed): the same policy but for the order of float additions.
    config = check_file_run(SETTINGS, reward_dir, tmp_path / "one", str(policy_dir))
    alone = train_rl(config, read_questions(questions_file))
    for name in ("reward_first", "reward_last", "kl_last", "entropy_last"):
        assert metrics[name] == pytest.approx(alone.metrics[name], rel=1e-4, abs=1e-7)
    start, one, two = parameters(policy_dir), parameters(tmp_path / "one"), parameters(saved)
    moved = max(float((one[name] - start[name]).abs().max()) for name in start)
    apart = max(float((two[name] - one[name]).abs().max()) for name in start)
    assert moved > 0 and apart < 0.01 * moved


def test_a_step_is_shared_in_contiguous_parts_of_whole_prompts():
    items = list("abcde")
    parts = [share(items, index, 3) for index in range(3)]
    assert parts == [(0, ["a", "b"]), (2, ["c", "d"]), (4, ["e"])]
    assert share(items, 0, 1) == (0, items)
    with pytest.raises(ValueError, match="questions_per_step: 2 cannot be shared by 3 processes"):
        share(items[:2], 0, 3)


def test_a_share_samples_the_episodes_a_lone_process_samples_for_it(tmp_path, policy_dir, reward_dir):
    from training.rl.config import RLConfig
    from training.rl.rollout import Roller
    from training.runs.bc import load_policy
    from training.sampling.best_of_n import RewardScorer
    from training.sampling.local import LocalBackend
    from training.sampling.policies import PromptedPolicy

    cfg = RLConfig(output_dir=str(tmp_path), reward_model=str(reward_dir), group_size=3, max_answer_tokens=8)
    model, tokenizer = load_policy(policy_dir)
    backend = LocalBackend.over(model.eval(), tokenizer)
    roller = Roller(cfg, PromptedPolicy(backend), backend, RewardScorer(reward_dir), None)
    prompt = (QUESTIONS[0], (QUOTE,))
    whole = roller.step(1, [prompt, prompt])
    second = roller.step(1, [prompt], first=1)
    # the second process's group is the lone process's second group, not a copy of its first
    answers = [report.answer for report in whole.reports]
    assert [report.answer for report in second.reports] == answers[3:]
    assert answers[3:] != answers[:3]


def test_the_questions_file_is_read_with_its_references(questions_file):
    questions = read_questions(questions_file)
    assert [q.id for q in questions] == [1, 2, 3]
    assert questions[0] == QUESTIONS[0]
    assert questions[1].references == () and questions[1].reference_answers == ("It was damaged by a blast",)
    assert len(questions[2].references) == 1  # the same quotes twice are one prompt


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{", "line 2: not JSON"),
        ("[1]", "line 2: expected a JSON object"),
        ('{"text": "Why?"}', "line 2: unknown field.s. text"),
        ('{"question": " "}', 'line 2: "question": expected'),
        ('{"question": "Why?", "id": "7"}', 'line 2: "id": expected a whole number'),
        (
            '{"question": "Why?", "references": [{"url": "x"}]}',
            '"references": expected a list of quote lists',
        ),
        (
            '{"question": "Why?", "references": [[{"url": 1}]]}',
            '"references": a quote is an object of strings',
        ),
        ('{"question": "Why?", "reference_answers": "x"}', '"reference_answers": expected a list of strings'),
        ('{"question": "Why?", "id": 1}', "question ids must be unique, repeated: 1"),
    ],
)
def test_the_questions_file_refuses_a_bad_line_by_its_number(tmp_path, line, reason):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "Who?", "id": 1}\n' + line + "\n")
    with pytest.raises(ValueError, match=reason):
        read_questions(path)


def test_the_file_form_refuses_with_the_same_words_and_writes_nothing(tmp_path, reward_dir, questions_file):
    output = tmp_path / "policy"
    base = ["train_rl", "--reward-model-dir", str(reward_dir), "--questions-file", str(questions_file)]
    refusals = [
        (
            ["--output", str(output), "--group-size", "1"],
            "group_size: must be at least 2 and at most 256, not 1",
        ),
        (["--output", str(output), "--base-model", str(tmp_path)], "base_model: neither smollm2"),
        (["--output", str(output), "--dataset", "demo"], "--dataset: not an option of the form with"),
        ([], "--questions-file and --output are required"),
    ]
    for options, reason in refusals:
        with pytest.raises(CommandError, match=reason):
            call_command(*base, *options)
    with pytest.raises(CommandError, match=r"reward_model_dir: .* is not a model folder"):
        call_command("train_rl", "--reward-model-dir", str(tmp_path), "--questions-file", str(questions_file),
                     "--output", str(output))  # fmt: skip
    assert not output.exists()


@pytest.mark.django_db
def test_the_registered_form_refuses_to_run_in_several_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")  # as a launcher sets it
    with pytest.raises(CommandError, match="a registered run is one process"):
        call_command("train_rl", "--reward-model", "1")
    assert not TrainingRun.objects.exists()
