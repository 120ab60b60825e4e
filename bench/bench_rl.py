"""Benchmark our RL trainer's steps on the CPU against TRL's ``GRPOTrainer``, in the same run.

Our trainer (training/rl: ``train_rl``) and ``trl.GRPOTrainer`` on answer-only episodes with the same model
(SmolLM2-135M-Instruct, converted once into a model store next to --out), the same prompts (the demo
questions with the quotes of their complete demo answer, data/answers/freshwiki_demo_answers.jsonl, asked
as the prompted policy asks: the chat of ``PromptedPolicy.answer_request_for``), the same order of prompts,
group size, prompts per step, steps, completion tokens, temperature and objective (advantage = reward minus
the group's mean, unscaled; clip 0.2; per-token k3 KL to the frozen start with beta 0.02; token-level
normalisation, TRL's loss_type "dapo"; one optimizer step per step, AdamW at a constant rate, gradients
clipped at 1.0) and the same reward: ``RewardScorer.score`` of a reward-model folder on the answer prompt
and the answer, which TRL calls as a reward function.

    .venv/bin/python bench/bench_rl.py --out var/bench/rl.json

Every run is its own subprocess (OMP_WAIT_POLICY=PASSIVE, as the worker runs): warm-up steps, then timed
steps, both trainers timed at the same point (each step's log: ours through ``Hooks.on_progress``, TRL's
through ``on_log``, logging every step); a step is sampling, scoring and one optimizer step. Peak RSS is
VmHWM after imports were reset, read at the last step (before our trainer saves the policy). The reward
model is all-MiniLM-L6-v2's real weights under a seeded random scalar head (a folder laid out as
``train_reward_model`` saves one): its scores are a fixed function of prompt and answer, which is all a
timing needs; the mean reward per step is recorded to show both sides run the same objective, not as a
quality claim. Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_training import _vm_mb, environment, measure  # noqa: E402
from training.runs.config import MINILM, SMOLLM2  # noqa: E402

DEMO_QUESTIONS = ROOT / "data" / "questions" / "freshwiki_demo.jsonl"
DEMO_ANSWERS = ROOT / "data" / "answers" / "freshwiki_demo_answers.jsonl"
LABELS = {"ours": "RL: ours (train_rl)", "trl": "RL: TRL GRPOTrainer"}
RATIO_NAMES = {"s_per_step": "s/step", "cpu_s_per_step": "CPU s/step", "peak_rss_mb": "peak RSS"}


def demo_questions() -> list[Any]:
    """The demo questions, each with the quotes of its complete demo answer as its one reference."""
    from browser.engine.page import Quote
    from training.rl.types import RLQuestion

    texts = [json.loads(line) for line in DEMO_QUESTIONS.read_text().splitlines() if line.strip()]
    answers = [json.loads(line) for line in DEMO_ANSWERS.read_text().splitlines() if line.strip()]
    quotes = {
        a["question_external_id"]: tuple(Quote.from_dict(q) for q in a["quotes"])
        for a in answers
        if a["quality"] == "complete"
    }
    return [
        RLQuestion(number, q["question"], references=(quotes[q["id"]],))
        for number, q in enumerate(texts, start=1)
        if q["id"] in quotes
    ]


def make_reward_model(folder: Path, backbone: Path) -> Path:
    """A reward checkpoint as ``train_reward_model`` lays one out (weights, ``training.json`` of kind rm),
    the real backbone under a seeded random head. Reused when it is already there."""
    import torch

    from training.runs.config import RMConfig
    from training.runs.reward import load_reward_model
    from training.runs.runtime import save_model

    if (folder / "training.json").is_file():
        return folder
    torch.manual_seed(0)
    model, tokenizer = load_reward_model(backbone)
    with torch.no_grad():
        # BERT's init (std 0.02) would score every answer alike to a few thousandths: a wider head spreads
        # the scores out, so that the advantages are not all about zero.
        model.classifier.weight.normal_(0.0, 1.0 / math.sqrt(model.config.hidden_size))
    config = RMConfig(base_model=str(backbone)).to_dict()
    save_model(model, tokenizer, folder, {"kind": "rm", "config": config, "metrics": {}})
    return folder


class StepClock:
    """The time, CPU time and peak RSS at each step's log, and the mean reward it reports. (The KL each
    reports is not comparable: ours sums k3 over an episode's tokens, TRL's averages it per token.)"""

    def __init__(self) -> None:
        self.times: dict[int, float] = {}
        self.cpu: dict[int, float] = {}  # CPU time of all threads: less sensitive to other load
        self.rewards: dict[int, float] = {}
        self.peak_rss_mb = 0.0

    def mark(self, step: int, reward: float | None) -> None:
        if step in self.times:  # the Trainer's closing summary is logged at the last step again
            return
        self.times[step] = time.perf_counter()
        self.cpu[step] = time.process_time()
        self.peak_rss_mb = _vm_mb("VmHWM:")
        if reward is not None:
            self.rewards[step] = reward


def child(spec: dict[str, Any]) -> None:
    """One trainer in this (fresh) process; prints its result as JSON."""
    import torch

    from training.rl.config import RLConfig
    from training.rl.rollout import Plan
    from training.runs.bc import load_policy
    from training.runs.hooks import Hooks

    questions = demo_questions()
    work = Path(spec["work"])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    warmup, steps, prompts, group = spec["warmup"], spec["steps"], spec["prompts"], spec["group"]
    cfg = RLConfig(
        output_dir=str(work / "policy"),
        base_model=spec["base_path"],
        reward_model=spec["reward_model"],
        steps=warmup + steps,
        questions_per_step=prompts,
        group_size=group,
        max_answer_tokens=spec["max_tokens"],
        micro_batch=prompts * group,  # one forward/backward pass over the step's episodes, as TRL's
        seed=spec["seed"],
    )
    clock = StepClock()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (imports done)
    base_rss_mb = _vm_mb("VmRSS:")

    if spec["trainer"] == "ours":
        from training.rl.trainer import train_rl

        def progress(step: int, total: int, logs: dict[str, float]) -> None:
            clock.mark(step, logs["reward_mean"])

        train_rl(cfg, questions, Hooks(on_progress=progress))
    else:
        from datasets import Dataset
        from transformers import TrainerCallback
        from transformers.trainer_callback import PrinterCallback
        from trl import GRPOConfig, GRPOTrainer

        from browser.engine.observation import format_answer_prompt
        from training.sampling.best_of_n import RewardScorer
        from training.sampling.episode import SamplingSettings
        from training.sampling.local import LocalBackend
        from training.sampling.policies import PromptedPolicy

        model, tokenizer = load_policy(Path(spec["base_path"]))
        scorer = RewardScorer(cfg.reward_model)
        # The chat ours asks with; TRL renders it with the same template (checked below, token for token).
        asker = PromptedPolicy(LocalBackend.over(model, tokenizer))
        settings = SamplingSettings(temperature=cfg.temperature, max_answer_tokens=cfg.max_answer_tokens)
        rows = []
        for question, quotes in Plan(cfg, questions).items:  # ours's order: the same prompts each step
            answer_prompt = format_answer_prompt(question.text, quotes)
            request = asker.answer_request_for(answer_prompt, settings, 0)
            chat = [{"role": m.role, "content": m.content} for m in request.messages or ()]
            ours_ids = asker.backend.encode(request)
            trl_ids = tokenizer.apply_chat_template(
                chat, add_generation_prompt=True, tokenize=True, return_dict=True
            )["input_ids"]
            if list(trl_ids) != ours_ids:
                raise RuntimeError(f"TRL's prompt differs from ours for question {question.id}")
            rows.append({"prompt": chat, "answer_prompt": answer_prompt})

        def reward_model(completions: list[Any], answer_prompt: list[str], **_: Any) -> list[float]:
            """Ours's reward: the answer (stripped, as ours strips it) scored on its answer prompt."""
            answers = [completion[-1]["content"].strip() for completion in completions]
            return scorer.score(answer_prompt, answers)

        class Marks(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                logs = logs or {}
                clock.mark(state.global_step, logs.get("reward"))

        # TRL's defaults that differ from ours where it matters for an equal comparison, set to ours: bf16
        # autocast and gradient checkpointing on, beta 0, scaled rewards, temperature 1, a linear decay of
        # the learning rate, no weight decay (torch's AdamW: 0.01), dropout on (ours samples and trains in
        # eval mode), a shuffled dataset, logging every 10 steps.
        args = GRPOConfig(
            output_dir=str(work),
            per_device_train_batch_size=prompts * group,
            generation_batch_size=prompts * group,  # one generation per optimizer step
            num_generations=group,
            max_completion_length=cfg.max_answer_tokens,
            temperature=cfg.temperature,
            beta=cfg.kl_coef,
            epsilon=cfg.clip_epsilon,
            num_iterations=cfg.updates_per_step,
            scale_rewards="none",
            loss_type="dapo",
            learning_rate=cfg.learning_rate,
            lr_scheduler_type="constant",
            weight_decay=0.01,
            max_grad_norm=1.0,
            max_steps=warmup + steps,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            use_cpu=True,
            bf16=False,
            activation_checkpointing=False,
            disable_dropout=True,
            shuffle_dataset=False,
            dataloader_num_workers=0,
            seed=cfg.seed,
            data_seed=cfg.seed,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward_model,
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
        )
        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(Marks())
        trainer.train()

    last = warmup + steps
    if not {warmup, last} <= clock.times.keys():
        raise RuntimeError(f"steps logged: {sorted(clock.times)}; expected {warmup} and {last}")
    seconds = (clock.times[last] - clock.times[warmup]) / steps
    result = {
        "trainer": spec["trainer"],
        "model": spec["model"],
        "prompts_per_step": prompts,
        "group_size": group,
        "max_completion_tokens": spec["max_tokens"],
        "warmup_steps": warmup,
        "timed_steps": steps,
        "s_per_step": round(seconds, 3),
        "cpu_s_per_step": round((clock.cpu[last] - clock.cpu[warmup]) / steps, 3),
        "episodes_per_s": round(prompts * group / seconds, 3),
        "step_times_s": [round(clock.times[s] - clock.times[s - 1], 3) for s in sorted(clock.times) if s > 1],
        "reward_mean_per_step": [round(clock.rewards[s], 4) for s in sorted(clock.rewards)],
        "base_rss_mb": round(base_rss_mb),
        "peak_rss_mb": round(clock.peak_rss_mb),
        "torch_threads": torch.get_num_threads(),
    }
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


def ratios(runs: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Ours over TRL's: time and CPU time per step and peak RSS (below 1: ours needs less)."""
    ours, trl = runs.get("ours", {}), runs.get("trl", {})
    return {key: round(ours[key] / trl[key], 2) for key in RATIO_NAMES if ours.get(key) and trl.get(key)}


def markdown(results: dict[str, Any]) -> str:
    columns = ["trainer", "prompts x group x max tokens", "s/step", "CPU s/step", "episodes/s"]
    columns += ["peak RSS MB", "RSS after imports MB", "mean reward per step"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for run in results["runs"].values():
        label = LABELS[run["trainer"]]
        if "error" in run:
            lines.append(f"| {label} | error: {run['error'][-1:]} |" + " |" * (len(columns) - 2))
            continue
        shape = f"{run['prompts_per_step']} x {run['group_size']} x {run['max_completion_tokens']}"
        cells = [label, shape, run["s_per_step"], run["cpu_s_per_step"], run["episodes_per_s"]]
        cells += [run["peak_rss_mb"], run["base_rss_mb"], " ".join(map(str, run["reward_mean_per_step"]))]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    if results["ratios"]:
        parts = [f"{RATIO_NAMES[key]} x{value}" for key, value in results["ratios"].items()]
        lines.append("\nRL ours/TRL: " + ", ".join(parts))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "rl.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 warm-up and 1 timed step each")
    parser.add_argument("--steps", type=int, default=4, help="timed steps (~30-40 s each on 2 idle cores)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--group", type=int, default=4, help="episodes per prompt (TRL's num_generations)")
    parser.add_argument("--max-tokens", type=int, default=64, help="completion tokens at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    began = time.perf_counter()
    from training.runs.store import resolve_base_model

    folder = args.out.parent / "rl"
    store = folder / "models"
    smollm2 = resolve_base_model(SMOLLM2, store)  # the one-time GGUF conversion (~25 s), outside the runs
    reward_model = make_reward_model(folder / "reward-model", resolve_base_model(MINILM, store))
    print(f"{SMOLLM2} in {smollm2}, reward model {reward_model} ({time.perf_counter() - began:.0f} s)")
    warmup, steps = (1, 1) if args.quick else (args.warmup, args.steps)
    spec = {
        "model": SMOLLM2,
        "base_path": str(smollm2),
        "reward_model": str(reward_model),
        "warmup": warmup,
        "steps": steps,
        "prompts": args.prompts,
        "group": args.group,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "work": str(folder / "work"),
    }
    env = environment()  # first: a missing package fails here, not after the runs
    runs = {}
    for trainer in ("ours", "trl"):
        runs[trainer] = measure(spec | {"trainer": trainer}, Path(__file__))
        shown = {k: v for k, v in runs[trainer].items() if k not in ("base_path", "reward_model", "work")}
        print(f"  {trainer}: {json.dumps(shown)}", flush=True)
    results = {"environment": env, "runs": runs, "ratios": ratios(runs)}
    results["total_wall_s"] = round(time.perf_counter() - began, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    print(f"total {results['total_wall_s']} s; JSON in {args.out}")


if __name__ == "__main__":
    main()
