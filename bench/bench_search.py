"""Benchmark the local search backend (tantivy) against SQLite FTS5, measured in the same run.

    .venv/bin/python bench/bench_search.py --out var/bench/search.json

Measures index build time and size for FreshWiki (100 articles) and for a synthetic corpus of --pages
pages made of real FreshWiki paragraphs, then search (top 10, with snippets) and fetch latency at that
size on both engines. The baseline gets the same text, the same any-word / phrase semantics, Porter
stemming, BM25 ranking and snippets, and a URL primary key for fetch. Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

import tantivy  # noqa: E402

from browser.corpus import CorpusRecord, read_freshwiki  # noqa: E402
from browser.corpus.html_text import html_to_text  # noqa: E402
from browser.engine.backend import Document, PageNotFound, SearchResult  # noqa: E402
from browser.search import LocalIndex  # noqa: E402

FRESHWIKI = ROOT / "data" / "corpus" / "freshwiki" / "json"
SYNTHETIC = {"tantivy": "synthetic-tantivy", "fts5": "synthetic-fts5.sqlite"}  # index names in --out's folder
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_]+")
# Seeded random.Random only picks benchmark data deterministically (ruff S311 is about secrets).


def paragraphs_of(records: list[CorpusRecord], size: int = 500) -> list[str]:
    """Real prose cut into paragraphs of about ``size`` characters (whole sentences)."""
    out = []
    for record in records:
        for line in html_to_text(record.content, drop_bare_links=True).split("\n"):
            if len(line) < 120:  # headings, list items, reference entries
                continue
            chunk = ""
            for sentence in _SENTENCE_END.split(line):
                chunk = f"{chunk} {sentence}".strip()
                if len(chunk) >= size:
                    out.append(chunk)
                    chunk = ""
            if len(chunk) >= 120:
                out.append(chunk)
    return out


def synthetic_stream(records: list[CorpusRecord], n: int, seed: int) -> Iterator[CorpusRecord]:
    """``n`` plain-text pages, one at a time: a corpus title plus 3 to 5 real paragraphs, drawn with a
    seeded RNG (page ``i`` is the same whatever ``n``)."""
    rng = random.Random(seed)  # noqa: S311
    titles = [r.title for r in records]
    paragraphs = paragraphs_of(records)
    for i in range(n):
        yield CorpusRecord(
            f"https://synthetic.example/page/{i}",
            rng.choice(titles),
            "\n\n".join(rng.sample(paragraphs, rng.randint(3, 5))),
            "text/plain",
        )


def synthetic_pages(records: list[CorpusRecord], n: int, seed: int) -> list[CorpusRecord]:
    """The ``n`` pages of synthetic_stream as a list."""
    return list(synthetic_stream(records, n, seed))


def title_word_queries(records: list[CorpusRecord], k: int, rng: random.Random) -> list[str]:
    """``k`` any-word queries: 2 or 3 words (of 3+ letters) of a corpus title."""
    title_words = [w for r in records if len(w := [x for x in _WORD.findall(r.title) if len(x) > 2]) >= 2]
    return [" ".join(rng.sample(ws, min(len(ws), rng.randint(2, 3)))) for ws in rng.choices(title_words, k=k)]


def make_queries(records: list[CorpusRecord], n: int, seed: int) -> list[str]:
    """Half any-word queries (2-3 words of a title), a quarter whole titles, a quarter quoted bigrams."""
    rng = random.Random(seed)  # noqa: S311
    bigrams = [
        f'"{a} {b}"'
        for p in paragraphs_of(records)[:2000]
        for a, b in zip(p.split()[:-1], p.split()[1:], strict=True)
        if _WORD.fullmatch(a) and _WORD.fullmatch(b) and len(a) > 3 and len(b) > 3
    ]
    queries = title_word_queries(records, n // 2, rng)
    queries += [r.title for r in rng.choices(records, k=n // 4)]
    queries += rng.sample(bigrams, n - len(queries))
    return queries


def disk_size(path: Path) -> int:
    return (
        sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        if path.is_dir()
        else path.stat().st_size
    )


class Fts5:
    """The baseline: SQLite FTS5 (external content over a table keyed by URL), bm25 and snippet().

    A SearchBackend like LocalIndex (same result and document types), so the browser can run on either.
    Pages are stored as their visible text: fetch serves text/plain."""

    name = "fts5"

    def __init__(self, path: Path, fresh: bool = True) -> None:
        """A new empty index at ``path`` (replacing any), or with ``fresh=False`` the existing one."""
        if fresh:
            path.unlink(missing_ok=True)
        elif not path.is_file():
            raise FileNotFoundError(path)
        self.db = sqlite3.connect(path)
        if fresh:
            self._create()

    def _create(self) -> None:
        self.db.executescript(
            """
            CREATE TABLE docs(id INTEGER PRIMARY KEY, url TEXT UNIQUE NOT NULL, title TEXT, body TEXT);
            CREATE VIRTUAL TABLE fts USING fts5(
                title, body, content='docs', content_rowid='id', tokenize='porter unicode61');
            """
        )

    def add(self, records: Iterable[CorpusRecord]) -> None:
        rows = (
            (r.url, r.title, html_to_text(r.content, True) if r.content_type == "text/html" else r.content)
            for r in records
        )
        with self.db:
            self.db.executemany("INSERT INTO docs(url, title, body) VALUES (?, ?, ?)", rows)
            self.db.execute("INSERT INTO fts(fts) VALUES ('rebuild')")

    @staticmethod
    def match(query: str) -> str:
        """The same semantics as LocalIndex: quoted parts required as phrases, other words OR'ed."""
        phrases = ['"' + " ".join(_WORD.findall(p)) + '"' for p in re.findall(r'"([^"]*)"?', query)]
        phrases = [p for p in phrases if p != '""']
        words = [f'"{w}"' for w in _WORD.findall(re.sub(r'"[^"]*"?', " ", query))]
        if not phrases:
            return " OR ".join(words)
        required = " AND ".join(phrases)  # loose words only add to bm25: "(P OR w)" is always true
        return f"{required} AND ({' OR '.join([phrases[0], *words])})" if words else required

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM docs").fetchone()[0]

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        # The inner query alone lets FTS5 sort by rank itself and run snippet() on the top k rows only.
        sql = """
            SELECT d.url, d.title, top.snip FROM (
                SELECT rowid, rank, snippet(fts, 1, '', '', '', 32) AS snip
                FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?
            ) AS top JOIN docs d ON d.id = top.rowid ORDER BY top.rank"""
        if k <= 0 or not (match := self.match(query)):
            return []
        rows = self.db.execute(sql, (match, k)).fetchall()
        return [SearchResult(url=url, title=title, snippet=snip) for url, title, snip in rows]

    def fetch(self, url: str) -> Document:
        row = self.db.execute("SELECT title, body FROM docs WHERE url = ?", (url,)).fetchone()
        if row is None:
            raise PageNotFound(url)
        return Document(url=url, content_type="text/plain", content=row[1], title=row[0])


