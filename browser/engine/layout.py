"""Turn paragraphs of words and links into wrapped display lines. Link markers are never split."""

from __future__ import annotations

from dataclasses import dataclass

from browser.engine.page import Link, Page
from browser.engine.text import link_text, replace_lookalikes


@dataclass(frozen=True)
class LinkRef:
    """A link inside a paragraph, before ids are assigned."""

    url: str
    text: str
    domain: str


Segment = str | LinkRef
Paragraph = list[Segment]


def build_page(
    *, url: str, title: str, domain: str, paragraphs: list[Paragraph], width: int, kind: str = "page"
) -> Page:
    """Number the links in reading order and wrap every paragraph to ``width`` characters."""
    links: list[Link] = []
    lines: list[str] = []
    continues: list[bool] = []
    for paragraph in paragraphs:
        tokens = _tokens(paragraph, domain, links)
        wrapped = _wrap(tokens, width)
        lines.extend(wrapped)
        continues.extend([False] + [True] * (len(wrapped) - 1))
    return Page(
        url=url,
        title=" ".join(replace_lookalikes(title).split()),
        domain=domain,
        lines=tuple(lines),
        continues=tuple(continues),
        links=tuple(links),
        kind=kind,
    )


def _tokens(paragraph: Paragraph, domain: str, links: list[Link]) -> list[str]:
    """Words and link markers; pieces written without a space between them stay one token ("here.")."""
    tokens: list[str] = []
    glue = False  # the previous piece ended without whitespace
    for segment in paragraph:
        if isinstance(segment, LinkRef):
            text = " ".join(link_text(segment.text).split())
            if not text:
                continue
            marker_domain = "" if segment.domain == domain else f"†{segment.domain}"
            pieces = [f"【{len(links)}†{text}{marker_domain}】"]
            links.append(Link(url=segment.url, text=text, domain=segment.domain))
            starts_glued, glue_after = True, True
        else:
            pieces = replace_lookalikes(segment).split()
            if not pieces:
                glue = glue and not segment
                continue
            starts_glued, glue_after = not segment[0].isspace(), not segment[-1].isspace()
        if glue and starts_glued and tokens:
            tokens[-1] += pieces[0]
            pieces = pieces[1:]
        tokens.extend(pieces)
        glue = glue_after
    return tokens


def _wrap(tokens: list[str], width: int) -> list[str]:
    lines: list[str] = []
    current = ""
    for token in tokens:
        if current and len(current) + 1 + len(token) > width:
            lines.append(current)
            current = token
        else:
            current = f"{current} {token}" if current else token
    if current:
        lines.append(current)
    return lines
