"""The ``local`` search backend: BM25 over a tantivy index on disk, built from corpus records.

One searchable field holds title + visible body text. With title and body as separate fields, rare title
words dominated the ranking and the source page came back far less often (see ENGINEERING.md), so the
title is searched as part of the text and stored separately only for display. Stored-only values
(title, content, body) are bytes fields because tantivy text fields are always indexed. The body of an
HTML page is its visible text less bare-URL links (reference lists), which would otherwise outrank prose.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import tantivy

from browser.corpus.html_text import html_to_text
from browser.corpus.records import CorpusRecord
from browser.engine.backend import Document, PageNotFound, SearchResult
from browser.search.query import (
    SEARCH_FIELD,
    TOKENIZER,
    build_query,
    make_analyzer,
    make_word_analyzer,
    parse_query,
)
from browser.search.snippets import SNIPPET_CHARS, make_snippet

SCHEMA_VERSION = 1
MAX_TIED_HITS = 1000  # how far to look past k for hits that tie the k-th score
# tantivy's indexing memory budget (shared by its threads): past it, segments are flushed to disk
WRITER_HEAP_BYTES = 256_000_000
_MARKER = "webgpt-local-index.json"


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True, tokenizer_name="raw")  # exact lookup and upsert key
    builder.add_text_field("content_type", stored=True, tokenizer_name="raw")
    builder.add_bytes_field("title", stored=True)
    builder.add_bytes_field("content", stored=True)
    builder.add_bytes_field("body", stored=True)  # visible text of HTML pages, for snippets
    builder.add_text_field(SEARCH_FIELD, stored=False, tokenizer_name=TOKENIZER)
    return builder.build()


def url_variants(url: str) -> list[str]:
    """``url``, then without its #fragment, then each with the trailing slash of the path toggled."""
    bases = [url]
    if "#" in url:
        bases.append(url.partition("#")[0])
    variants = list(bases)
    for base in bases:
        path, sep, query = base.partition("?")
        if path.endswith("/"):
            toggled = path[:-1]
            if toggled.endswith((":", ":/")):  # "https:/" is no URL
                continue
        else:
            toggled = path + "/"
        variants.append(toggled + sep + query)
    return list(dict.fromkeys(variants))


