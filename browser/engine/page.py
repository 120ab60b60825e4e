"""The rendered page (what the viewport scrolls over) and quotes. Immutable and JSON-serialisable."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

LINK_MARKER = re.compile(r"【(\d+)†([^†【】]*)(?:†([^†【】]*))?】")


@dataclass(frozen=True)
class Link:
    url: str
    text: str
    domain: str


@dataclass(frozen=True)
class Page:
    """A page as the environment shows it.

    ``lines`` are the wrapped display lines with link markers; ``continues[i]`` is True when line ``i``
    continues the paragraph of line ``i - 1`` (so the page's running text can be rebuilt for Find/Quote).
    """

    url: str
    title: str  # the document's own title
    domain: str
    lines: tuple[str, ...]
    continues: tuple[bool, ...]
    links: tuple[Link, ...] = ()
    kind: str = "page"  # page | search | error | blank

    @property
    def display_title(self) -> str:
        return f"{self.title} ({self.domain})" if self.domain else self.title

    @cached_property
    def plain(self) -> str:
        """The running text with link markup reduced to the link text: what Find and Quote match."""
        return "".join(sep + line for sep, line in zip(self._separators, self.plain_lines, strict=True))

    @cached_property
    def plain_lines(self) -> tuple[str, ...]:
        return tuple(LINK_MARKER.sub(lambda m: m.group(2), line) for line in self.lines)

    @cached_property
    def line_starts(self) -> tuple[int, ...]:
        """Offset in ``plain`` where each line starts."""
        starts, offset = [], 0
        for sep, line in zip(self._separators, self.plain_lines, strict=True):
            offset += len(sep)
            starts.append(offset)
            offset += len(line)
        return tuple(starts)

    @property
    def _separators(self) -> list[str]:
        return ["" if i == 0 else (" " if cont else "\n") for i, cont in enumerate(self.continues)]

    def line_of(self, offset: int) -> int:
        """The line holding character ``offset`` of ``plain``."""
        line = 0
        for index, start in enumerate(self.line_starts):
            if start > offset:
                break
            line = index
        return line

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "title": self.title,
            "domain": self.domain,
            "lines": list(self.lines),
            "continues": list(self.continues),
            "links": [[link.url, link.text, link.domain] for link in self.links],
            "kind": self.kind,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Page:
        return cls(
            url=data["url"],
            title=data["title"],
            domain=data["domain"],
            lines=tuple(data["lines"]),
            continues=tuple(data["continues"]),
            links=tuple(Link(*link) for link in data["links"]),
            kind=data["kind"],
        )

    @cached_property
    def digest(self) -> str:
        """Content address: equal pages share one snapshot."""
        canonical = json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


BLANK_PAGE = Page(url="", title="", domain="", lines=(), continues=(), kind="blank")


@dataclass(frozen=True)
class Quote:
    title: str  # the page's own title
    url: str
    domain: str
    extract: str  # exactly as on the page (original case and spacing)

    def to_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "domain": self.domain, "extract": self.extract}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> Quote:
        return cls(**{key: data[key] for key in ("title", "url", "domain", "extract")})


@dataclass(frozen=True)
class RemovedQuote:
    """A quote a person took off the list: ``action`` is the index of the Quote action that made it,
    ``after`` the number of actions taken when it was removed (where the removal falls in the trajectory)."""

    action: int
    after: int
    quote: Quote

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "after": self.after, "quote": self.quote.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RemovedQuote:
        return cls(action=data["action"], after=data["after"], quote=Quote.from_dict(data["quote"]))
