"""The episode loop: a policy browses the text environment and answers with quotes (WebGPT section 3).

Each round, every unfinished episode asks its policy for one command and all those requests go to the
model backend in ONE ``Backend.complete`` call: that batch is where the local backend's speed comes from.
The browser applies each command exactly as for a person (invalid text is an explained, counted action),
so samples are comparable with, and replayable like, human demonstrations. Django-free.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from browser.engine.browser import Browser
from browser.engine.commands import EndReason
from browser.engine.page import Quote
from training.sampling.types import Backend, Completion, CompletionRequest, TokenCounter

NO_ANSWER = (EndReason.NONSENSE, EndReason.CONTROVERSIAL)  # the policy declined: no answer to write
UNCONSTRAINED = "none"  # a step whose backend reported no constraint


@dataclass(frozen=True)
class SamplingSettings:
    """Defaults from the paper: temperature 0.8, at most 100 actions. ``constrain_commands``: decode
    commands within the command grammar of the current observation (backends that can enforce it); None
    leaves it to the policy (on for prompted models, so that even a 135M model acts validly; off for BC).
    Quotes are always constrained to spans of the page on such backends."""

    temperature: float = 0.8
    max_actions: int = 100
    max_command_tokens: int = 48
    max_answer_tokens: int = 200
    seed: int = 0
    constrain_commands: bool | None = None

    def __post_init__(self) -> None:
        if self.max_actions < 1 or self.max_command_tokens < 1 or self.max_answer_tokens < 1:
            raise ValueError("max_actions, max_command_tokens and max_answer_tokens must be at least 1")
        if self.temperature < 0:
            raise ValueError("temperature must be at least 0")


def derive_seed(seed: int, episode: int, step: int | str) -> int:
    """A 63-bit seed for one step of one episode: the same (seed, episode, step) always gives the same
    number, and neighbouring steps get unrelated ones (a hash, not ``seed + step``)."""
    digest = hashlib.sha256(f"{seed}:{episode}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class Policy(Protocol):
    """Turns the environment's text into completion requests and completions into commands."""

    backend: Backend

    def command_request(
        self, browser: Browser, settings: SamplingSettings, seed: int
    ) -> CompletionRequest: ...

    def answer_request(
        self, browser: Browser, settings: SamplingSettings, seed: int
    ) -> CompletionRequest: ...

    def command_from(self, completion: Completion) -> str: ...


@dataclass(frozen=True)
class Step:
    """One action: the observation the policy saw, the command it wrote, what the browser said, the
    digests of the pages shown before and after it (to store the episode like a human demonstration), and
    the constraint its request carried as the backend reports it ("commands (regex)", "none"...);
    ``token_ids``: the tokens sampled, where the backend gives them (the local one does), for RL to train on
    as sampled."""

    observation: str
    command: str
    valid: bool
    message: str
    tokens: int
    page_before: str = ""
    page_after: str = ""
    constraint: str = UNCONSTRAINED
    token_ids: tuple[int, ...] = ()
    # Guided browsing (``StepGuide``): the k commands sampled at this step and the step scorer's score of
    # each, in sampling order; ``command`` is the best scored (empty without a guide).
    candidates: tuple[str, ...] = ()
    candidate_scores: tuple[float, ...] = ()


class StepScorer(Protocol):
    """Scores actions given their observations (a process reward model: ``RewardScorer`` over a ``prm``
    checkpoint takes (observation, command) as its (prompt, answer))."""

    def score(self, prompts: Sequence[str], answers: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True)
class StepGuide:
    """Step-level best-of-k: at each step ``k`` commands are sampled (the first with the step's usual seed,
    so k = 1 is unguided browsing) and the one ``scorer`` scores best is taken (the first among equals)."""

    scorer: StepScorer
    k: int

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("a step guide samples at least one command a step")


