"""Question identity and split assignment: pure functions, no Django.

A question's identity is its normalised text, so the same question imported twice (or from two
datasets) is one question, and it can never land in two splits. The split is drawn from a hash of that
identity, so it is deterministic: re-importing, importing in another order or on another machine gives
every question the same split for the same ratios.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping

_SPACES = re.compile(r"\s+")
_INTERROGATIVES = frozenset(
    [
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "why",
        "how",
        "which",
        "is",
        "are",
        "was",
        "were",
        "am",
        "do",
        "does",
        "did",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "has",
        "have",
        "had",
    ]
)


def normalize_question(text: str) -> str:
    """Case-folded, NFKC, single-spaced text without trailing sentence punctuation."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACES.sub(" ", folded).strip().rstrip("?.! ").strip()


def question_key(text: str) -> str:
    """A stable hex digest of the normalised text: the bank's uniqueness key."""
    return hashlib.sha256(normalize_question(text).encode("utf-8")).hexdigest()


def assign_split(key: str, ratios: Mapping[str, float]) -> str:
    """The split for a question key: a uniform draw from the key's hash, bucketed by cumulative ratio.

    ``ratios`` maps split names to non-negative weights summing to 1; its order fixes the buckets.
    """
    draw = int(hashlib.sha256(f"split:{key}".encode()).hexdigest()[:15], 16) / 16**15
    cumulative = 0.0
    names = [name for name, ratio in ratios.items() if ratio > 0]
    for name in names:
        cumulative += ratios[name]
        if draw < cumulative:
            return name
    return names[-1]  # float rounding at the top end


def is_phrased_as_question(text: str) -> bool:
    stripped = text.strip()
    if stripped.endswith("?"):
        return True
    first_word = stripped.split(maxsplit=1)[0].casefold() if stripped else ""
    return first_word.strip(",:;") in _INTERROGATIVES


def with_explain_prefix(text: str) -> str:
    """ELI5-style statements become requests (WebGPT, Appendix B): "Explain: <statement>"."""
    stripped = text.strip()
    if is_phrased_as_question(stripped) or stripped.casefold().startswith("explain:"):
        return stripped
    return f"Explain: {stripped}"
