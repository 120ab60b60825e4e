"""User query text -> a tantivy query, without ever raising on what a person types.

We do not hand user text to tantivy's query language: there "title:x", "AND", "-x", "(" and "*" mean
something, and a stray quote or colon is a syntax error (``parse_query_lenient`` survives those but
silently drops a term such as "c++:" whose "field" does not exist). Instead the text is cut with the same
analyzer the index uses (tantivy's ``en_stem``: split on non-alphanumerics, drop tokens over 40 bytes,
lowercase, English stemmer) and the query is built from term and phrase queries:

- words in "double quotes" are a phrase (an unterminated quote runs to the end); every quoted part must
  match, and the other words then only improve the ranking;
- with no quotes, any word may match (OR), ranked by BM25, as in the WebGPT paper's search engine.
Everything else (operators, punctuation) is just a separator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tantivy

SEARCH_FIELD = "text"
TOKENIZER = "en_stem"
MAX_CLAUSES = 32  # bounds the work one (possibly pasted) query can cause
_QUOTED = re.compile(r'"([^"]*)"?')


def make_analyzer() -> tantivy.TextAnalyzer:
    """The query-side twin of tantivy's built-in ``en_stem`` tokenizer used by the search field."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def make_word_analyzer() -> tantivy.TextAnalyzer:
    """The same cuts without stemming: the words as typed, lowercased (for locating snippets)."""
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.lowercase()).build()


@dataclass(frozen=True)
class ParsedQuery:
    required: tuple[tuple[str, ...], ...]  # quoted parts as analysed tokens (a phrase when 2+)
    optional: tuple[str, ...]  # analysed unquoted words

    def is_empty(self) -> bool:
        return not self.required and not self.optional


def parse_query(text: str, analyzer: tantivy.TextAnalyzer) -> ParsedQuery:
    """Split ``text`` into quoted parts and loose words, tokenised exactly as the index was."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot cross into Rust
    required: dict[tuple[str, ...], None] = {}
    loose: list[str] = []
    pos = 0
    for m in _QUOTED.finditer(text):
        loose.append(text[pos : m.start()])
        pos = m.end()
        tokens = tuple(analyzer.analyze(m.group(1)))
        if tokens:
            required[tokens] = None
    loose.append(text[pos:])
    optional = dict.fromkeys(t for part in loose for t in analyzer.analyze(part))
    req = list(required)[:MAX_CLAUSES]
    opt = [t for t in optional if (t,) not in required][: MAX_CLAUSES - len(req)]
    return ParsedQuery(tuple(req), tuple(opt))


def build_query(parsed: ParsedQuery, schema: tantivy.Schema) -> tantivy.Query:
    """Required parts as Must clauses, loose words as Should clauses (OR when nothing is required)."""

    def clause(tokens: tuple[str, ...]) -> tantivy.Query:
        if len(tokens) == 1:
            return tantivy.Query.term_query(schema, SEARCH_FIELD, tokens[0])
        return tantivy.Query.phrase_query(schema, SEARCH_FIELD, list(tokens))

    clauses = [(tantivy.Occur.Must, clause(t)) for t in parsed.required]
    clauses += [(tantivy.Occur.Should, clause((t,))) for t in parsed.optional]
    return tantivy.Query.boolean_query(clauses)