@dataclass
class EpisodeSample:
    """An episode. ``answer`` is None when the policy declined (End: Nonsense / Controversial) or
    gathered no quote; an episode still browsing when its run was stopped is not ``finished`` (no end
    reason, no answer). ``model_seconds`` is the wall time of the backend calls this episode waited on
    (shared with its batch partners); ``env_seconds`` the time in the browser (search, fetch, render)."""

    question: str
    episode_index: int
    steps: list[Step] = field(default_factory=list)
    quotes: tuple[Quote, ...] = ()
    answer: str | None = None
    answer_prompt: str = ""
    answer_token_ids: tuple[int, ...] = ()  # as ``Step.token_ids``
    end_reason: str = ""
    tokens_generated: int = 0
    env_seconds: float = 0.0
    model_seconds: float = 0.0

    @property
    def finished(self) -> bool:
        return bool(self.end_reason)

    @property
    def invalid_actions(self) -> int:
        return sum(not step.valid for step in self.steps)

    @property
    def commands(self) -> list[str]:
        return [step.command for step in self.steps]


# An episode's end when its policy wrote the same invalid command twice in a row: each step asks with a seed
# of its own, so a policy that writes it again is stuck and would spend the rest of its actions (and their
# tokens) on it. The episode is answered from its quotes, if any, as at the action limit.
REPEATED_INVALID = "repeated_invalid"


def stuck(sample: EpisodeSample) -> bool:
    """Whether the episode's last two actions are the same invalid command."""
    last = sample.steps[-2:]
    return len(last) == 2 and not (last[0].valid or last[1].valid) and last[0].command == last[1].command


def run_episode(
    policy: Policy,
    browser: Browser,
    question: str,
    settings: SamplingSettings,
    *,
    episode_index: int = 0,
    reference_answers: Sequence[str] = (),
) -> EpisodeSample:
    """One episode of ``question`` in ``browser`` (reset first). The same ``settings.seed`` and
    ``episode_index`` give the same episode, alone or batched with others (``run_episodes``)."""
    return run_episodes(
        policy,
        [browser],
        [question],
        settings,
        first_index=episode_index,
        reference_answers=[reference_answers],
    )[0]


def run_episodes(
    policy: Policy,
    browsers: Sequence[Browser],
    questions: Sequence[str],
    settings: SamplingSettings,
    *,
    first_index: int = 0,
    reference_answers: Sequence[Sequence[str]] | None = None,
    on_round: Callable[[Sequence[EpisodeSample], int], bool] | None = None,
    on_tokens: TokenCounter | None = None,
    guide: StepGuide | None = None,
) -> list[EpisodeSample]:
    """Episodes stepped together: episode ``i`` runs ``questions[i]`` in ``browsers[i]`` (distinct browser
    objects, their action limit set to ``settings.max_actions``) with episode index ``first_index + i``.
    Each round sends the command requests of all unfinished episodes as one batch, then the answer
    requests of the episodes that ended in it as one batch: an episode is whole (``finished``, answered)
    by the end of the round it ended in, so a job can store it while its partners browse on.
    ``on_round(samples, running)`` is called after each round with how many episodes are still browsing:
    a job reports progress and stores what ended there. It returns True to stop stepping (a cancel): the
    episodes still browsing are left unfinished, every one that ended is already answered.
    ``on_tokens`` hears the tokens as the backend generates them (``Backend.complete``). ``guide``: each
    step samples k commands in the round's batch and takes the best scored (``StepGuide``); an episode's
    generated tokens count all k."""
    if len(browsers) != len(questions) or len({id(browser) for browser in browsers}) != len(browsers):
        raise ValueError("one distinct browser per question")
    references = reference_answers or [()] * len(questions)
    samples = []
    for offset, (browser, question, refs) in enumerate(zip(browsers, questions, references, strict=True)):
        started = time.perf_counter()
        # The observation's "Actions left" counts down to the run's limit, and the browser enforces it.
        browser.settings = replace(browser.settings, max_actions=settings.max_actions)
        browser.reset(question, refs)
        sample = EpisodeSample(question=browser.question, episode_index=first_index + offset)
        sample.env_seconds += time.perf_counter() - started
        samples.append(sample)

    step = 0
    running = list(range(len(browsers)))
    k = guide.k if guide else 1
    while running:
        observations, requests = [], []
        for i in running:
            started = time.perf_counter()
            observations.append(browsers[i].observation())
            samples[i].env_seconds += time.perf_counter() - started
            for j in range(k):
                seed = derive_seed(settings.seed, samples[i].episode_index, step if j == 0 else f"{step}:{j}")
                requests.append(policy.command_request(browsers[i], settings, seed))
        owners = [samples[i] for i in running for _ in range(k)]
        completions = _complete(policy.backend, requests, owners, on_tokens)
        commands = [policy.command_from(completion) for completion in completions]
        scores = guide.scorer.score([o for o in observations for _ in range(k)], commands) if guide else []
        for n, (i, observation) in enumerate(zip(running, observations, strict=True)):
            group = range(n * k, (n + 1) * k)
            best = max(group, key=lambda c: (scores[c], -c)) if guide else n
            completion, command = completions[best], commands[best]
            started = time.perf_counter()
            page_before = browsers[i].page.digest
            result = browsers[i].step(command)
            samples[i].steps.append(
                Step(
                    observation,
                    command,
                    result.valid,
                    result.message,
                    completion.tokens,
                    page_before,
                    browsers[i].page.digest,
                    completion.details.get("constraint", UNCONSTRAINED),
                    tuple(completion.details.get("token_ids", ())),
                    tuple(commands[c] for c in group) if guide else (),
                    tuple(float(scores[c]) for c in group) if guide else (),
                )
            )
            samples[i].env_seconds += time.perf_counter() - started
        step += 1
        ended = [i for i in running if browsers[i].done or step >= settings.max_actions or stuck(samples[i])]
        running = [i for i in running if i not in ended]
        _end(policy, settings, [samples[i] for i in ended], [browsers[i] for i in ended], on_tokens)
        if on_round is not None and on_round(samples, len(running)):
            break
    return samples


