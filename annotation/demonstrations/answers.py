"""Checking an answer against its quotes (pure)."""

from __future__ import annotations

import re

CITATION = re.compile(r"\[(\d+)\]")


def answer_errors(text: str, quote_count: int) -> list[str]:
    """Why an answer cannot be submitted (empty when it can): text without NUL, at least one quote, known
    citations."""
    errors = []
    if not text.strip():
        errors.append("Write an answer before submitting.")
    if "\x00" in text:  # PostgreSQL cannot store it; the page's form refuses it first, in the same words
        errors.append("The answer may not contain NUL characters (U+0000): remove them.")
    if quote_count == 0:
        errors.append("Answering needs at least one quote: go back to browsing and quote a source.")
    unknown = sorted({int(n) for n in CITATION.findall(text) if not 1 <= int(n) <= quote_count})
    if unknown and quote_count:
        cited = ", ".join(f"[{n}]" for n in unknown)
        errors.append(f"Unknown citation {cited}: your quotes are numbered [1] to [{quote_count}].")
    elif unknown:
        errors.append(f"Unknown citation {', '.join(f'[{n}]' for n in unknown)}: you have no quotes.")
    return errors
