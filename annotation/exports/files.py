"""Where an export's files are while it is written and once published, by name: kept apart from the job
(``service``) so that the ``Export`` model can say what a dead worker leaves behind without importing it."""

from __future__ import annotations

from pathlib import Path

from core.storage import EXPORTS, get_storage


def export_dir() -> Path:
    """Where this machine writes exports before publishing them (the exports folder itself with local
    storage)."""
    return get_storage(EXPORTS).scratch_dir()


def part_prefix(export_id: int) -> str:
    return f".export-{export_id}-"


def published_name(export_id: int, suffix: str) -> str:
    """``export-<id>-<format>.<type>``; with suffix "" the prefix of every name export ``export_id`` can
    have (``export-1-`` is not a prefix of ``export-12-...``)."""
    return f"export-{export_id}-{suffix}"


def discard_partial_files(export_id: int) -> None:
    """Remove the temporary files export ``export_id`` was writing and abort its unfinished upload (its
    worker died before publishing)."""
    for part in export_dir().glob(f"{part_prefix(export_id)}*.part"):
        part.unlink(missing_ok=True)
    get_storage(EXPORTS).abort_uploads(published_name(export_id, ""))
