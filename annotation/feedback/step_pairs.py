"""Step-preference items (issue 38; Web-Shepherd's form: a chosen and a rejected action at one state): from
the guided samples of sampling runs, where the step model chose among the commands the policy wrote at each
step (``EpisodeAction.candidates``). At a state with two different candidates, the labeler sees the command
the episode took beside the one the step model scored lowest, in an order drawn per item (seeded by the
episode and step, so a batch made twice shows the same), and says which is the better next action: whether
people agree with the step model's choice is the figure (``step_results``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from annotation.models import Episode, EpisodeAction

# States per episode at most: the first steps where the policy wrote two different commands. Spread over
# episodes, a batch does not dwell on one long episode.
STATES_PER_EPISODE = 3


@dataclass(frozen=True)
class StatePair:
    """Two candidate next actions at step ``index`` of ``episode``, in the order shown (A, B); ``taken``:
    which of them the episode took (the step model's choice)."""

    episode: Episode
    index: int
    candidates: tuple[str, str]
    taken: int

    def as_step(self) -> dict:
        """What ``FeedbackItem.step`` keeps."""
        return {"index": self.index, "candidates": list(self.candidates), "taken": self.taken}


def candidate_pairs(episodes: Sequence[Episode]) -> list[StatePair]:
    """The states of ``episodes`` to judge, episode by episode in step order."""
    by_id = {episode.pk: episode for episode in episodes}
    actions = (
        EpisodeAction.objects.filter(episode_id__in=list(by_id))
        .exclude(candidates=[])
        .order_by("episode_id", "index")
        .values_list("episode_id", "index", "command", "candidates")
    )
    pairs: list[StatePair] = []
    taken_from: dict[int, int] = {}
    for episode_id, index, command, candidates in actions:
        if taken_from.get(episode_id, 0) >= STATES_PER_EPISODE:
            continue
        other = _rejected(command, candidates)
        if other is None:
            continue
        swap = hashlib.sha256(f"step-pair:{episode_id}:{index}".encode()).digest()[0] & 1 == 1
        shown = (other, command) if swap else (command, other)
        pairs.append(StatePair(by_id[episode_id], index, shown, 1 if swap else 0))
        taken_from[episode_id] = taken_from.get(episode_id, 0) + 1
    return pairs


def _rejected(taken: str, candidates: list) -> str | None:
    """The candidate the step model scored lowest among those that differ from the command taken."""
    others = [
        (float(c.get("score", 0.0)), str(c.get("command", "")).strip())
        for c in candidates
        if isinstance(c, dict) and str(c.get("command", "")).strip() not in ("", taken.strip())
    ]
    return min(others)[1] if others else None
