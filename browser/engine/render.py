"""Documents to pages: HTML (main content + our markers), plain text, PDF, search results, errors.

Main-content extraction uses readability-lxml (Apache-2.0); the text rendering (links, ^/_ for
superscript/subscript, image markers) is ours, so every page follows the same rules whatever its source.
"""

from __future__ import annotations

import io
import logging
from urllib.parse import urljoin, urlsplit

import lxml.html
from lxml import etree

from browser.engine.backend import Document, SearchResult
from browser.engine.layout import LinkRef, Paragraph, build_page
from browser.engine.page import Page
from browser.engine.settings import BrowserSettings
from browser.engine.text import collapse_spaces, domain_of, is_blocked

logger = logging.getLogger(__name__)

_SKIP = {
    "script",
    "style",
    "noscript",
    "template",
    "head",
    "svg",
    "math",
    "iframe",
    "object",
    "form",
    "button",
    "select",
    "input",
    "textarea",
    "nav",
}
_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "tr",
    "table",
    "thead",
    "tbody",
    "blockquote",
    "pre",
    "figure",
    "figcaption",
    "hr",
    "br",
    "caption",
    "details",
    "summary",
    "address",
    "center",
}
MAX_PAGE_LINES = 5000  # a pathological page is cut here rather than exhausting memory


def render_document(document: Document, settings: BrowserSettings) -> Page:
    content_type = document.content_type.split(";")[0].strip().lower()
    if content_type in {"text/html", "application/xhtml+xml"}:
        return render_html(_as_text(document.content), document.url, settings, fallback_title=document.title)
    if content_type == "text/plain":
        return render_text(_as_text(document.content), document.url, document.title, settings)
    if content_type == "application/pdf":
        return render_pdf(document, settings)
    return error_page(
        document.url, f"This page cannot be shown: content of type {content_type or 'unknown'}.", settings
    )


def render_html(html: str, url: str, settings: BrowserSettings, fallback_title: str = "") -> Page:
    domain = domain_of(url)
    try:
        title, body = _main_content(html)
    except (etree.ParserError, ValueError) as exc:
        logger.info("unparseable HTML at %s: %s", url, exc)
        return error_page(url, "This page could not be read.", settings)
    paragraphs = _Walker(url, settings.blocklist).paragraphs(body)
    return build_page(
        url=url,
        title=title or fallback_title or url,
        domain=domain,
        paragraphs=paragraphs[:MAX_PAGE_LINES],
        width=settings.line_width,
    )


def render_text(text: str, url: str, title: str, settings: BrowserSettings) -> Page:
    paragraphs: list[Paragraph] = [
        [block] for block in text.replace("\r\n", "\n").split("\n\n") if block.strip()
    ]
    return build_page(
        url=url,
        title=title or _last_path_part(url),
        domain=domain_of(url),
        paragraphs=paragraphs[:MAX_PAGE_LINES],
        width=settings.line_width,
    )


def render_pdf(document: Document, settings: BrowserSettings) -> Page:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    data = document.content if isinstance(document.content, bytes) else document.content.encode("latin-1")
    try:
        reader = PdfReader(io.BytesIO(data))
        text = "\n\n".join(page.extract_text() or "" for page in reader.pages)
        title = (reader.metadata.title if reader.metadata else None) or document.title
    except (PdfReadError, ValueError, KeyError, OSError) as exc:
        logger.info("unreadable PDF at %s: %s", document.url, exc)
        return error_page(document.url, "This PDF could not be read.", settings)
    return render_text(text, document.url, title or "", settings)


def render_search_results(query: str, results: list[SearchResult], settings: BrowserSettings) -> Page:
    paragraphs: list[Paragraph] = []
    for result in results:
        domain = domain_of(result.url)
        if is_blocked(domain, settings.blocklist):
            continue
        paragraphs.append([LinkRef(url=result.url, text=result.title or result.url, domain=domain)])
        if result.snippet.strip():
            paragraphs.append([result.snippet])
    if not paragraphs:
        paragraphs = [["No results."]]
    return build_page(
        url="",
        title=f"Search results for: {collapse_spaces(query)}",
        domain="",
        paragraphs=paragraphs,
        width=settings.line_width,
        kind="search",
    )


def error_page(url: str, message: str, settings: BrowserSettings, title: str = "Error") -> Page:
    return build_page(
        url=url,
        title=title,
        domain=domain_of(url),
        paragraphs=[[message]],
        width=settings.line_width,
        kind="error",
    )


