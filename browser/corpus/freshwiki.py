"""FreshWiki (Wikipedia articles as JSON, CC BY-SA) -> one HTML page per article.

The JSON keeps each sentence with the URLs it cites but no footnote markers, and no paragraph breaks
inside a section. We render what a Wikipedia reader expects: a title, the lead, headed sections, a
footnote marker "[n]" after each cited sentence, and a References list of numbered outbound links. Notes:

- References are numbered in order of first citation (as Wikipedia does), deduplicated by URL; sources
  cited nowhere follow. Placeholders such as "[ERROR retrieving ref link]" are dropped; non-URL sources
  (e.g. "ISBN: ...") are listed as plain text.
- Sections with no text anywhere below them (usually "See also", "External links", whose lists the
  dataset did not keep) are left out rather than shown as empty headings.
- The first mention of another corpus article's exact title becomes a link to it (case-sensitive, whole
  words; cheap and unambiguous because titles are unique article names).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from browser.corpus.records import (
    MAX_FILE_BYTES,
    CorpusFileError,
    CorpusRecord,
    LinkFreeFolder,
    is_http_url,
)

_ATTRIBUTION = "From Wikipedia, the free encyclopedia (CC BY-SA 4.0), via the FreshWiki dataset."


class _Invalid(Exception):
    """A structural problem inside one JSON file; the caller adds the file name."""


@dataclass
class _Section:
    title: str
    sentences: list[tuple[str, list[str]]]
    subsections: list[_Section]

    def has_text(self) -> bool:
        return bool(self.sentences) or any(s.has_text() for s in self.subsections)


@dataclass
class _Article:
    title: str
    url: str
    summary: str
    sections: list[_Section]
    references: list[str]  # in the file's numbering order


def _get(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise _Invalid(f"{where}missing '{key}'")
    value = obj[key]
    if not isinstance(value, kind):
        raise _Invalid(f"{where}'{key}' must be a {kind.__name__}, not {type(value).__name__}")
    return value


def _section(obj: Any, where: str) -> _Section:
    if not isinstance(obj, dict):
        raise _Invalid(f"{where}: a section must be an object")
    title = _get(obj, "section_title", str, f"{where}: ")
    sentences = []
    for i, row in enumerate(_get(obj, "section_content", list, f"{where}: ")):
        at = f"{where}.section_content[{i}]: "
        if not isinstance(row, dict):
            raise _Invalid(f"{at}a sentence must be an object")
        refs = _get(row, "refs", list, at)
        if not all(isinstance(r, str) for r in refs):
            raise _Invalid(f"{at}'refs' must be a list of strings")
        sentences.append((_get(row, "sentence", str, at), refs))
    subs = _get(obj, "subsections", list, f"{where}: ")
    return _Section(title, sentences, [_section(s, f"{where}.subsections[{i}]") for i, s in enumerate(subs)])


def _article(obj: Any) -> _Article:
    if not isinstance(obj, dict):
        raise _Invalid("expected a JSON object")
    title = " ".join(_get(obj, "title", str, "").replace("_", " ").split())
    if not title:
        raise _Invalid("'title' is empty")
    url = _get(obj, "url", str, "")
    if not is_http_url(url):
        raise _Invalid(f"'url' must be an absolute http(s) URL: {url!r}")
    refs = _get(obj, "references", dict, "")
    if not all(isinstance(v, str) for v in refs.values()):
        raise _Invalid("'references' values must be strings")
    ordered = sorted(refs.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0))
    sections = [_section(s, f"content[{i}]") for i, s in enumerate(_get(obj, "content", list, ""))]
    return _Article(title, url, _get(obj, "summary", str, ""), sections, [v for _, v in ordered])


def _load(path: Path, data: bytes) -> _Article:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CorpusFileError(str(path), data.count(b"\n", 0, e.start) + 1, "not valid UTF-8") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise CorpusFileError(str(path), e.lineno, f"invalid JSON ({e.msg} at column {e.colno})") from None
    try:
        return _article(obj)
    except _Invalid as e:
        raise CorpusFileError(str(path), 0, str(e)) from None


def _is_source(ref: str) -> bool:
    return bool(ref.strip()) and not ref.startswith("[ERROR")


@dataclass
class _Page:
    """Rendering state for one article: footnote numbers and the articles already linked."""

    article: _Article
    linker: re.Pattern[str] | None
    urls_by_title: dict[str, str]
    numbers: dict[str, int] = field(default_factory=dict)
    linked: set[str] = field(default_factory=set)

    def cite(self, ref: str) -> int | None:
        if not _is_source(ref):
            return None
        return self.numbers.setdefault(ref, len(self.numbers) + 1)

    def text(self, text: str) -> str:
        """Escaped ``text`` with the first mention of each other article linked."""
        if self.linker is None:
            return escape(text)
        out, pos = [], 0
        for m in self.linker.finditer(text):
            title = m.group(0)
            if title == self.article.title or title in self.linked:
                continue
            self.linked.add(title)
            href = escape(self.urls_by_title[title])
            out.append(f'{escape(text[pos : m.start()])}<a href="{href}">{escape(title)}</a>')
            pos = m.end()
        out.append(escape(text[pos:]))
        return "".join(out)

    def sentence(self, sentence: str, refs: list[str]) -> str:
        sentence = sentence.strip()
        if sentence and not sentence.endswith((".", "!", "?", "…", ":", ";")):
            sentence += "."
        numbers = dict.fromkeys(n for n in map(self.cite, refs) if n is not None)
        marks = "".join(f"[{n}]" for n in numbers)
        return self.text(sentence) + (f"<sup>{marks}</sup>" if marks else "")

    def section(self, section: _Section, depth: int) -> list[str]:
        if not section.has_text():
            return []
        h = min(depth + 2, 6)
        parts = [f"<h{h}>{self.text(section.title)}</h{h}>"]
        if section.sentences:
            parts.append("<p>" + " ".join(self.sentence(s, r) for s, r in section.sentences) + "</p>")
        for sub in section.subsections:
            parts.extend(self.section(sub, depth + 1))
        return parts

    def render(self) -> str:
        a = self.article
        title = escape(a.title)
        parts = [
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>',
            # <main> marks the article as the page's main content, so the renderer keeps the references.
            f"<body><main>\n<h1>{title}</h1>",
        ]
        parts += [f"<p>{self.text(p.strip())}</p>" for p in a.summary.split("\n") if p.strip()]
        for section in a.sections:
            parts += self.section(section, 0)
        for ref in a.references:  # sources no sentence cites still belong in the list
            self.cite(ref)
        if self.numbers:
            parts.append("<h2>References</h2>\n<ul>")
            for ref, n in self.numbers.items():
                shown = f'<a href="{escape(ref)}">{escape(ref)}</a>' if is_http_url(ref) else escape(ref)
                parts.append(f"<li>[{n}] {shown}</li>")
            parts.append("</ul>")
        parts.append(f"<p><i>{escape(_ATTRIBUTION)}</i></p>\n</main></body></html>\n")
        return "\n".join(parts)


def read_freshwiki(path: str | Path, max_file_bytes: int = MAX_FILE_BYTES) -> list[CorpusRecord]:
    """One HTML record per ``*.json`` article in the folder ``path`` (sorted by file name). An article
    file that is a symbolic link (wherever it points) or larger than ``max_file_bytes`` is refused."""
    folder = Path(path)
    files = sorted(folder.glob("*.json"))
    if not files:
        raise CorpusFileError(str(folder), 0, "no .json files in this folder")
    with LinkFreeFolder(folder) as opened:
        articles = [_load(f, opened.read(f, max_file_bytes)) for f in files]
    first_file: dict[str, Path] = {}
    for f, a in zip(files, articles, strict=True):
        if a.url in first_file:
            raise CorpusFileError(str(f), 0, f"url {a.url} already appears in {first_file[a.url].name}")
        first_file[a.url] = f
    urls_by_title = {a.title: a.url for a in articles}
    linker = None
    if len(urls_by_title) > 1:
        alternatives = "|".join(re.escape(t) for t in sorted(urls_by_title, key=len, reverse=True))
        linker = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")
    return [
        CorpusRecord(a.url, a.title, _Page(a, linker, urls_by_title).render(), "text/html") for a in articles
    ]
