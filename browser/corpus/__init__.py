"""Corpus readers (JSONL, a folder of pages, FreshWiki, ZIM) producing CorpusRecords. No Django here."""

from browser.corpus.readers import (
    FORMATS,
    detect_format,
    read_corpus,
    read_folder,
    read_freshwiki,
    read_jsonl,
    read_zim,
)
from browser.corpus.records import CorpusFileError, CorpusRecord

__all__ = [
    "FORMATS",
    "CorpusFileError",
    "CorpusRecord",
    "detect_format",
    "read_corpus",
    "read_folder",
    "read_freshwiki",
    "read_jsonl",
    "read_zim",
]