def latencies(fn: Callable[[str], object], args: list[str]) -> dict[str, float]:
    """Milliseconds per call after one warm-up pass over the same arguments."""
    for a in args:
        fn(a)
    times = []
    for a in args:
        start = time.perf_counter()
        fn(a)
        times.append((time.perf_counter() - start) * 1000)
    return summary(times)


def summary(times_ms: list[float]) -> dict[str, float]:
    """p50, p95, max and mean of ``times_ms`` (milliseconds), rounded to the microsecond."""
    times = sorted(times_ms)
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3),
        "max_ms": round(times[-1], 3),
        "mean_ms": round(statistics.fmean(times), 3),
    }


def build(engine: str, path: Path, records: list[CorpusRecord]) -> tuple[LocalIndex | Fts5, dict]:
    """A fresh index of ``records``, with its build time (text extraction included) and size on disk."""
    start = time.perf_counter()
    if engine == "tantivy":
        shutil.rmtree(path, ignore_errors=True)
        index: LocalIndex | Fts5 = LocalIndex.open(path)
    else:
        index = Fts5(path)
    index.add(records)
    seconds = time.perf_counter() - start
    return index, {"build_s": round(seconds, 2), "size_mb": round(disk_size(path) / 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "search.json")
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    work = args.out.parent
    work.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    freshwiki = read_freshwiki(FRESHWIKI)
    results: dict[str, object] = {"read_freshwiki_s": round(time.perf_counter() - start, 2)}
    queries = make_queries(freshwiki, args.queries, args.seed)
    for engine, name in (("tantivy", "freshwiki-tantivy"), ("fts5", "freshwiki-fts5.sqlite")):
        index, row = build(engine, work / name, freshwiki)
        row["search"] = latencies(index.search, queries)  # long real articles: snippets cost more
        results[f"freshwiki_{engine}"] = row

    pages = synthetic_pages(freshwiki, args.pages, args.seed)
    fetched = random.Random(args.seed).sample(pages, args.queries)  # noqa: S311
    urls = [p.url for p in fetched]
    text_mb = sum(len(p.title) + len(p.content) for p in pages) / 1e6
    results["synthetic"] = {"pages": len(pages), "text_mb": round(text_mb, 1), "queries": len(queries)}
    ours, results["synthetic_tantivy"] = build("tantivy", work / SYNTHETIC["tantivy"], pages)
    base, results["synthetic_fts5"] = build("fts5", work / SYNTHETIC["fts5"], pages)
    del pages
    for engine, index in (("tantivy", ours), ("fts5", base)):
        row = results[f"synthetic_{engine}"]
        row["search"] = latencies(index.search, queries)
        row["fetch"] = latencies(index.fetch, urls)
        row["mean_hits"] = round(statistics.fmean(len(index.search(q)) for q in queries), 2)

    ours_row, base_row = results["synthetic_tantivy"], results["synthetic_fts5"]
    results["ratios_fts5_over_tantivy"] = {
        "build_s": round(base_row["build_s"] / ours_row["build_s"], 2),
        "size_mb": round(base_row["size_mb"] / ours_row["size_mb"], 2),
        **{
            f"{op}_{stat}": round(base_row[op][stat] / ours_row[op][stat], 2)
            for op in ("search", "fetch")
            for stat in ("p50_ms", "p95_ms", "max_ms")
        },
    }
    results["environment"] = environment(start)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))


