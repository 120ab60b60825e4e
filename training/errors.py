"""The refusal every kind of training-side job request raises (training, sampling and proxy-evaluation runs,
rounds): one exception whose ``field`` names the input, so pages, the API and the commands report it alike."""

from __future__ import annotations


class RunError(ValueError):
    """A run that cannot start. ``field`` names the input the reason is about: ``export``, ``preset``,
    ``base_checkpoint``, ``settings``, one setting (``max_length``) or "" for the run as a whole."""

    def __init__(self, reason: str, field: str = "") -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.reason, self.field = reason, field
