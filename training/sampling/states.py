"""A sampling run "at demonstration states" (issue 38; the step preference's second source, the
demonstrator's action against a model's): instead of browsing from the question, the policy is asked for its
next action at a few states of each finished human demonstration of the run's questions, replayed on the
pages the demonstration recorded (``candidates.browser_at``: nothing is searched or fetched again). Each
command it writes there that differs from the demonstrator's is kept as a ``StepCandidate``; a
step-preference batch of the run then sets it against the demonstrator's own action. Nothing is run onward:
a labeler judges the move, not where it leads."""

from __future__ import annotations

from collections.abc import Callable

from annotation.models import Episode, EpisodeStatus
from browser.engine.settings import BrowserSettings
from browser.models import PageSnapshot
from training.models import SamplingRun, StepCandidate
from training.sampling.candidates import browser_at, candidate_commands
from training.sampling.episode import Policy, SamplingSettings, derive_seed

STATES_PER_EPISODE = 3  # the first, middle and last actions of a demonstration: where it starts, works, ends


def state_indexes(count: int, per_episode: int = STATES_PER_EPISODE) -> list[int]:
    """Evenly spread action indexes of an episode of ``count`` actions (all of a short one)."""
    if count <= per_episode:
        return list(range(count))
    return sorted({round(i * (count - 1) / (per_episode - 1)) for i in range(per_episode)})


def demonstrations_of(run: SamplingRun) -> list[Episode]:
    """The finished human demonstrations of the run's questions, oldest first."""
    episodes = Episode.objects.human().filter(status=EpisodeStatus.FINISHED, question_id__in=run.question_ids)
    return list(episodes.select_related("question").order_by("pk"))


def replayable_state(episode: Episode) -> dict:
    """The episode's state with its pages themselves (stored states keep their digests)."""
    digests = episode.state["pages"]
    pages = dict(PageSnapshot.objects.filter(digest__in=digests).values_list("digest", "page"))
    return {**episode.state, "pages": pages}


def sample_at_states(
    run: SamplingRun,
    policy: Policy,
    sampling: SamplingSettings,
    *,
    on_state: Callable[[int, int], None],
    cancelled: Callable[[], bool],
) -> dict[str, int]:
    """Ask ``policy`` for its next action at each chosen state of each demonstration; store what differs
    from the demonstrator's. ``on_state(done, total)`` after each state; stops when ``cancelled()``. The
    run's figures: demonstrations, states planned and asked, candidates kept."""
    episodes = demonstrations_of(run)
    plans = [(episode, list(episode.actions.order_by("index"))) for episode in episodes]
    total = sum(len(state_indexes(len(actions))) for _, actions in plans)
    done = kept = 0
    on_state(done, total)
    for episode, actions in plans:
        if not actions:
            continue
        state = replayable_state(episode)
        commands = [action.command for action in actions]
        settings = BrowserSettings.from_dict(episode.settings)
        for index in state_indexes(len(actions)):
            if cancelled():
                return {"demonstrations": len(plans), "planned": total, "states": done, "candidates": kept}
            browser = browser_at(
                state, settings, episode.question.text, commands, index, episode.question.reference_answers
            )
            seed = derive_seed(sampling.seed, episode.pk, f"state:{index}")
            found = candidate_commands(policy, browser, sampling, k=1, seed=seed, exclude=[commands[index]])
            if found:
                StepCandidate.objects.create(run=run, action=actions[index], command=found[0])
                kept += 1
            done += 1
            on_state(done, total)
    return {"demonstrations": len(plans), "planned": total, "states": done, "candidates": kept}