def _as_text(content: str | bytes) -> str:
    return content if isinstance(content, str) else content.decode("utf-8", errors="replace")


def _last_path_part(url: str) -> str:
    path = urlsplit(url).path.rstrip("/")
    return path.rsplit("/", 1)[-1] or url


def _main_content(html: str) -> tuple[str, lxml.html.HtmlElement]:
    """The page's title and the element holding its main content.

    A page that marks its main content (one ``<main>``, or a single ``<article>``) is taken at its word:
    that is deterministic and keeps link lists such as references, which readability's link-density
    heuristic would drop. Other pages go through readability, and its result is used when it kept text.
    """
    if not html.strip():
        raise ValueError("empty document")
    document = lxml.html.document_fromstring(html)
    title = collapse_spaces(document.findtext(".//title") or "")
    marked = document.findall(".//main") or document.findall(".//article")
    if len(marked) == 1 and collapse_spaces(marked[0].text_content()):
        return title, marked[0]
    from readability import Document as Readable

    summary = Readable(html).summary(html_partial=True)
    body = lxml.html.fragment_fromstring(summary, create_parent="div") if summary.strip() else None
    if body is None or not collapse_spaces(body.text_content()):
        body = document.body
    return title, body


class _Walker:
    """Depth-first walk that emits paragraphs of text and links."""

    def __init__(self, base_url: str, blocklist: tuple[str, ...]) -> None:
        self.base_url = base_url
        self.blocklist = blocklist
        self.out: list[Paragraph] = []
        self.current: Paragraph = []

    def paragraphs(self, root: lxml.html.HtmlElement) -> list[Paragraph]:
        self._visit(root)
        self._break()
        return self.out

    def _break(self) -> None:
        if any(isinstance(s, LinkRef) or s.strip() for s in self.current):
            self.out.append(self.current)
        self.current = []

    def _visit(self, element: lxml.html.HtmlElement) -> None:
        tag = element.tag if isinstance(element.tag, str) else ""
        tag = tag.lower()
        if tag in _SKIP or not isinstance(element.tag, str):
            self._tail(element)
            return
        if tag in _BLOCKS:
            self._break()
        if tag == "li":
            self.current.append("* ")
        if tag == "img":
            alt = collapse_spaces(element.get("alt") or "")
            self.current.append(f" [Image: {alt}] " if alt else " [Image] ")
        elif tag == "a" and (target := self._target(element)) is not None:
            self.current.append(
                LinkRef(url=target, text=self._inline_text(element), domain=domain_of(target))
            )
            self._tail(element)
            return
        elif tag in {"sup", "sub"}:
            self.current.append(("^" if tag == "sup" else "_") + collapse_spaces(element.text_content()))
            self._tail(element)
            return
        if element.text:
            self.current.append(element.text)
        for child in element:
            self._visit(child)
        if tag in _BLOCKS:
            self._break()
        self._tail(element)

    def _tail(self, element: lxml.html.HtmlElement) -> None:
        if element.tail:
            self.current.append(element.tail)

    def _target(self, anchor: lxml.html.HtmlElement) -> str | None:
        """An absolute http(s) URL to another page, not a blocked domain; else None (shown as text)."""
        href = (anchor.get("href") or "").strip()
        if not href or href.startswith("#"):
            return None
        try:
            target = urljoin(self.base_url, href)
            parts = urlsplit(target)
        except ValueError:
            return None
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            return None
        if is_blocked(parts.hostname.lower(), self.blocklist):
            return None
        return target.split("#", 1)[0] if parts.fragment else target

    def _inline_text(self, element: lxml.html.HtmlElement) -> str:
        """A link's text, with images inside it rendered as image markers."""
        return collapse_spaces(_inline(element))


def _inline(element: lxml.html.HtmlElement) -> str:
    out = element.text or ""
    for child in element:
        tag = child.tag.lower() if isinstance(child.tag, str) else ""
        if tag == "img":
            alt = collapse_spaces(child.get("alt") or "")
            out += f" [Image: {alt}] " if alt else " [Image] "
        elif tag in {"sup", "sub"}:
            out += ("^" if tag == "sup" else "_") + collapse_spaces(_inline(child))
        elif tag not in _SKIP:
            out += _inline(child)
        out += child.tail or ""
    return out
