"""Large corpora: imports stream records from the reader into the index in bounded memory, stay all or
nothing (a bad last record leaves the index as it was) and can be rerun without duplicating pages."""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

from browser.corpus.readers import count_records, read_jsonl
from browser.corpus.records import CorpusFileError, CorpusRecord
from browser.models import Corpus
from browser.search.local import LocalIndex
from browser.services import backend_for, import_corpus

pytestmark = pytest.mark.django_db


def row(i: int) -> dict:
    return {"url": f"https://big.example/{i}", "title": f"Page {i}", "text": f"word{i} " + "filler " * 20}


def write_corpus(path: Path, n: int, last: str | None = None) -> Path:
    """``n`` small JSONL rows, written one at a time (the test itself holds no corpus), then ``last``."""
    with path.open("w") as out:
        for i in range(n):
            out.write(json.dumps(row(i)) + "\n")
        if last is not None:
            out.write(last + "\n")
    return path


def peak_import_bytes(name: str, path: Path) -> int:
    """Peak Python allocations (tracemalloc) while importing ``path``: tantivy's indexing heap is Rust
    memory and the duplicate-URL check lives in SQLite, so neither is counted; both are bounded by their
    own budgets (the writer's heap size, SQLite's page cache)."""
    tracemalloc.start()
    try:
        import_corpus(name, path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_importing_ten_times_the_records_does_not_take_ten_times_the_memory(tmp_path):
    """Each record is dropped once the writer has it, so the peak is set by one record and the importer's
    fixed costs (Django rows, buffers), not by the corpus. Reading every record first, as the importer
    used to, made the 20k import's peak about ten times the 2k one's; 2.5 leaves room for noise (the
    allocator's arenas, caches filled on first use) while failing any per-record growth."""
    import_corpus("warmup", write_corpus(tmp_path / "warm.jsonl", 200))  # first-use imports and caches
    small = peak_import_bytes("small", write_corpus(tmp_path / "small.jsonl", 2_000))
    large = peak_import_bytes("large", write_corpus(tmp_path / "large.jsonl", 20_000))
    assert backend_for("large").count() == 20_000
    assert large < 2.5 * small, (small, large)


def test_the_reader_yields_records_as_it_reads_them(tmp_path):
    path = write_corpus(tmp_path / "pages.jsonl", 20_000, last='{"url": "ftp://bad"}')
    records = read_jsonl(path)
    assert isinstance(records, Iterator)
    first = next(records)  # the bad last line is not read yet
    assert first == CorpusRecord("https://big.example/0", "Page 0", row(0)["text"], "text/plain")
    with pytest.raises(CorpusFileError, match=r"pages\.jsonl: line 20001: ") as exc:
        list(records)
    assert exc.value.line == 20_001
    assert count_records(path, "jsonl") == 20_001


def test_a_bad_record_at_the_end_leaves_the_index_as_it_was(tmp_path):
    import_corpus("big", write_corpus(tmp_path / "first.jsonl", 2_000))
    bad = write_corpus(tmp_path / "more.jsonl", 5_000, last=json.dumps({**row(9), "title": " "}))
    with pytest.raises(CorpusFileError, match=r"more\.jsonl: line 5001: 'title' is empty"):
        import_corpus("big", bad)
    assert backend_for("big").count() == 2_000
    assert backend_for("big").search("word4999") == []
    assert Corpus.objects.get(name="big").document_count == 2_000


def test_rerunning_an_import_replaces_pages_instead_of_duplicating_them(tmp_path, capsys):
    path = write_corpus(tmp_path / "pages.jsonl", 3_000)
    import_corpus("big", path)
    call_command("import_corpus", "big", str(path))  # e.g. restarting an import that was interrupted
    out = capsys.readouterr().out
    assert "big: 3000 pages imported (jsonl); 3000 pages in the corpus" in out
    assert backend_for("big").count() == 3_000
    assert [r.url for r in backend_for("big").search("word1234")] == ["https://big.example/1234"]


def test_a_url_repeated_after_the_writer_flushed_to_disk_is_still_replaced(tmp_path):
    """With the smallest heap tantivy allows, these pages fill it several times over: the later copy of
    each URL must replace the earlier one even when that one is already in an uncommitted segment."""
    index = LocalIndex.open(tmp_path / "index")

    def pages(rounds: int) -> Iterator[CorpusRecord]:
        for i in range(rounds * 1_000):
            url, title = f"https://e.org/{i % 1_000}", f"Round {i // 1_000}"
            yield CorpusRecord(url, title, "x " * 2_000, "text/plain")

    assert index.add(pages(8), heap_size=15_000_000) == 8_000
    assert index.count() == 1_000
    assert index.fetch("https://e.org/7").title == "Round 7"


def test_the_command_prints_a_progress_line_every_ten_thousand_records(tmp_path, capsys):
    call_command("import_corpus", "big", str(write_corpus(tmp_path / "pages.jsonl", 20_000)))
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "10000 records of 20000 indexed",
        "20000 records of 20000 indexed",
        "big: 20000 pages imported (jsonl); 20000 pages in the corpus",
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_command_redraws_one_progress_bar(tmp_path):
    out = Terminal()
    call_command("import_corpus", "big", str(write_corpus(tmp_path / "pages.jsonl", 200)), stdout=out)
    bar, result = out.getvalue().split("\n")[:2]
    assert bar.split("\r")[1:] == [
        "[" + "." * 30 + "] 0 of 200 records",
        "[" + "#" * 15 + "." * 15 + "] 100 of 200 records",
        "[" + "#" * 30 + "] 200 of 200 records",
    ]
    assert result == "big: 200 pages imported (jsonl); 200 pages in the corpus"