def environment(start: float) -> dict:
    """What the numbers were measured on, and how long the run took (``start``: perf_counter)."""
    return {
        "python": platform.python_version(),
        "tantivy": tantivy.__version__ if hasattr(tantivy, "__version__") else "?",
        "sqlite": sqlite3.sqlite_version,
        "machine": f"{platform.machine()}, {platform.system()}",
        "total_s": round(time.perf_counter() - start, 1),
    }


def markdown(r: dict) -> str:
    ours, base, ratio = r["synthetic_tantivy"], r["synthetic_fts5"], r["ratios_fts5_over_tantivy"]
    fw_ours, fw_base = r["freshwiki_tantivy"], r["freshwiki_fts5"]
    n = r["synthetic"]["pages"]
    lines = [
        "| measure | tantivy (ours) | SQLite FTS5 | FTS5 / ours |",
        "|---|---|---|---|",
        f"| FreshWiki (100 docs) build s / MB | {fw_ours['build_s']} / {fw_ours['size_mb']} "
        f"| {fw_base['build_s']} / {fw_base['size_mb']} | |",
        f"| FreshWiki search p50 / p95 ms | {fw_ours['search']['p50_ms']} / {fw_ours['search']['p95_ms']} "
        f"| {fw_base['search']['p50_ms']} / {fw_base['search']['p95_ms']} | |",
        f"| {n:,} pages: build s | {ours['build_s']} | {base['build_s']} | {ratio['build_s']} |",
        f"| {n:,} pages: size MB | {ours['size_mb']} | {base['size_mb']} | {ratio['size_mb']} |",
    ]
    for op in ("search", "fetch"):
        for stat in ("p50_ms", "p95_ms", "max_ms"):
            label = f"{op} {stat.replace('_ms', '')} ms"
            lines.append(f"| {label} | {ours[op][stat]} | {base[op][stat]} | {ratio[f'{op}_{stat}']} |")
    lines.append(f"| mean hits per query | {ours['mean_hits']} | {base['mean_hits']} | |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
