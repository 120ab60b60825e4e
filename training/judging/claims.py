"""Claim checks: a language model's second opinion on each claim annotation of a labeler's WebGPT comparison
(Search Arena found votes follow the number of citations even where the citations do not support the
claims). The judge is shown the claim's span and the quotes the labeler linked to it, and answers whether
they support it: supported, weakly or unsupported (``ClaimSupport``). Its prompt is versioned like the
judging prompts; the raw output is kept, and an unreadable one is stored with its error."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.feedback.scales import COMPARISON_SLOTS
from annotation.models.judging import ClaimSupport
from training.judging.outputs import find_json
from training.sampling.types import Message

CLAIM_CHECK_V1 = "claim-check-v1"
CLAIM_ROLE_V1 = (
    "You check whether a claim made in an answer is supported by the quoted evidence linked to it. "
    "supported: the quotes state it or directly imply it. weakly: the quotes make it plausible but do not "
    "establish it. unsupported: the quotes do not back it (or no quote is linked). Judge only from the "
    "quotes."
)
CLAIM_REPLY_V1 = (
    'Reply with one JSON object and nothing else: {"support": "supported" | "weakly" | "unsupported"}'
)
SUPPORT_SCHEMA = {
    "type": "object",
    "properties": {"support": {"type": "string", "enum": list(ClaimSupport.values)}},
    "required": ["support"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Claim:
    """One claim annotation: where it is in a labeler's response, its span and its linked quotes."""

    assignment_id: int
    slot: str
    index: int
    question: str
    span: str
    quotes: tuple[Mapping[str, Any], ...]


def claims_of(
    assignment_id: int, question: str, response: Any, answers: Sequence[tuple[str, Sequence[Any]]]
) -> Iterator[Claim]:
    """The claims of one submitted response; ``answers``: (text, quotes) of each slot in the labeler's
    order. A claim whose span or quotes do not fit its answer (an answer edited since) is left out."""
    marked = response.get("answers") if isinstance(response, Mapping) else None
    for slot, (text, quotes) in zip(COMPARISON_SLOTS, answers, strict=False):
        part = marked.get(slot) if isinstance(marked, Mapping) else None
        claims = part.get("claims") if isinstance(part, Mapping) else None
        for index, claim in enumerate(claims if isinstance(claims, list) else ()):
            start, end = (
                (claim.get("start"), claim.get("end")) if isinstance(claim, Mapping) else (None, None)
            )
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
                continue
            linked = [i for i in claim.get("quotes") or () if isinstance(i, int) and 0 <= i < len(quotes)]
            yield Claim(
                assignment_id, slot, index, question, text[start:end], tuple(quotes[i] for i in linked)
            )


def claim_messages(claim: Claim) -> tuple[Message, ...]:
    evidence = "\n".join(
        f"[{number}] {quote.get('title') or ''}\n{quote.get('extract') or '(no quoted extract)'}"
        for number, quote in enumerate(claim.quotes, start=1)
    )
    user = (
        f"Question: {claim.question}\n\nClaim: {claim.span}\n\n"
        f"Linked quotes:\n{evidence or '(no quote is linked to this claim)'}"
    )
    return (Message("system", f"{CLAIM_ROLE_V1}\n\n{CLAIM_REPLY_V1}"), Message("user", user))


def read_support(text: str) -> tuple[str, str]:
    """The support level and "", or "" and why the output could not be read as one."""
    value, problem = find_json(text)
    if problem:
        return "", problem
    support = value.get("support") if isinstance(value, Mapping) else None
    if support not in ClaimSupport.values:
        given = json.dumps(support)[:60]
        return "", f"support must be one of {', '.join(ClaimSupport.values)}, not {given}"
    return support, ""
