"""An in-memory search backend for engine unit tests: a stand-in for the *external* corpus, not for our
engine. Integration tests use the real tantivy index."""

from __future__ import annotations

import re

from browser.engine.backend import Document, FetchError, PageNotFound, SearchResult


class MemoryBackend:
    name = "memory"

    def __init__(self, documents: dict[str, tuple[str, str]], content_type: str = "text/html") -> None:
        self.documents = documents  # url -> (title, body HTML)
        self.content_type = content_type
        self.failing: set[str] = set()

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        terms = query.lower().split()
        hits = [
            SearchResult(url, title, re.sub(r"<[^>]+>", "", body)[:120])
            for url, (title, body) in sorted(self.documents.items())
            if any(term in (title + " " + body).lower() for term in terms)
        ]
        return hits[:k]

    def fetch(self, url: str) -> Document:
        if url in self.failing:
            raise FetchError("connection reset")
        if url not in self.documents:
            raise PageNotFound(url)
        title, body = self.documents[url]
        html = f"<html><head><title>{title}</title></head><body><article>{body}</article></body></html>"
        return Document(url, self.content_type, html)


POLLEN = "https://en.wikipedia.org/wiki/Pollen"
ALLERGY = "https://en.wikipedia.org/wiki/Allergy"
BEES = "https://bees.example.org/pollen"

PARAGRAPH = (
    "Pollen is a powdery substance produced by seed plants. It consists of pollen grains, which produce "
    "male gametes. Pollen grains have a hard coat made of sporopollenin that protects the gametophytes "
    "during the process of their movement from the stamens to the pistil of flowering plants."
)


def sample_documents() -> dict[str, tuple[str, str]]:
    pollen_body = (
        f"<h1>Pollen</h1><p>{PARAGRAPH}</p>"
        + "".join(f"<p>Section {i}. {PARAGRAPH}</p>" for i in range(1, 12))
        + f'<p>Many people have an <a href="{ALLERGY}">allergy</a> to pollen; '
        f'<a href="{BEES}">bees collect it</a>; see also <a href="https://www.reddit.com/r/allergy">reddit</a>.</p>'
    )
    return {
        POLLEN: ("Pollen - Wikipedia", pollen_body),
        ALLERGY: (
            "Allergy - Wikipedia",
            f"<p>An allergy is an immune response to {'harmless things ' * 5}.</p>",
        ),
        BEES: ("Bees and pollen", "<p>Bees carry pollen on their legs in pollen baskets.</p>" * 3),
        "https://www.reddit.com/r/pollen": ("pollen thread", "<p>pollen pollen pollen</p>"),
    }