def _end(
    policy: Policy,
    settings: SamplingSettings,
    samples: Sequence[EpisodeSample],
    browsers: Sequence[Browser],
    on_tokens: TokenCounter | None,
) -> None:
    """Close the episodes that stopped browsing: their end reason and quotes, and the answers of those
    with a quote that did not decline, in one batch (each from its own seed: the batch changes no text)."""
    answering = []
    for sample, browser in zip(samples, browsers, strict=True):
        if browser.end_reason is not None:
            sample.end_reason = browser.end_reason.value
        else:
            sample.end_reason = REPEATED_INVALID if stuck(sample) else EndReason.ACTION_LIMIT.value
        sample.quotes = browser.quotes
        if browser.quotes and browser.end_reason not in NO_ANSWER:
            sample.answer_prompt = browser.answer_prompt()
            answering.append((sample, browser))
    requests = [
        policy.answer_request(browser, settings, derive_seed(settings.seed, sample.episode_index, "answer"))
        for sample, browser in answering
    ]
    answered = [sample for sample, _ in answering]
    for sample, completion in zip(
        answered, _complete(policy.backend, requests, answered, on_tokens), strict=True
    ):
        sample.answer = completion.text.strip()
        sample.answer_token_ids = tuple(completion.details.get("token_ids", ()))


def _complete(
    backend: Backend,
    requests: list[CompletionRequest],
    samples: list[EpisodeSample],
    on_tokens: TokenCounter | None = None,
) -> list[Completion]:
    if not requests:
        return []
    started = time.perf_counter()
    # Only a caller that follows the tokens asks for them: a backend of one's own may not take the argument.
    completions = backend.complete(requests, on_tokens) if on_tokens else backend.complete(requests)
    elapsed = time.perf_counter() - started
    if len(completions) != len(requests):
        raise RuntimeError(
            f"{backend.name} returned {len(completions)} completions for {len(requests)} requests"
        )
    for sample, completion in zip(samples, completions, strict=True):
        sample.tokens_generated += completion.tokens
    for sample in {id(sample): sample for sample in samples}.values():  # once per episode, however many asks
        sample.model_seconds += elapsed
    return completions
