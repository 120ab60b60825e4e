"""One step's episodes, sampled from the policy being trained and scored by the reward model.

An episode's tokens are the policy's own: each browsing command and the answer, each as a (prompt,
completion) pair: the prompt encoded as the policy is asked (``training.sampling.policies``: raw BC prompts
or the prompted model's chat), the completion as sampled (an answer-only episode's answer) or, where a stop
string cut it (a command) or the environment holds only its text (a browsing episode's answer), as BC
encodes one (its text's tokens, then end of sequence); page text is only ever prompt. The loss runs on
those pairs (``training.rl.trainer``)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from browser.engine.browser import Browser
from browser.engine.observation import format_answer_prompt
from browser.engine.page import Quote
from training.rl.config import ANSWER, RLConfig
from training.rl.types import EpisodeReport, RLQuestion
from training.sampling.best_of_n import RewardScorer
from training.sampling.episode import EpisodeSample, SamplingSettings, derive_seed, run_episodes
from training.sampling.local import LocalBackend
from training.sampling.types import Completion


@dataclass
class Rollout:
    """Episode e has ``rewards[e]``, group ``groups[e]`` and report ``reports[e]``; ``pairs`` are the
    (prompt ids, completion ids, episode) the loss runs over."""

    rewards: list[float] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    reports: list[EpisodeReport] = field(default_factory=list)
    pairs: list[tuple[list[int], list[int], int]] = field(default_factory=list)
    actions: int = 0
    valid_actions: int = 0

    def add(self, report: EpisodeReport, group: int) -> int:
        self.reports.append(report)
        self.rewards.append(report.reward)
        self.groups.append(group)
        return len(self.reports) - 1

    @property
    def group_count(self) -> int:
        return max(self.groups) + 1 if self.groups else 0


class Plan:
    """What each step works on, drawn in a seeded shuffled order and cycled: (question, quotes) prompts for
    answer-only runs, questions for browsing runs."""

    def __init__(self, cfg: RLConfig, questions: Sequence[RLQuestion]) -> None:
        self.per_step = cfg.questions_per_step
        if cfg.episodes == ANSWER:
            items: list[Any] = [(q, quotes) for q in questions for quotes in q.references if quotes]
            if not items:
                raise ValueError(
                    "no question of the run has a reference (an answer or finished episode with quotes): "
                    "answer-only episodes need one; choose browsing episodes or questions with answers"
                )
        else:
            items = list(questions)
            if not items:
                raise ValueError("no questions to browse")
        random.Random(cfg.seed).shuffle(items)  # noqa: S311 (an order of work, nothing secret)
        self.items = items

    def for_step(self, step: int) -> list[Any]:
        start = (step - 1) * self.per_step
        return [self.items[(start + k) % len(self.items)] for k in range(self.per_step)]


class Roller:
    """Samples a step's episodes with ``policy`` (a BC or prompted policy over ``backend``, which wraps the
    model being trained) and scores them with ``scorer``."""

    def __init__(
        self,
        cfg: RLConfig,
        policy: Any,
        backend: LocalBackend,
        scorer: RewardScorer,
        browser_factory: Callable[[], Browser] | None,
        before: Callable[[int], int] = lambda count: 0,
    ) -> None:
        self.cfg, self.policy, self.backend, self.scorer = cfg, policy, backend, scorer
        self.browser_factory = browser_factory
        self.before = before  # training.rl.ranks.Ranks.before: the processes before this one (none alone)
        self.eos = backend.tokenizer.eos_token_id

    def settings(self, step: int) -> SamplingSettings:
        return SamplingSettings(
            temperature=self.cfg.temperature,
            max_actions=self.cfg.max_actions,
            max_command_tokens=self.cfg.max_command_tokens,
            max_answer_tokens=self.cfg.max_answer_tokens,
            seed=derive_seed(self.cfg.seed, step, "rl-step"),
        )

    def step(self, step: int, items: list[Any], first: int = 0) -> Rollout:
        """The episodes of ``items``, the step's items from index ``first`` on (a process's share,
        ``training.rl.ranks``): episodes are numbered, and seeded, by their place among the whole step's,
        so each process samples what a lone process would for the same items."""
        rollout = Rollout()
        if self.cfg.episodes == ANSWER:
            prompts = [(question, quotes, self.cfg.group_size) for question, quotes in items]
            self.answer_groups(rollout, prompts, step, first * self.cfg.group_size)
        else:
            self.browse(rollout, items, step, first)
        return rollout

    def answer_groups(
        self,
        rollout: Rollout,
        prompts: list[tuple[RLQuestion, tuple[Quote, ...], int]],
        step: int,
        first_episode: int = 0,
        seeds: str = "answer",
    ) -> None:
        """Answer-only episodes: ``size`` answers to each (question, quotes), one group per prompt, all
        decoded as one batch; the first is the step's answer-only episode ``first_episode``. ``seeds`` names
        their seeds' series: a browsing step's answer-only episodes take their own, apart from the browsing
        episodes' answers (``run_episodes`` seeds episode i's answer with "answer"), which the same number
        and quotes would otherwise repeat word for word."""
        settings = self.settings(step)
        requests, texts, where = [], [], []
        for question, quotes, size in prompts:
            text = format_answer_prompt(question.text, quotes)
            group = rollout.group_count + len({g for g, _, _ in where})
            for _ in range(size):
                seed = derive_seed(settings.seed, first_episode + len(requests), seeds)
                requests.append(self.policy.answer_request_for(text, settings, seed))
                texts.append(text)
                where.append((group, question, tuple(quotes)))
        completions = self.backend.complete(requests)
        answers = [completion.text.strip() for completion in completions]
        rewards = self.scorer.score(texts, answers)
        for request, completion, answer, reward, (group, question, quotes) in zip(
            requests, completions, answers, rewards, where, strict=True
        ):
            report = EpisodeReport(
                question.id, question.text, ANSWER, answer, reward, completion.tokens, quotes=quotes
            )
            episode = rollout.add(report, group)
            rollout.pairs.append((self.backend.encode(request), self.completion_ids(completion), episode))

    def browse(self, rollout: Rollout, questions: list[RLQuestion], step: int, first: int = 0) -> None:
        """Browsing episodes, ``group_size`` per question (one group each), then for each that gathered
        quotes a group of ``answers_per_browse`` answer-only episodes on them (WebGPT's mix). ``first``: the
        step index of the first question."""
        if self.browser_factory is None:
            raise ValueError("browsing episodes need a browser (a search source)")
        settings, size = self.settings(step), self.cfg.group_size
        browsers = [self.browser_factory() for _ in range(len(questions) * size)]
        samples = run_episodes(
            self.policy,
            browsers,
            [q.text for q in questions for _ in range(size)],
            settings,
            reference_answers=[list(q.reference_answers) for q in questions for _ in range(size)],
            first_index=first * size,
        )
        rewards = self.scorer.score_samples(samples)
        extra = []
        for index, (sample, reward) in enumerate(zip(samples, rewards, strict=True)):
            question = questions[index // size]
            self.add_browsing(rollout, sample, question, reward, group=index // size, settings=settings)
            if sample.quotes and self.cfg.answers_per_browse >= 2:
                extra.append((question, sample.quotes, self.cfg.answers_per_browse))
        # The answer-only episodes follow those of the processes before this one (a call every process makes).
        extra_before = self.before(len(extra))
        if extra:
            first_extra = extra_before * self.cfg.answers_per_browse
            self.answer_groups(rollout, extra, step, first_extra, seeds="answer-on-quotes")

    def add_browsing(
        self,
        rollout: Rollout,
        sample: EpisodeSample,
        question: RLQuestion,
        reward: float | None,
        group: int,
        settings: SamplingSettings,
    ) -> None:
        answer_tokens = 0
        pairs = []
        for action in sample.steps:
            request = self.policy.command_request_for(action.observation, settings, 0)
            pairs.append(
                (self.backend.encode(request), list(action.token_ids) or self.text_ids(action.command))
            )
        if sample.answer is not None:
            request = self.policy.answer_request_for(sample.answer_prompt, settings, 0)
            answer_ids = list(sample.answer_token_ids) or self.text_ids(sample.answer)
            answer_tokens = len(answer_ids)
            pairs.append((self.backend.encode(request), answer_ids))
        report = EpisodeReport(
            question.id,
            question.text,
            "browse",
            sample.answer,
            reward if reward is not None else self.cfg.no_answer_reward,
            answer_tokens,
            commands=sample.commands,
            invalid_actions=sample.invalid_actions,
            quotes=sample.quotes,  # what its answer was prompted with
        )
        episode = rollout.add(report, group)
        rollout.pairs += [(prompt, completion, episode) for prompt, completion in pairs]
        rollout.actions += len(sample.steps)
        rollout.valid_actions += len(sample.steps) - sample.invalid_actions

    def completion_ids(self, completion: Completion) -> list[int]:
        """The tokens the policy sampled, as the local backend gives them (``details["token_ids"]``); from a
        backend that does not, as BC encodes a completion: its text's tokens, then end of sequence (a
        completion cut at the token limit has none)."""
        if "token_ids" in completion.details:
            return list(completion.details["token_ids"])
        ids = self.backend.tokenizer(completion.text, add_special_tokens=False)["input_ids"]
        return [*ids, self.eos] if completion.finish_reason == "stop" else ids

    def text_ids(self, text: str) -> list[int]:
        """A command or answer of a browsing episode whose sampled tokens the backend did not give: the text
        the environment took, re-tokenised and ended."""
        return self.backend.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.eos]
