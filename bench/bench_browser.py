"""Benchmark the browser per command at 100,000 pages: over tantivy (ours) and over SQLite FTS5, one run.

    .venv/bin/python bench/bench_browser.py --out var/bench/browser.json

Runs the same scripted sessions, in-process, through ``Browser`` over each backend (LocalIndex, and the
FTS5 baseline from bench_search.py behind the same SearchBackend interface), timing every ``step()`` and
every ``observation()`` with perf_counter_ns. A session: Search <2-3 words of a FreshWiki title> ->
Clicked on link 0 -> Scrolled down 1 (twice) -> Find in page: <a word of the page> -> Quote: <a substring
of the page text> -> Back -> Clicked on link 1 (when present) -> Top. Every session runs once untimed
(warm-up), then timed. Reuses the synthetic indexes bench_search.py leaves next to --out when they hold
exactly the pages it would build, otherwise builds them. Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))


from bench.bench_search import (  # noqa: E402
    FRESHWIKI,
    SYNTHETIC,
    Fts5,
    build,
    environment,
    summary,
    synthetic_pages,
    title_word_queries,
)
from browser.corpus import CorpusRecord, read_freshwiki  # noqa: E402
from browser.engine.backend import SearchBackend  # noqa: E402
from browser.engine.browser import Browser  # noqa: E402
from browser.engine.settings import BrowserSettings  # noqa: E402
from browser.search import LocalIndex  # noqa: E402

COMMANDS = ("search", "click", "scroll", "find", "quote", "back", "top", "observation")
TARGET_MS = 20.0  # README: p95 under 20 ms per command (search, click, scroll, find, quote) at 100k pages
_LONG_WORD = re.compile(r"[^\W\d_]{5,}")
# Seeded random.Random only picks benchmark data deterministically (ruff S311 is about secrets).


def _reusable(work: Path, pages: list[CorpusRecord], seed: int) -> tuple[LocalIndex, Fts5] | None:
    """The indexes already in ``work``, if both hold exactly ``pages`` (count and a sample of pages)."""
    tantivy_path, fts5_path = work / SYNTHETIC["tantivy"], work / SYNTHETIC["fts5"]
    if not (tantivy_path / "meta.json").is_file() or not fts5_path.is_file():
        return None
    try:
        ours, base = LocalIndex.open(tantivy_path), Fts5(fts5_path, fresh=False)
        if ours.count() != len(pages) or base.count() != len(pages):
            return None
        for page in random.Random(seed).sample(pages, 25):  # noqa: S311
            for backend in (ours, base):
                doc = backend.fetch(page.url)
                if (doc.title, doc.content) != (page.title, page.content):
                    return None
    except (ValueError, LookupError, sqlite3.Error):
        return None
    return ours, base


def synthetic_backends(work: Path, n: int, seed: int) -> tuple[LocalIndex, Fts5, dict]:
    """Both backends over bench_search.py's synthetic corpus of ``n`` pages: reused or built in ``work``."""
    pages = synthetic_pages(read_freshwiki(FRESHWIKI), n, seed)
    found = _reusable(work, pages, seed)
    if found is not None:
        return *found, {"reused": True}
    ours, ours_build = build("tantivy", work / SYNTHETIC["tantivy"], pages)
    base, base_build = build("fts5", work / SYNTHETIC["fts5"], pages)
    return ours, base, {"reused": False, "tantivy": ours_build, "fts5": base_build}


