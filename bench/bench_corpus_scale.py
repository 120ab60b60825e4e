"""Benchmark the local search backend (tantivy) on large corpora, 100,000 and 1,000,000 pages, against
SQLite FTS5 on the same pages, measured in the same run.

    .venv/bin/python bench/bench_corpus_scale.py --out var/bench/corpus-scale.json

For each of --sizes, the synthetic pages of bench_search (a FreshWiki title plus 3 to 5 real FreshWiki
paragraphs, seeded) are streamed into a JSONL corpus file under --work, never held as a list. Each build
then runs in its own fresh process and goes the way a user's import goes: ``read_corpus`` over that file
(parsing, checks, the duplicate-URL check) into ``LocalIndex.add``, or into the FTS5 baseline of
bench_search (same text, stemming, bm25, snippets, any-word/phrase rules). A third process only reads the
file, to show the reader's share. Per build: wall and CPU seconds, peak RSS (the child's VmHWM, so sizes
and engines don't contaminate each other; target: constant in corpus size, under 2 GB), the peaks of its
anonymous and file-backed parts (sampled every 20 ms: mapped index files count in RSS too) and the size
on disk; then, in this process, search latency (top 10 with snippets; target p95 under 20 ms) and fetch
latency, both after one warm-up pass. --fts5-max-pages skips FTS5 above a size. The corpus files and
indexes are deleted at the end (--keep keeps them). Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

import tantivy  # noqa: E402

from bench.bench_exports import _vm_mb  # noqa: E402
from bench.bench_search import (  # noqa: E402
    FRESHWIKI,
    Fts5,
    disk_size,
    environment,
    latencies,
    make_queries,
    synthetic_stream,
)
from browser.corpus import CorpusRecord, read_freshwiki  # noqa: E402
from browser.corpus.readers import read_corpus  # noqa: E402
from browser.search import LocalIndex  # noqa: E402

ENGINES = ("tantivy", "fts5")
INDEX_NAMES = {"tantivy": "tantivy", "fts5": "fts5.sqlite"}
TARGET_PEAK_RSS_MB = 2048
TARGET_SEARCH_P95_MS = 20.0


def write_jsonl(pages: Iterator[CorpusRecord], path: Path, sample: set[int]) -> dict:
    """Stream ``pages`` to a JSONL corpus file at ``path`` (one page in memory at a time); the URLs of the
    pages at the positions in ``sample`` come back for the fetch benchmark."""
    start = time.perf_counter()
    urls, count, chars = [], 0, 0
    with path.open("w", encoding="utf-8") as out:
        for i, page in enumerate(pages):
            out.write(json.dumps({"url": page.url, "title": page.title, "text": page.content}) + "\n")
            chars += len(page.title) + len(page.content)
            count += 1
            if i in sample:
                urls.append(page.url)
    return {
        "pages": count,
        "text_mb": round(chars / 1e6, 1),
        "jsonl_mb": round(path.stat().st_size / 1e6, 1),
        "write_s": round(time.perf_counter() - start, 2),
        "urls": urls,
    }


class RssSampler(threading.Thread):
    """The peaks of RssAnon (the process's own memory) and RssFile (mapped files: tantivy reads its
    segments through mmap, and those pages, the kernel's page cache, also count in VmHWM), read from
    /proc every ``interval`` seconds until stop()."""

    def __init__(self, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.interval, self.peaks, self._done = (
            interval,
            {"RssAnon:": 0.0, "RssFile:": 0.0},
            threading.Event(),
        )

    def run(self) -> None:
        while not self._done.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        for field in self.peaks:
            self.peaks[field] = max(self.peaks[field], _vm_mb(field))

    def stop(self) -> dict[str, float]:
        """Stop sampling; the peaks in MB."""
        self._done.set()
        self.join()
        self.sample()
        return {
            "peak_anon_mb": round(self.peaks["RssAnon:"], 1),
            "peak_file_mb": round(self.peaks["RssFile:"], 1),
        }


def child(engine: str, source: Path, index_path: Path) -> None:
    """One build (or, for engine "read", one pass of the reader alone) in this fresh process; prints its
    result as JSON. VmHWM is this process's own peak (a fresh address space since exec)."""
    start_rss = _vm_mb("VmRSS:")
    sampler = RssSampler()
    sampler.start()
    began, cpu = time.perf_counter(), time.process_time()
    records = read_corpus(source, "jsonl")
    if engine == "read":
        count = sum(1 for _ in records)
    elif engine == "tantivy":
        count = LocalIndex.open(index_path).add(records)
    else:
        index = Fts5(index_path)
        index.add(records)
        count = index.count()
    result = {
        "records": count,
        "build_s": round(time.perf_counter() - began, 2),
        "cpu_s": round(time.process_time() - cpu, 2),  # all threads (tantivy indexes and merges on several)
        "start_rss_mb": round(start_rss, 1),
        "peak_rss_mb": round(_vm_mb("VmHWM:"), 1),
        **sampler.stop(),
    }
    if engine != "read":
        result["size_mb"] = round(disk_size(index_path) / 1e6, 1)
    print(json.dumps(result))


def build(engine: str, source: Path, index_path: Path) -> dict:
    """Run ``child`` in a new interpreter; its JSON result (or the last line of its error)."""
    if engine == "tantivy":
        shutil.rmtree(index_path, ignore_errors=True)
    args = [sys.executable, __file__, "--child", engine, "--source", str(source), "--index", str(index_path)]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def query(engine: str, index_path: Path, queries: list[str], urls: list[str]) -> dict:
    """Search (top 10, with snippets) and fetch latency on the built index, after a warm-up pass each."""
    index: LocalIndex | Fts5 = LocalIndex.open(index_path) if engine == "tantivy" else Fts5(index_path, False)
    row: dict[str, object] = {
        "search": latencies(index.search, queries),
        "fetch": latencies(index.fetch, urls),
        "mean_hits": round(statistics.fmean(len(index.search(q)) for q in queries), 2),
    }
    if engine == "tantivy":
        row["segments"] = tantivy.Index.open(str(index_path)).searcher().num_segments
    else:
        index.db.close()
    return row


def run_size(freshwiki: list[CorpusRecord], n: int, args: argparse.Namespace, queries: list[str]) -> dict:
    """Generate, read, build and query one corpus of ``n`` pages; deletes its files unless --keep."""
    work: Path = args.work / f"{n}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = work / "corpus.jsonl"
    sample = set(random.Random(args.seed).sample(range(n), min(n, args.queries)))  # noqa: S311
    corpus = write_jsonl(synthetic_stream(freshwiki, n, args.seed), source, sample)
    urls = corpus.pop("urls")
    random.Random(args.seed).shuffle(urls)  # noqa: S311
    result: dict[str, object] = {"corpus": corpus, "read": build("read", source, work / "none")}
    print(f"{n:,} pages: corpus {corpus}; reader alone {result['read']}", file=sys.stderr)
    for engine in ENGINES:
        if engine == "fts5" and args.fts5_max_pages and n > args.fts5_max_pages:
            result[engine] = {
                "skipped": f"FTS5 measured up to {args.fts5_max_pages:,} pages (--fts5-max-pages)"
            }
            continue
        index_path = work / INDEX_NAMES[engine]
        row = build(engine, source, index_path)
        if "error" not in row:
            row |= query(engine, index_path, queries, urls)
        result[engine] = row
        print(f"{n:,} pages, {engine}: {row}", file=sys.stderr)
    ours, base = result["tantivy"], result["fts5"]
    if "search" in ours and "search" in base:
        result["ratios_fts5_over_tantivy"] = ratios(ours, base)
    if not args.keep:
        shutil.rmtree(work)
    return result


def ratios(ours: dict, base: dict) -> dict[str, float]:
    """FTS5's figure over ours (above 1: ours is faster or smaller)."""
    out = {
        k: round(base[k] / ours[k], 2) for k in ("build_s", "cpu_s", "peak_rss_mb", "peak_anon_mb", "size_mb")
    }
    for op in ("search", "fetch"):
        for stat in ("p50_ms", "p95_ms", "max_ms"):
            out[f"{op}_{stat}"] = round(base[op][stat] / ours[op][stat], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "corpus-scale.json")
    parser.add_argument("--work", type=Path, default=ROOT / "var" / "bench" / "corpus-scale")
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated page counts")
    parser.add_argument("--fts5-max-pages", type=int, default=0, help="skip FTS5 above this size (0: never)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the corpus files and indexes")
    parser.add_argument("--child", choices=("read", *ENGINES), help=argparse.SUPPRESS)
    parser.add_argument("--source", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--index", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.source, args.index)
        return

    start = time.perf_counter()
    freshwiki = read_freshwiki(FRESHWIKI)
    queries = make_queries(freshwiki, args.queries, args.seed)
    results: dict[str, object] = {"queries": len(queries)}
    for n in (int(s.replace("_", "")) for s in args.sizes.split(",")):
        results[str(n)] = run_size(freshwiki, n, args, queries)
    results["targets"] = {"peak_rss_mb": TARGET_PEAK_RSS_MB, "search_p95_ms": TARGET_SEARCH_P95_MS}
    results["environment"] = environment(start) | {"cpus": os.cpu_count()}
    if not args.keep and args.work.is_dir() and not any(args.work.iterdir()):
        args.work.rmdir()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))


