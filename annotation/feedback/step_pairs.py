"""Step-preference items (issue 38; Web-Shepherd's form: a chosen and a rejected action at one state), from
sampling runs of two kinds:

- guided samples, where the step model chose among the commands the policy wrote at each step
  (``EpisodeAction.candidates``): at a state with two different candidates, the command the episode took
  against the one the step model scored lowest (``kind`` "guided");
- runs at demonstration states, where a policy wrote its next action at states of human demonstrations
  (training's ``StepCandidate``, read through the app registry): the demonstrator's action against the
  policy's (``kind`` "demonstration").

The two are shown in an order drawn per item (seeded by the episode and step, so a batch made twice shows
the same), and the labeler says which is the better next action; how often people prefer the action the
episode took is the figure (``step_results``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from annotation.feedback.run_source import step_candidates
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

    kind: str = "guided"

    def as_step(self) -> dict:
        """What ``FeedbackItem.step`` keeps."""
        return {
            "index": self.index,
            "candidates": list(self.candidates),
            "taken": self.taken,
            "kind": self.kind,
        }


def candidate_pairs(episodes: Sequence[Episode], runs: Sequence[int] = ()) -> list[StatePair]:
    """The states of ``episodes`` to judge, episode by episode in step order: their guided steps', and the
    demonstration states ``runs`` sampled a policy's action at."""
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
        pairs.append(_pair(by_id[episode_id], index, command, other, "guided"))
        taken_from[episode_id] = taken_from.get(episode_id, 0) + 1
    policy_candidates = (
        step_candidates()
        .objects.filter(run__in=list(runs), action__episode_id__in=list(by_id))
        .order_by("action__episode_id", "action__index", "run_id")
        .values_list("action__episode_id", "action__index", "action__command", "command")
    )
    seen = set()
    for episode_id, index, command, other in policy_candidates:
        if (episode_id, index) not in seen and other.strip() != command.strip():
            seen.add((episode_id, index))
            pairs.append(_pair(by_id[episode_id], index, command, other.strip(), "demonstration"))
    return pairs


def _pair(episode: Episode, index: int, taken: str, other: str, kind: str) -> StatePair:
    swap = hashlib.sha256(f"step-pair:{episode.pk}:{index}".encode()).digest()[0] & 1 == 1
    return StatePair(episode, index, (other, taken) if swap else (taken, other), 1 if swap else 0, kind)


def _rejected(taken: str, candidates: list) -> str | None:
    """The candidate the step model scored lowest among those that differ from the command taken."""
    others = [
        (float(c.get("score", 0.0)), str(c.get("command", "")).strip())
        for c in candidates
        if isinstance(c, dict) and str(c.get("command", "")).strip() not in ("", taken.strip())
    ]
    return min(others)[1] if others else None
