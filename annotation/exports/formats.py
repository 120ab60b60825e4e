"""Export rows from plain data (no Django): the WebGPT comparisons schema and ours.

WebGPT comparisons (openai/webgpt_comparisons): ``question {dataset, full_text, id}``, ``quotes_i {title[],
extract[]}`` with titles "Title (domain)", ``answer_i``, ``tokens_i``, ``score_i`` with score_0 + score_1 = 0,
the preferred answer positive, 0 for a tie; the magnitude carries "better" (0.5) vs "much better" (1.0).
Answer 0 is the answer with the lower id, whatever order a labeler saw, so every labeler's row for one
pair lines up. ``tokens_i`` is left empty: training tokenizes with its own tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from annotation.feedback.scales import preference_value
from browser.engine.observation import format_answer_prompt
from browser.engine.page import Quote


def quote_title(quote: dict[str, Any]) -> str:
    return f"{quote['title']} ({quote['domain']})" if quote.get("domain") else quote.get("title", "")


def webgpt_quotes(quotes: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    return {"title": [quote_title(q) for q in quotes], "extract": [q.get("extract", "") for q in quotes]}


def score_for_first(order: Sequence[int], overall: str) -> float:
    """The export score of the lower-id answer from the overall rating given in display order ``order``."""
    value = preference_value(overall)
    return value if order[0] == min(order) else -value


def webgpt_record(question: dict[str, Any], answer: dict[str, Any], score: float) -> dict[str, Any]:
    return {
        "question": question,
        "quotes": webgpt_quotes(answer["quotes"]),
        "answer": answer["text"],
        "tokens": [],
        "score": score,
    }


def webgpt_row(
    question: dict[str, Any], first: dict[str, Any], second: dict[str, Any], score: float
) -> dict[str, Any]:
    """One flattened row (the Hugging Face dataset's layout)."""
    row: dict[str, Any] = {"question": question}
    for index, (answer, value) in enumerate(((first, score), (second, -score))):
        row[f"quotes_{index}"] = webgpt_quotes(answer["quotes"])
        row[f"answer_{index}"] = answer["text"]
        row[f"tokens_{index}"] = []
        row[f"score_{index}"] = value + 0.0  # -0.0 -> 0.0
    return row


def webgpt_pair(
    question: dict[str, Any], first: dict[str, Any], second: dict[str, Any], score: float
) -> list:
    """One raw line of the original release: ``[record_0, record_1]``."""
    return [webgpt_record(question, first, score + 0.0), webgpt_record(question, second, -score + 0.0)]


def answer_prompt(question_text: str, quotes: Sequence[dict[str, Any]]) -> str:
    """The reward model's prefix for an answer: the answer prompt of the browsing environment."""
    return format_answer_prompt(question_text, list(stored_quotes(quotes)))


def stored_quotes(quotes: Sequence[dict[str, Any]]) -> tuple[Quote, ...]:
    """Quotes as answers and episodes store them (a missing field is empty), as the browser's quotes."""
    return tuple(
        Quote(q.get("title", ""), q.get("url", ""), q.get("domain", ""), q.get("extract", "")) for q in quotes
    )


def rm_pair(
    question_text: str, first: dict[str, Any], second: dict[str, Any], score: float, ids: dict
) -> dict:
    """A reward-model pair from a comparison (``score`` for ``first``): ties get label 0.5 (a soft target),
    "better" and "much better" both label 1 with the margin keeping the strength (WebGPT collapses them)."""
    chosen, rejected = (first, second) if score >= 0 else (second, first)
    return {
        "prompt_chosen": answer_prompt(question_text, chosen["quotes"]),
        "chosen": chosen["text"],
        "prompt_rejected": answer_prompt(question_text, rejected["quotes"]),
        "rejected": rejected["text"],
        "label": 0.5 if score == 0 else 1.0,
        "margin": abs(score),
        **ids,
    }