def markdown(r: dict) -> str:
    """One table: a row per measure and size, a column per engine, and FTS5 / ours."""
    lines = ["| pages | measure | tantivy (ours) | SQLite FTS5 | FTS5 / ours |", "|---|---|---|---|---|"]
    for key, size in r.items():
        if not key.isdigit():
            continue
        ours, base, ratio = size["tantivy"], size["fts5"], size.get("ratios_fts5_over_tantivy", {})
        n = f"{int(key):,}"
        corpus = size["corpus"]
        lines.append(f"| {n} | corpus text / JSONL MB | {corpus['text_mb']} / {corpus['jsonl_mb']} | | |")
        lines.append(
            f"| {n} | reader alone s / peak RSS MB | {size['read'].get('build_s')} "
            f"/ {size['read'].get('peak_rss_mb')} | | |"
        )
        for label, k in (
            ("build s", "build_s"),
            ("build CPU s", "cpu_s"),
            ("peak RSS MB", "peak_rss_mb"),
            ("of which anonymous, peak MB", "peak_anon_mb"),
            ("index MB", "size_mb"),
        ):
            lines.append(f"| {n} | {label} | {ours.get(k, '-')} | {base.get(k, '-')} | {ratio.get(k, '')} |")
        for op in ("search", "fetch"):
            cells = [
                f"{row[op]['p50_ms']} / {row[op]['p95_ms']}" if op in row else "-" for row in (ours, base)
            ]
            both = f"{ratio[f'{op}_p50_ms']} / {ratio[f'{op}_p95_ms']}" if ratio else ""
            lines.append(f"| {n} | {op} p50 / p95 ms | {cells[0]} | {cells[1]} | {both} |")
        lines.append(f"| {n} | mean hits | {ours.get('mean_hits', '-')} | {base.get('mean_hits', '-')} | |")
        if "skipped" in base:
            lines.append(f"| {n} | FTS5 | | {base['skipped']} | |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