class Recorder:
    """Runs commands on a browser, timing each step and the observation after it, per command type."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.ns: dict[str, list[int]] = defaultdict(list)
        self.invalid: list[str] = []

    def step(self, kind: str, command: str) -> None:
        start = time.perf_counter_ns()
        result = self.browser.step(command)
        self.ns[kind].append(time.perf_counter_ns() - start)
        start = time.perf_counter_ns()
        self.browser.observation()
        self.ns["observation"].append(time.perf_counter_ns() - start)
        if not result.valid:
            self.invalid.append(f"{command[:60]!r}: {result.message}")


def run_session(recorder: Recorder, query: str, rng: random.Random) -> None:
    """One scripted session; text for Find and Quote is drawn with ``rng`` from the page being read."""
    browser = recorder.browser
    browser.reset(f"What do pages say about {query}?")
    recorder.step("search", f"Search {query}")
    if not browser.page.links:
        return
    recorder.step("click", "Clicked on link 0")
    recorder.step("scroll", "Scrolled down 1")
    recorder.step("scroll", "Scrolled down 1")
    plain = browser.page.plain
    words = _LONG_WORD.findall(plain) or ["the"]
    recorder.step("find", f"Find in page: {rng.choice(words)}")
    start = rng.randrange(max(1, len(plain) - 200))
    quote = plain[start : start + rng.randint(40, 160)].strip() or plain.strip()
    recorder.step("quote", f"Quote: {quote}")
    recorder.step("back", "Back")
    if len(browser.page.links) > 1:
        recorder.step("click", "Clicked on link 1")
    recorder.step("top", "Top")


def run_sessions(backend: SearchBackend, queries: list[str], seed: int) -> Recorder:
    """Every session once to warm up, then again timed (same queries, same random draws)."""
    recorders = [Recorder(Browser(backend, BrowserSettings())) for _ in ("warm-up", "timed")]
    for recorder in recorders:
        for i, query in enumerate(queries):
            run_session(recorder, query, random.Random(f"{seed}:{i}"))  # noqa: S311
    return recorders[-1]


def stats(recorder: Recorder) -> dict[str, dict[str, float]]:
    return {
        kind: {**summary([ns / 1e6 for ns in recorder.ns[kind]]), "n": len(recorder.ns[kind])}
        for kind in COMMANDS
        if recorder.ns[kind]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "browser.json")
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    work = args.out.parent
    work.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    ours, base, indexes = synthetic_backends(work, args.pages, args.seed)
    indexes["ready_s"] = round(time.perf_counter() - start, 1)
    queries = title_word_queries(read_freshwiki(FRESHWIKI), args.sessions, random.Random(args.seed))  # noqa: S311
    results: dict[str, object] = {"pages": args.pages, "sessions": args.sessions, "indexes": indexes}
    for engine, backend in (("tantivy", ours), ("fts5", base)):
        recorder = run_sessions(backend, queries, args.seed)
        results[engine] = stats(recorder)
        results[f"{engine}_invalid_steps"] = {"count": len(recorder.invalid), "first": recorder.invalid[:20]}
    ours_row, base_row = results["tantivy"], results["fts5"]
    results["ratios_fts5_over_tantivy"] = {
        kind: {
            stat: round(base_row[kind][stat] / max(ours_row[kind][stat], 1e-6), 2)
            for stat in ("p50_ms", "p95_ms", "max_ms")
        }
        for kind in ours_row
        if kind in base_row
    }
    results["over_target_p95"] = {
        engine: [k for k, row in results[engine].items() if row["p95_ms"] > TARGET_MS]
        for engine in ("tantivy", "fts5")
    }
    results["environment"] = environment(start)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))


def markdown(r: dict) -> str:
    ours, base, ratio = r["tantivy"], r["fts5"], r["ratios_fts5_over_tantivy"]
    lines = [
        f"Browser at {r['pages']:,} pages, {r['sessions']} sessions (ms; target p95 < {TARGET_MS:g})",
        "",
        "| command | ours p50 | ours p95 | baseline p50 | baseline p95 | baseline/ours p95 |",
        "|---|---|---|---|---|---|",
    ]
    for kind in COMMANDS:
        if kind in ours and kind in base:
            lines.append(
                f"| {kind} | {ours[kind]['p50_ms']} | {ours[kind]['p95_ms']} | {base[kind]['p50_ms']} "
                f"| {base[kind]['p95_ms']} | {ratio[kind]['p95_ms']} |"
            )
    for engine in ("tantivy", "fts5"):
        invalid = r[f"{engine}_invalid_steps"]
        if invalid["count"]:
            lines.append(f"\n{engine}: {invalid['count']} invalid steps, e.g. {invalid['first'][:2]}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
