"""The environment's settings. Defaults are chosen so one observation fits about 1,000 tokens.

Why these defaults: at ~4 characters per token, a window of 20 lines of at most 80 characters is at most
1,600 characters (~400 tokens) of page text; a quote budget of 1,500 characters (~375 tokens), the last 10
past actions (~100 tokens), the question and the section markers bring a full observation to ~1,000 tokens,
which leaves room in a small model's context for the answer prompt and the answer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class BrowserSettings:
    max_actions: int = 100
    max_quote_chars: int = 1500  # total over all quotes
    window_lines: int = 20
    line_width: int = 80
    search_results: int = 10
    past_actions_shown: int = 10  # the most recent, in the model's observation
    blocklist: tuple[str, ...] = field(default=("reddit.com", "quora.com"))
    censor_ngram: int = 10  # pages sharing this many consecutive words with the question/answers are censored

    def __post_init__(self) -> None:
        for name in ("max_actions", "max_quote_chars", "window_lines", "line_width", "search_results"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.line_width < 20:
            raise ValueError("line_width must be at least 20")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["blocklist"] = list(self.blocklist)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BrowserSettings:
        known = {key: value for key, value in data.items() if key in cls.__dataclass_fields__}
        if "blocklist" in known:
            known["blocklist"] = tuple(known["blocklist"])
        return cls(**known)
