"""Training throughput on a CUDA GPU: tokens/s of our behaviour-cloning and reward-model trainers against
TRL's SFTTrainer and RewardTrainer, SmolLM2-135M-Instruct for both, in bf16 (autocast, as our trainers
run on a GPU), measured in the same run.

    .venv/bin/python bench/bench_training_gpu.py --out var/bench/training-gpu.json

The machinery of bench/bench_training.py (which measures the CPU): the same synthetic bc-pairs and
rm-pairs rows, one subprocess per run, the same timing point, with GPU-sized batches and more steps. The
reward model uses the "paper" preset (the default with a GPU: SmolLM2 with a scalar head, 512 tokens,
gradient checkpointing), its answer prompts ~350 tokens. Peak memory is torch.cuda.max_memory_allocated.
Without a CUDA GPU it says so and exits with status 0 (so that `make bench` goes on) having measured
nothing. Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_training import bc_rows, rm_rows, run_all, write_jsonl  # noqa: E402
from training.runs.config import RM_PRESETS, SMOLLM2  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "training-gpu.json")
    parser.add_argument("--bc-batch", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps (CUDA kernels, allocator)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    began = time.perf_counter()
    import torch

    if not torch.cuda.is_available():
        print(
            "bench_training_gpu: no CUDA GPU here (torch.cuda.is_available() is False): nothing measured. "
            "bench/bench_training.py measures training on the CPU."
        )
        return
    from transformers import AutoTokenizer

    from training.runs.store import resolve_base_model

    folder = args.out.parent / "training-gpu"
    store = folder / "models"
    smollm2 = resolve_base_model(SMOLLM2, store)
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    examples = args.warmup + args.steps  # batches: each example is seen once
    bc_data = write_jsonl(
        folder / "bc-pairs.jsonl", bc_rows(tokenizer, args.bc_batch * examples, (430, 480), args.seed)
    )
    paper = RM_PRESETS["paper"]
    # Answer prompts carry the quotes; at most 400 + 100 tokens, under the preset's 512 (TRL would drop more).
    rm_data = write_jsonl(
        folder / "rm-pairs.jsonl",
        rm_rows(tokenizer, paper["batch_size"] * examples, (300, 400), (60, 100), args.seed),
    )
    common = {"model": SMOLLM2, "warmup": args.warmup, "steps": args.steps}
    common |= {"store": str(store), "work": str(folder / "work")}
    bc = common | {"kind": "bc", "data": str(bc_data), "batch": args.bc_batch, "max_length": 512}
    bc["gradient_checkpointing"] = False
    rm = common | {"kind": "rm", "data": str(rm_data), "batch": paper["batch_size"]}
    rm |= {"max_length": paper["max_length"], "gradient_checkpointing": paper["gradient_checkpointing"]}
    specs = [spec | {"trainer": trainer} for spec in (bc, rm) for trainer in ("ours", "trl")]
    run_all(specs, args.out, began)


if __name__ == "__main__":
    main()
