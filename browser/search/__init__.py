"""Search backends behind the engine's SearchBackend interface. ``LocalIndex``: tantivy over a corpus."""

from browser.search.local import LocalIndex

__all__ = ["LocalIndex"]
