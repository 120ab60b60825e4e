"""The judging prompts, versioned: what a language-model judge is shown of one item and what it is asked to
answer. A prompt is never edited once a run has used it: a change is a new version ("comparison-v2"), so a
judge run's ``prompt_version`` says exactly what its model read.

The item is shown as the task page shows it to a labeler (``annotation.feedback.presenter``): the question,
then each answer under its display slot in the order drawn, with its references (title, domain, extract);
the minimal comparison without citations and references. Blinded like the page: no source, no model name,
no side. The verdict asked for is the labeler's response shape (``annotation.feedback.validation``) plus the
judge's confidence, so it is checked exactly like a human submission (``verdicts``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.feedback.scales import (
    CITATION,
    COMPARISON_SCALE,
    COMPARISON_TEMPLATES,
    QUESTION_FLAGS,
    codes,
    dimensions_for,
    rating_fields,
)
from training.sampling.types import Message

COMPARISON_V1 = "comparison-v1"
RANKING_V1 = "ranking-v1"
RATING_V1 = "rating-v1"
# The templates each version judges (every version ever used stays here: old runs' prompts still render).
PROMPT_TEMPLATES = {
    COMPARISON_V1: ("webgpt_comparison", "minimal_comparison"),
    RANKING_V1: ("ranking",),
    RATING_V1: ("rating",),
}
# The version a new run of each template uses.
PROMPT_VERSIONS = {
    "webgpt_comparison": COMPARISON_V1,
    "minimal_comparison": COMPARISON_V1,
    "ranking": RANKING_V1,
    "rating": RATING_V1,
}

# --- comparison-v1, ranking-v1, rating-v1: never edit these texts; add a version ---

JUDGE_ROLE_V1 = (
    "You are a careful evaluator of answers to questions. Answers cite their references with numbers in "
    "brackets, like [1]; the references are the extracts the answer's writer collected. Judge only what is "
    "shown: an answer is supported when its references (or common knowledge) back it."
)
COMPARISON_TASK_V1 = (
    "Compare answer A with answer B on each of these dimensions, always saying which answer is better with "
    "respect to it:\n{dimensions}\nRate each dimension on this scale (use the codes): {scale}."
    "{flags}\nGive your confidence that your overall rating is right, from 0 to 1."
)
COMPARISON_FLAGS_V1 = (
    "\nFirst set the question flags: {flags}. Set one to true only when it clearly holds; a flagged "
    "question needs no ratings."
)
RANKING_TASK_V1 = (
    "Rank the {count} answers from best (rank 1) to worst (rank {count}) by overall usefulness to the "
    "person who asked: accurate, supported by the references, relevant and coherent. Give every answer "
    "a rank (its number as the key); equal answers may share a rank. Give your confidence that your "
    "ranking is right, from 0 to 1."
)
RATING_TASK_V1 = (
    "Rate the answer on each of these fields (use the codes given):\n{fields}\nGive your confidence that "
    "your rating is right, from 0 to 1."
)
REPLY_V1 = "Reply with one JSON object and nothing else, of this form:\n{example}"


@dataclass(frozen=True)
class ShownAnswer:
    """One answer as the judge sees it: its display slot, its text and its references."""

    slot: str
    text: str
    quotes: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class ShownItem:
    """One item in one order, blinded: the question and the answers under their slots."""

    template: str
    preset: str
    question: str
    answers: tuple[ShownAnswer, ...]


def slot_names(count: int, template: str) -> list[str]:
    """ "A", "B" in comparisons; "1".."K" otherwise (the task page's slots)."""
    return ["A", "B"][:count] if template in COMPARISON_TEMPLATES else [str(i) for i in range(1, count + 1)]


def shown_item(
    template: str, preset: str, question: str, answers: Sequence[tuple[str, Sequence[Any]]]
) -> ShownItem:
    """The item as the task page shows it: ``answers`` are (text, quotes) in the order drawn; the minimal
    comparison strips citations and references (WebGPT, Appendix F)."""
    minimal = template == "minimal_comparison"
    shown = tuple(
        ShownAnswer(
            slot=slot,
            text=CITATION.sub("", text) if minimal else text,
            quotes=() if minimal else tuple(quote for quote in quotes if isinstance(quote, Mapping)),
        )
        for slot, (text, quotes) in zip(slot_names(len(answers), template), answers, strict=True)
    )
    return ShownItem(template, preset or "", question, shown)


def render_item(item: ShownItem) -> str:
    """The question and the answers with their references, as plain text."""
    parts = [f"Question: {item.question}"]
    for answer in item.answers:
        parts.append(f"Answer {answer.slot}:\n{answer.text}")
        if answer.quotes:
            references = []
            for number, quote in enumerate(answer.quotes, start=1):
                title = str(quote.get("title") or quote.get("url") or "")
                domain = str(quote.get("domain") or "")
                source = f"{title} ({domain})" if domain else title
                references.append(f"[{number}] {source}\n{quote.get('extract') or '(no quoted extract)'}")
            parts.append(f"References of answer {answer.slot}:\n" + "\n".join(references))
    return "\n\n".join(parts)


def messages_for(version: str, item: ShownItem) -> tuple[Message, ...]:
    """The chat a judge is sent for ``item`` under prompt ``version``."""
    if item.template not in PROMPT_TEMPLATES.get(version, ()):
        raise ValueError(f"prompt {version!r} does not judge {item.template} items")
    system = f"{JUDGE_ROLE_V1}\n\n{_task(item)}\n\n{REPLY_V1.format(example=json.dumps(example(item)))}"
    return (Message("system", system), Message("user", render_item(item)))


def _task(item: ShownItem) -> str:
    if item.template in COMPARISON_TEMPLATES:
        dimensions = "\n".join(f"- {code}: {label}" for code, label in dimensions_for(item.template))
        scale = ", ".join(f"{code} ({label})" for code, label in COMPARISON_SCALE)
        flags = ""
        if item.template == "webgpt_comparison":
            flags = COMPARISON_FLAGS_V1.format(
                flags="; ".join(f"{code} ({label})" for code, label in QUESTION_FLAGS)
            )
        return COMPARISON_TASK_V1.format(dimensions=dimensions, scale=scale, flags=flags)
    if item.template == "ranking":
        return RANKING_TASK_V1.format(count=len(item.answers))
    fields = "\n".join(
        f"- {field.code}: {field.label} {field.help} Codes: {', '.join(codes(field.choices))}."
        if field.choices
        else f"- {field.code}: {field.label} {field.help} Free text"
        + (f" of at least {field.min_words} words." if field.min_words else ".")
        for field in rating_fields(item.preset)
    )
    return RATING_TASK_V1.format(fields=fields)


# A judge's comment is a sentence or two. The bound also closes the string under a server's JSON-schema
# decoding: SmolLM2 on llama.cpp otherwise wrote on past max_tokens and lost the whole verdict.
COMMENT_CHARS = 300


def verdict_schema(item: ShownItem) -> dict[str, Any]:
    """The JSON schema of a verdict on ``item`` (for servers that constrain decoding to one)."""
    confidence = {"type": "number", "minimum": 0, "maximum": 1}
    properties: dict[str, Any] = {}
    if item.template in COMPARISON_TEMPLATES:
        if item.template == "webgpt_comparison":
            flags = {code: {"type": "boolean"} for code, _ in QUESTION_FLAGS}
            properties["flags"] = _object(flags)
        scale = {"type": "string", "enum": list(codes(COMPARISON_SCALE))}
        properties["ratings"] = _object({code: scale for code, _ in dimensions_for(item.template)})
    elif item.template == "ranking":
        rank = {"type": "integer", "minimum": 1, "maximum": len(item.answers)}
        properties["ranks"] = _object({answer.slot: rank for answer in item.answers})
    else:
        for field in rating_fields(item.preset):
            properties[field.code] = (
                {"type": "string", "enum": list(codes(field.choices))}
                if field.choices
                else {"type": "string"}
            )
    properties["comment"] = {"type": "string", "maxLength": COMMENT_CHARS}
    properties["confidence"] = confidence
    return _object(properties)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def example(item: ShownItem) -> dict[str, Any]:
    """A verdict of the right form, shown in the prompt: the middle code of every choice ("equal" on the
    comparison scale), so that the example leans to neither answer."""
    return _example(verdict_schema(item))


def _example(schema: dict[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][len(schema["enum"]) // 2]
    kind = schema.get("type")
    if kind == "object":
        return {name: _example(part) for name, part in schema["properties"].items()}
    return {"boolean": False, "integer": 1, "number": 0.5, "string": "..."}.get(kind, "")
