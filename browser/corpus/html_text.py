"""Visible text and title of an HTML page, for indexing and for naming pages.

The search index must match what a reader sees, not markup: attribute values, scripts and styles would
otherwise make pages match words they do not show. Block elements become line breaks so that words from
adjacent paragraphs are never glued together.
"""

from __future__ import annotations

import re

from lxml import etree
from lxml import html as lxml_html

_INVISIBLE = frozenset({"script", "style", "noscript", "template", "head", "title", "svg", "math"})
_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "div", "dl",
        "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "td",
        "th", "tr", "ul",
    }
)  # fmt: skip
_SPACES = re.compile(r"[^\S\n]+")


def _parse(html: str) -> etree._Element | None:
    """The document tree, or None for a document with no content. Bytes avoid lxml's refusal of
    str input that carries an XML encoding declaration."""
    parser = lxml_html.HTMLParser(encoding="utf-8", huge_tree=True)
    try:
        return lxml_html.document_fromstring(html.encode("utf-8", "surrogatepass"), parser=parser)
    except (etree.ParserError, ValueError):
        return None


def collapse_spaces(text: str) -> str:
    """All runs of whitespace (newlines included) as one space, trimmed."""
    return " ".join(text.split())


def html_title(html: str) -> str:
    """The text of the page's <title>, whitespace collapsed; "" when there is none."""
    root = _parse(html)
    if root is None:
        return ""
    title = root.find(".//title")
    return collapse_spaces(title.text_content()) if title is not None else ""


def html_to_text(html: str, drop_bare_links: bool = False) -> str:
    """The visible text of ``html``: one line per block element, spaces collapsed, no blank lines.

    ``drop_bare_links`` leaves out links whose text is their own http(s) address (reference lists):
    for search, such URLs are noise that outranks prose and crowds snippets."""
    root = _parse(html)
    if root is None:
        return ""
    if drop_bare_links:
        for a in root.iter("a"):
            text = a.text_content().strip()
            if text.startswith(("http://", "https://")) and text == (a.get("href") or "").strip():
                a.drop_tree()  # keeps the tail text
    # Removing (not skipping) keeps the text that follows a comment or a script.
    etree.strip_elements(root, *_INVISIBLE, etree.Comment, etree.ProcessingInstruction, with_tail=False)
    pieces: list[str] = []
    for event, el in etree.iterwalk(root, events=("start", "end")):
        if event == "start":
            if el.tag in _BLOCK:
                pieces.append("\n")
            if el.text:
                pieces.append(el.text)
        else:
            if el.tag in _BLOCK or el.tag == "br":
                pieces.append("\n")
            if el.tail and el is not root:
                pieces.append(el.tail)
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(pieces).split("\n"))
    return "\n".join(line for line in lines if line)
