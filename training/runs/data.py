"""Training examples from export files: reading, held-out splits by question, comparison groups, and
the token-level cuts (prompts are cut in the middle, the text to learn or to score never)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, TypeVar

Row = dict[str, Any]
T = TypeVar("T")


def read_rows(path: str | Path) -> list[Row]:
    """All rows of a JSONL or Parquet export (training sets fit in memory; exports stream)."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    rows = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path.name} line {number}: not JSON ({exc.msg})") from None
    return rows


def question_key(row: Row) -> str:
    """Examples of one question stay on one side of a split (rows without ids: by their prompt)."""
    if row.get("question_id") is not None:
        return str(row["question_id"])
    prompt = row.get("prompt") or row.get("prompt_chosen") or (row.get("prompts") or [""])[0]
    return hashlib.sha256(prompt.encode()).hexdigest()


def held_out_split(
    items: Sequence[T], key: Callable[[T], str], fraction: float, seed: int = 0
) -> tuple[list[T], list[T]]:
    """(train, validation) with about ``fraction`` of the questions held out, deterministically (a hash of
    seed and question), at least one question on each side when there are two or more. Training always keeps
    a question: a one-question export trains with no validation rather than failing as "empty" whenever
    its question's hash happens to fall below ``fraction``."""
    if fraction <= 0:
        return list(items), []
    keys = sorted({key(item) for item in items})
    rank = {k: hashlib.sha256(f"{seed}:{k}".encode()).digest() for k in keys}
    held = {k for k in keys if int.from_bytes(rank[k][:8], "big") / 2**64 < fraction}
    if len(keys) >= 2 and not held:
        held = {min(keys, key=rank.__getitem__)}
    if held and len(held) == len(keys):
        held.discard(max(keys, key=rank.__getitem__))
    train = [item for item in items if key(item) not in held]
    return train, [item for item in items if key(item) in held]


@dataclass
class Comparison:
    """Answers to one question judged together, and what to learn: ``(i, j, p)`` says answer ``i`` beats
    answer ``j`` with probability ``p`` (1 preferred, 0.5 a tie). A pair is the case K = 2."""

    prompts: list[str]
    answers: list[str]
    pairs: list[tuple[int, int, float]]
    question: str
    answer_ids: list[int | None]


def ranked_pairs(ranks: Sequence[int]) -> list[tuple[int, int, float]]:
    """All K-choose-2 pairs of a ranking (lower rank = better): 1.0 for the better one, 0.5 for a tie."""
    pairs = []
    for i, j in combinations(range(len(ranks)), 2):
        if ranks[i] == ranks[j]:
            pairs.append((i, j, 0.5))
        elif ranks[i] < ranks[j]:
            pairs.append((i, j, 1.0))
        else:
            pairs.append((j, i, 1.0))
    return pairs


def comparisons(rows: Sequence[Row]) -> list[Comparison]:
    """``rm-pairs`` rows (chosen/rejected, label) and ``rm-groups`` rows (K-way ranks) as comparisons."""
    result = []
    for number, row in enumerate(rows, start=1):
        if "ranks" in row:
            if not len(row["ranks"]) == len(row["answers"]) == len(row["prompts"]) >= 2:
                raise ValueError(f"row {number}: a group needs two or more prompts, answers and ranks")
            result.append(
                Comparison(
                    list(row["prompts"]),
                    list(row["answers"]),
                    ranked_pairs(row["ranks"]),
                    question_key(row),
                    list(row.get("answer_ids") or [None] * len(row["answers"])),
                )
            )
        elif {"prompt_chosen", "chosen", "prompt_rejected", "rejected"} <= row.keys():
            label = float(row.get("label", 1.0))
            if label not in (0.5, 1.0):
                raise ValueError(f"row {number}: label must be 1 or 0.5, not {row.get('label')!r}")
            result.append(
                Comparison(
                    [row["prompt_chosen"], row["prompt_rejected"]],
                    [row["chosen"], row["rejected"]],
                    [(0, 1, label)],
                    question_key(row),
                    [row.get("answer_chosen"), row.get("answer_rejected")],
                )
            )
        else:
            raise ValueError(f"row {number}: not an rm-pairs or rm-groups row (export one of those formats)")
    return result


def bc_examples(rows: Sequence[Row]) -> list[Row]:
    for number, row in enumerate(rows, start=1):
        if not isinstance(row.get("prompt"), str) or not isinstance(row.get("completion"), str):
            raise ValueError(f"row {number}: not a bc-pairs row (needs prompt and completion)")
    return list(rows)


def cut_middle(ids: list[int], room: int) -> list[int]:
    """Keep the start (the question) and the end (what comes just before the completion) of a prompt."""
    if len(ids) <= room:
        return ids
    if room <= 0:
        return []
    head = room // 4
    return ids[:head] + ids[len(ids) - (room - head) :]


def question_ids(rows: Sequence[Row]) -> set[int]:
    return {int(row["question_id"]) for row in rows if row.get("question_id") is not None}
