"""Benchmark our training steps on the CPU against TRL's (SFTTrainer, RewardTrainer), in the same run.

Our trainers (training/runs/bc.py, training/runs/reward.py) and TRL's on the same model, data and batch:
behaviour cloning against ``trl.SFTTrainer`` (completion-only loss), the reward model
against ``trl.RewardTrainer``.

    .venv/bin/python bench/bench_training.py --out var/bench/training.json

Synthetic data of WebGPT's shapes, written as the export formats the trainers read: ``bc-pairs`` rows
(a browsing observation of ~450 tokens -> a command of ~20) and ``rm-pairs`` rows (an answer prompt of
~150 tokens with its own quotes for each answer, answers of ~80), lengths counted with each model's own
tokenizer and kept under ``max_length`` so that neither trainer cuts or drops anything. BC trains
SmolLM2-135M-Instruct (converted once into a model store next to --out), the reward model
all-MiniLM-L6-v2 (the "fast" preset, the default without a GPU). Every run is its own subprocess
(OMP_WAIT_POLICY=PASSIVE, as the worker runs): warm-up steps, then timed optimizer steps, both trainers
timed at the same point (each step's log, logging every step); peak RSS is VmHWM after imports were
reset, read at the last step (before our trainer saves the model). Examples are seen once each, in the
same order (same seed). On a shared machine wall times follow the other load: CPU s/step (the process's
CPU time over the timed steps) is the steadier number for ours/TRL. bench/bench_training_gpu.py runs the
same comparison on a CUDA GPU. Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from training.runs.config import MINILM, SMOLLM2  # noqa: E402

WORDS = ["river", "bridge", "castle", "winter", "harbour", "signal", "market", "garden", "tower", "orbit"]
WORDS += ["history", "energy", "battery", "vaccine", "planet", "climate", "election", "theory", "report"]
WORDS += ["because", "however", "although", "during", "between", "several", "average", "million", "source"]
LABELS = {
    ("bc", "ours"): "BC: ours",
    ("bc", "trl"): "BC: TRL SFTTrainer",
    ("rm", "ours"): "RM: ours",
    ("rm", "trl"): "RM: TRL RewardTrainer",
}
RATIO_NAMES = {
    "examples_per_s": "examples/s",
    "cpu_s_per_step": "CPU s/step",
    "peak_rss_mb": "peak RSS",
    "peak_gpu_mb": "peak GPU memory",
}
COMMANDS = ("Search", "Quote:", "Clicked on link", "Scrolled down", "Find in page:")
# Seeded random.Random only draws benchmark data deterministically (ruff S311 is about secrets).


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def fit(tokenizer: Any, text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` tokens of this tokenizer (whole tokens, decoded back to text)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][:tokens]
    return tokenizer.decode(ids)


def count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def bc_rows(tokenizer: Any, n: int, prompt_tokens: tuple[int, int], seed: int) -> list[dict[str, Any]]:
    """``bc-pairs`` rows: an observation like the browser's (question, quotes, past actions, the page
    text in the viewport, actions left) and the next command, ~20 tokens."""
    rng = random.Random(seed)  # noqa: S311
    rows = []
    for n_row in range(n):
        question = f"Question: why is the {words(rng, 3)} {words(rng, 2)}?\n"
        head = question + f"Quotes:\nFrom {words(rng, 2)} (en.example.org): {words(rng, 25)}\n"
        head += f"Past actions:\nSearch {words(rng, 4)}\nClicked on link <{rng.randint(0, 20)}>\n"
        head += f"Title: {words(rng, 4).title()}\nScrollbar: 0 - {rng.randint(5, 40)}\nText:\n"
        tail = f"\nActions left: {rng.randint(1, 99)}\nNext action:"
        room = rng.randint(*prompt_tokens) - count(tokenizer, head + tail)
        page = fit(tokenizer, " ".join(f"【{i}†{words(rng, 3)}】 {words(rng, 40)}" for i in range(20)), room)
        completion = fit(tokenizer, f" {rng.choice(COMMANDS)} {words(rng, 30)}", rng.randint(15, 25))
        rows.append({"question_id": n_row + 1, "prompt": head + page + tail, "completion": completion})
    return rows


def rm_rows(
    tokenizer: Any, n: int, prompt_tokens: tuple[int, int], answer_tokens: tuple[int, int], seed: int
) -> list[dict[str, Any]]:
    """``rm-pairs`` rows: each answer with its own prompt (the question and that answer's quotes)."""
    rng = random.Random(seed)  # noqa: S311

    def prompt(question: str) -> str:
        quotes = " ".join(f"[{i}] {words(rng, 40)}\n" for i in range(1, 13))  # ~500 tokens, then cut
        return fit(tokenizer, question + quotes, rng.randint(*prompt_tokens) - 2) + "\nAnswer:"

    def answer() -> str:
        return fit(tokenizer, f" {words(rng, 150)}", rng.randint(*answer_tokens))

    rows = []
    for n_row in range(n):
        question = f"Question: why is the {words(rng, 3)} {words(rng, 2)}?\nQuotes:\n"
        rows.append(
            {
                "question_id": n_row + 1,
                "prompt_chosen": prompt(question),
                "chosen": answer(),
                "prompt_rejected": prompt(question),
                "rejected": answer(),
                "label": 1.0,
                "margin": 1.0,
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _vm_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field)) / 1024


def child(spec: dict[str, Any]) -> None:
    """One trainer in this (fresh) process; prints its result as JSON."""
    import torch
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback

    from training.runs.bc import encode_example, load_policy, train_bc
    from training.runs.config import BCConfig, RMConfig
    from training.runs.data import comparisons, read_rows
    from training.runs.hooks import Hooks
    from training.runs.reward import encode_answer, load_reward_model, train_reward_model
    from training.runs.store import resolve_base_model

    if spec["trainer"] == "trl":
        from datasets import Dataset
        from trl import RewardConfig, RewardTrainer, SFTConfig, SFTTrainer

    cuda = torch.cuda.is_available()

    class StepClock(TrainerCallback):
        """The time of each optimizer step's log (every step, right after the loss is read back), the one
        point both trainers report: ours through ``Hooks.on_progress``, TRL's through ``on_log``."""

        def __init__(self) -> None:
            self.times: dict[int, float] = {}
            self.cpu: dict[int, float] = {}  # CPU time of all threads: less sensitive to other load
            self.peak_rss_mb = self.peak_gpu_mb = 0.0

        def mark(self, step: int, total: int = 0, logs: dict[str, float] | None = None) -> None:
            if step in self.times:  # the Trainer's closing summary is logged at the last step again
                return
            if cuda:
                torch.cuda.synchronize()
                self.peak_gpu_mb = torch.cuda.max_memory_allocated() / 2**20
            self.times[step] = time.perf_counter()
            self.cpu[step] = time.process_time()
            self.peak_rss_mb = _vm_mb("VmHWM:")

        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.mark(state.global_step)

    base_path = resolve_base_model(spec["model"], Path(spec["store"]))
    work = Path(spec["work"])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    warmup, steps, batch, max_length = spec["warmup"], spec["steps"], spec["batch"], spec["max_length"]
    common = {
        "base_model": str(base_path),
        "data": spec["data"],
        "output_dir": str(work / "model"),
        "batch_size": batch,
        "max_length": max_length,
        "max_steps": warmup + steps,
        "validation_fraction": 0.0,
        "gradient_checkpointing": spec["gradient_checkpointing"],
    }
    cfg = BCConfig(**common) if spec["kind"] == "bc" else RMConfig(**common)
    rows = read_rows(spec["data"])
    clock = StepClock()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (imports done)
    base_rss_mb = _vm_mb("VmRSS:")
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    if spec["trainer"] == "ours":
        hooks = Hooks(on_progress=clock.mark)
        run = train_bc(cfg, hooks) if spec["kind"] == "bc" else train_reward_model(cfg, hooks)
        examples = run.train_examples
        tokenizer = AutoTokenizer.from_pretrained(base_path)
        if spec["kind"] == "bc":
            encoded = [encode_example(tokenizer, r["prompt"], r["completion"], max_length) for r in rows]
            lengths = [len(e["input_ids"]) for e in encoded]
        else:
            lengths = [
                sum(
                    len(encode_answer(tokenizer, p, a, max_length))
                    for p, a in zip(c.prompts, c.answers, strict=True)
                )
                for c in comparisons(rows)
            ]
    else:
        # TRL's defaults differ from ours where it matters for an equal comparison: bf16 autocast (also on
        # a CPU) and gradient checkpointing are on, logging every 10 steps, seed 42; set to our values.
        same = {
            "output_dir": str(work),
            "per_device_train_batch_size": batch,
            "learning_rate": cfg.learning_rate,
            "lr_scheduler_type": "cosine",
            "warmup_steps": cfg.warmup_ratio,
            "max_steps": warmup + steps,
            "logging_steps": 1,
            "save_strategy": "no",
            "report_to": [],
            "disable_tqdm": True,
            "use_cpu": not cuda,
            "bf16": cuda and torch.cuda.is_bf16_supported(),
            "activation_checkpointing": cfg.gradient_checkpointing,
            "dataloader_num_workers": 0,
            "seed": cfg.seed,
            "data_seed": cfg.seed,
        }
        if spec["kind"] == "bc":
            model, tokenizer = load_policy(base_path)  # sets the pad token SFTTrainer needs, as ours does
            # SFTTrainer swaps in a fused LM head that computes log-probs, entropy and top-1 in chunks;
            # without Triton (a CPU) it scores every position, with Triton only the completion's.
            dataset = Dataset.from_list(
                [{"prompt": r["prompt"], "completion": r["completion"]} for r in rows]
            )
            # max_length defaults to 1024 and cuts from the end (the completion first): set it to ours.
            # completion_only_loss is implied by prompt/completion rows; explicit here.
            args = SFTConfig(**same, max_length=max_length, completion_only_loss=True)
            trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
            lengths = [len(ids) for ids in trainer.train_dataset["input_ids"]]
        else:
            model, tokenizer = load_reward_model(base_path)
            # Implicit prompts (prompt + answer as one text) because each answer has its own prompt. The
            # rows' margin is left out: RewardTrainer would subtract it inside the loss, ours has none.
            dataset = Dataset.from_list(
                [
                    {
                        "chosen": r["prompt_chosen"] + r["chosen"],
                        "rejected": r["prompt_rejected"] + r["rejected"],
                    }
                    for r in rows
                ]
            )
            args = RewardConfig(
                **same,
                max_length=max_length,  # pairs longer than this are dropped, not cut (the data fits)
                disable_dropout=False,  # on by default: ours trains with the model's dropout
                # It appends an eos token to every text and a BERT tokenizer has none: [SEP] ends a sequence.
                eos_token=None if tokenizer.eos_token else tokenizer.sep_token,
            )
            trainer = RewardTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
            lengths = [
                len(c) + len(r)
                for c, r in zip(
                    trainer.train_dataset["chosen_ids"], trainer.train_dataset["rejected_ids"], strict=True
                )
            ]
        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(clock)
        trainer.train()
        examples = len(trainer.train_dataset)

    last = warmup + steps
    if not {warmup, last} <= clock.times.keys():
        raise RuntimeError(f"steps logged: {sorted(clock.times)}; expected {warmup} and {last}")
    seconds = (clock.times[last] - clock.times[warmup]) / steps
    tokens = sum(lengths) / len(lengths)
    result = {
        "kind": spec["kind"],
        "trainer": spec["trainer"],
        "model": spec["model"],
        "batch": batch,
        "max_length": max_length,
        "warmup_steps": warmup,
        "timed_steps": steps,
        "train_examples": examples,
        "tokens_per_example": round(tokens, 1),
        "s_per_step": round(seconds, 3),
        "cpu_s_per_step": round((clock.cpu[last] - clock.cpu[warmup]) / steps, 3),
        "examples_per_s": round(batch / seconds, 3),
        "tokens_per_s": round(batch * tokens / seconds, 1),
        "step_times_s": [round(clock.times[s] - clock.times[s - 1], 3) for s in sorted(clock.times) if s > 1],
        "base_rss_mb": round(base_rss_mb),
        "peak_rss_mb": round(clock.peak_rss_mb),
        "torch_threads": torch.get_num_threads(),
    }
    if cuda:
        result |= {"peak_gpu_mb": round(clock.peak_gpu_mb), "gpu": torch.cuda.get_device_name()}
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


def measure(spec: dict[str, Any], script: Path = Path(__file__)) -> dict[str, Any]:
    """``spec`` run by a fresh interpreter of ``script --child`` (clean peaks, nothing shared between
    trainers; bench_rl.py measures its own children the same way)."""
    env = os.environ | {
        "OMP_WAIT_POLICY": "PASSIVE",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    args = [sys.executable, str(script.resolve()), "--child", json.dumps(spec)]
    load = os.getloadavg()[0]
    began = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603
    wall = round(time.perf_counter() - began, 1)
    if done.returncode:
        return {**spec, "error": done.stderr.strip().splitlines()[-5:], "wall_s": wall}
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"wall_s": wall, "load_before": round(load, 2)}


def ratios(runs: dict[str, dict[str, Any]], kinds: list[str]) -> dict[str, dict[str, float]]:
    """Ours over TRL's per kind: examples/s (above 1: ours is faster), CPU time per step and peaks (below
    1: ours needs less)."""
    out = {}
    for kind in kinds:
        ours, trl = runs.get(f"{kind}-ours", {}), runs.get(f"{kind}-trl", {})
        if "examples_per_s" not in ours or "examples_per_s" not in trl:
            continue
        out[kind] = {"examples_per_s": round(ours["examples_per_s"] / trl["examples_per_s"], 2)}
        for key in ("cpu_s_per_step", "peak_rss_mb", "peak_gpu_mb"):
            if ours.get(key) and trl.get(key):
                out[kind][key] = round(ours[key] / trl[key], 2)
    return out


def markdown(results: dict[str, Any]) -> str:
    gpu = any("peak_gpu_mb" in run for run in results["runs"].values())
    columns = ["trainer", "model", "batch x max tokens", "tokens/example", "examples/s", "tokens/s", "s/step"]
    columns += ["peak GPU MB"] if gpu else ["CPU s/step", "peak RSS MB", "RSS after imports MB"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for run in results["runs"].values():
        label = LABELS[run["kind"], run["trainer"]]
        if "error" in run:
            lines.append(f"| {label} | error: {run['error'][-1:]} |" + " |" * (len(columns) - 2))
            continue
        cells = [label, run["model"], f"{run['batch']} x {run['max_length']}", run["tokens_per_example"]]
        cells += [run["examples_per_s"], run["tokens_per_s"], run["s_per_step"]]
        cells += (
            [run["peak_gpu_mb"]] if gpu else [run["cpu_s_per_step"], run["peak_rss_mb"], run["base_rss_mb"]]
        )
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    for kind, ratio in results["ratios"].items():
        parts = [f"{RATIO_NAMES[key]} x{value}" for key, value in ratio.items()]
        lines.append(f"\n{kind.upper()} ours/TRL: " + ", ".join(parts))
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    import torch
    import transformers
    import trl

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "cpus": os.cpu_count(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def run_all(specs: list[dict[str, Any]], out: Path, began: float) -> dict[str, Any]:
    """Measure every spec, then write the JSON and print the table."""
    runs = {}
    for spec in specs:
        name = f"{spec['kind']}-{spec['trainer']}"
        runs[name] = measure(spec)
        shown = {k: v for k, v in runs[name].items() if k not in ("store", "work", "data")}
        print(f"  {name}: {json.dumps(shown)}", flush=True)
    kinds = list(dict.fromkeys(spec["kind"] for spec in specs))
    results = {"environment": environment(), "runs": runs, "ratios": ratios(runs, kinds)}
    results["total_wall_s"] = round(time.perf_counter() - began, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    print(f"total {results['total_wall_s']} s; JSON in {out}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "training.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 warm-up and 1 timed step each")
    parser.add_argument("--only", choices=("bc", "rm"), help="one of the two comparisons")
    parser.add_argument("--bc-steps", type=int, default=3, help="timed BC steps (~30 s each on 2 cores)")
    parser.add_argument("--rm-steps", type=int, default=5, help="timed reward-model steps (~5-10 s each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    began = time.perf_counter()
    from transformers import AutoTokenizer

    from training.runs.store import resolve_base_model

    folder = args.out.parent / "training"
    store = folder / "models"
    warmup, bc_steps, rm_steps = (1, 1, 1) if args.quick else (1, args.bc_steps, args.rm_steps)
    bc_batch, rm_batch = 4, 8
    specs = []
    if args.only in (None, "bc"):
        smollm2 = resolve_base_model(SMOLLM2, store)  # the one-time GGUF conversion (~25 s), outside the runs
        print(f"{SMOLLM2} in {smollm2} ({time.perf_counter() - began:.0f} s)", flush=True)
        tokenizer = AutoTokenizer.from_pretrained(smollm2)
        rows = bc_rows(tokenizer, bc_batch * (warmup + bc_steps), (430, 480), args.seed)
        data = write_jsonl(folder / "bc-pairs.jsonl", rows)
        bc = {"kind": "bc", "model": SMOLLM2, "batch": bc_batch, "max_length": 512, "steps": bc_steps}
        specs += [bc | {"trainer": trainer, "data": str(data)} for trainer in ("ours", "trl")]
    if args.only in (None, "rm"):
        tokenizer = AutoTokenizer.from_pretrained(resolve_base_model(MINILM, store))
        rows = rm_rows(tokenizer, rm_batch * (warmup + rm_steps), (130, 160), (65, 88), args.seed)
        data = write_jsonl(folder / "rm-pairs.jsonl", rows)
        rm = {"kind": "rm", "model": MINILM, "batch": rm_batch, "max_length": 256, "steps": rm_steps}
        specs += [rm | {"trainer": trainer, "data": str(data)} for trainer in ("ours", "trl")]
    common = {
        "warmup": warmup,
        "store": str(store),
        "work": str(folder / "work"),
        "gradient_checkpointing": False,
    }
    run_all([common | spec for spec in specs], args.out, began)


if __name__ == "__main__":
    main()