class LocalIndex:
    """A corpus index in one directory. Safe to search from many processes; one writer at a time."""

    name = "local"

    def __init__(self, index: tantivy.Index, path: Path) -> None:
        self._index = index
        self._schema = index.schema
        self._analyzer = make_analyzer()
        self._word_analyzer = make_word_analyzer()
        self.path = path

    @classmethod
    def open(cls, path: str | Path) -> LocalIndex:
        """Open the index in ``path``, creating the directory and an empty index when there is none."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        marker = path / _MARKER
        if tantivy.Index.exists(str(path)):
            version = json.loads(marker.read_text()).get("schema") if marker.exists() else None
            if version != SCHEMA_VERSION:
                raise ValueError(f"{path}: index schema {version} is not {SCHEMA_VERSION}; rebuild the index")
            index = tantivy.Index.open(str(path))
        else:
            index = tantivy.Index(_schema(), path=str(path))
            marker.write_text(json.dumps({"schema": SCHEMA_VERSION}))
        return cls(index, path)

    def _document(self, record: CorpusRecord) -> tantivy.Document:
        if not all(isinstance(v, str) for v in (record.url, record.title, record.content)):
            raise TypeError(f"record {record.url!r}: url, title and content must be strings")
        body = record.content
        if record.content_type == "text/html":
            body = html_to_text(record.content, drop_bare_links=True)
        doc = tantivy.Document()
        doc.add_text("url", record.url)
        doc.add_text("content_type", record.content_type)
        doc.add_bytes("title", record.title.encode("utf-8"))
        doc.add_bytes("content", record.content.encode("utf-8"))
        if record.content_type == "text/html":
            doc.add_bytes("body", body.encode("utf-8"))
        doc.add_text(SEARCH_FIELD, f"{record.title}\n{body}")
        return doc

    def add(
        self,
        records: Iterable[CorpusRecord],
        heap_size: int = WRITER_HEAP_BYTES,
        on_record: Callable[[int], None] = lambda count: None,
        *,
        urls_unique: bool = False,
    ) -> int:
        """Add or replace (by URL) ``records`` in one commit; on any error nothing changes.

        ``records`` may be an iterator of any length: each is handed to tantivy's writer as it comes, and
        the writer flushes uncommitted segments to disk whenever its ``heap_size`` budget fills. A page is
        replaced when its URL is already in the index or came earlier in ``records``; only those URLs get a
        delete, because tantivy keeps every pending delete in memory until the commit (a delete per record
        made a 1,000,000-page import peak at 1.5 GB of its own memory instead of a few hundred MB).
        ``urls_unique``: the caller guarantees no URL repeats within ``records`` (the corpus readers refuse
        duplicates), so the URLs seen need not be remembered either. Tantivy discards uncommitted segments
        on rollback, so a failure halfway through a large import (the reader raising on a bad record)
        leaves the previous index intact. Returns the number of records written; ``on_record`` hears the
        count after each one is added."""
        committed = self._searcher()  # the index as it was: which URLs a record replaces
        seen: set[str] = set()
        writer = self._index.writer(heap_size=heap_size)
        count = 0
        try:
            for record in records:
                if committed.doc_freq("url", record.url) or record.url in seen:
                    writer.delete_documents_by_term("url", record.url)
                if not urls_unique:
                    seen.add(record.url)
                writer.add_document(self._document(record))
                count += 1
                on_record(count)
            if count:
                writer.commit()
        except BaseException:
            writer.rollback()
            raise
        finally:
            writer.wait_merging_threads()  # also releases the writer lock
        self._index.reload()
        return count

    def _searcher(self) -> tantivy.Searcher:
        """A searcher on the latest commit, also one made by another process (e.g. a worker's import):
        tantivy would notice it only after about half a second; reloading costs ~25 us."""
        self._index.reload()
        return self._index.searcher()

    def count(self) -> int:
        """How many documents the index serves."""
        return self._searcher().num_docs

    def _top_hits(
        self, searcher: tantivy.Searcher, query: tantivy.Query, k: int
    ) -> list[tuple[float, str, tantivy.Document]]:
        """The top ``k`` (score, url, stored document) triples, ties broken by URL so that results never
        depend on how the index happens to be segmented: hits tying the k-th score are all fetched first."""
        limit = k + 1
        while True:
            hits = searcher.search(query, limit, count=False).hits
            if len(hits) <= k or hits[-1][0] < hits[k - 1][0] or limit >= MAX_TIED_HITS:
                break
            limit = min(limit * 4, MAX_TIED_HITS)
        boundary = hits[k - 1][0] if len(hits) >= k else float("-inf")
        kept = [(s, a) for s, a in hits[:k] if s > boundary] + [(s, a) for s, a in hits if s == boundary]
        docs = [(s, searcher.doc(a)) for s, a in kept]
        scored = [(s, d.get_first("url"), d) for s, d in docs]
        return sorted(scored, key=lambda h: (-h[0], h[1]))[:k]

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        """The top ``k`` pages for ``query`` by BM25, with plain-text snippets; never raises on query text."""
        parsed = parse_query(query, self._analyzer)
        if k <= 0 or parsed.is_empty():
            return []
        tantivy_query = build_query(parsed, self._schema)
        stems = [t for phrase in parsed.required for t in phrase] + list(parsed.optional)
        tokens = stems + self._word_analyzer.analyze(query.encode("utf-8", "replace").decode("utf-8"))
        searcher = self._searcher()
        generator = tantivy.SnippetGenerator.create(searcher, tantivy_query, self._schema, SEARCH_FIELD)
        generator.set_max_num_chars(SNIPPET_CHARS)
        results = []
        for _, url, doc in self._top_hits(searcher, tantivy_query, k):
            body = (doc.get_first("body") or doc.get_first("content") or b"").decode("utf-8")
            title = doc.get_first("title").decode("utf-8")
            snippet = make_snippet(generator, body, tokens, title=title)
            results.append(SearchResult(url=url, title=title, snippet=snippet))
        return results

    def _lookup(self, searcher: tantivy.Searcher, url: str) -> tantivy.Document | None:
        query = tantivy.Query.term_query(self._schema, "url", url)
        hits = searcher.search(query, 1, count=False).hits
        return searcher.doc(hits[0][1]) if hits else None

    def fetch(self, url: str) -> Document:
        """The stored page at ``url`` (also tried without #fragment and with the trailing slash toggled)."""
        searcher = self._searcher()
        for candidate in url_variants(url):
            doc = self._lookup(searcher, candidate)
            if doc is not None:
                return Document(
                    url=candidate,
                    content_type=doc.get_first("content_type"),
                    content=doc.get_first("content").decode("utf-8"),
                    title=doc.get_first("title").decode("utf-8"),
                )
        raise PageNotFound(url)
