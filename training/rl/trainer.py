"""The RL trainer: each step samples episodes from the policy (``rollout.py``), scores them with the reward
model, and takes one optimizer step on the group-relative clipped policy gradient with a per-token KL
penalty to the frozen starting policy (``objective.py``; the method and the paper's settings beside ours:
docs/training.md, "Reinforcement learning").

Our own loop rather than TRL's ``GRPOTrainer``: the episodes are the browser's (a policy's commands and
answer, with the page text in the prompts only) and the sampling is ours (prefix reuse, grammar
constraints), which TRL would only call back into; ``bench/bench_rl.py`` compares the two on answer-only
episodes (docs/benchmarks.md)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from browser.engine.browser import Browser
from training.rl import state
from training.rl.config import BC, RLConfig
from training.rl.objective import (
    completion_logprobs,
    episode_kl,
    group_advantages,
    group_baselines,
    token_loss,
)
from training.rl.ranks import Ranks
from training.rl.rollout import Plan, Roller, Rollout
from training.rl.types import EpisodeReport, EpisodeTerms, RLQuestion
from training.runs.bc import fit_to_length, load_policy
from training.runs.hooks import Hooks, RunResult
from training.runs.runtime import save_model, set_threads
from training.runs.store import default_store, resolve_base_model
from training.sampling.best_of_n import RewardScorer
from training.sampling.local import LocalBackend
from training.sampling.policies import BCPolicy, PromptedPolicy

RL_SUMMARY_KIND = "rl"  # training.json "kind" of a policy an RL run saved
MAX_GRAD_NORM = 1.0


def train_rl(
    cfg: RLConfig,
    questions: Sequence[RLQuestion],
    hooks: Hooks | None = None,
    store: Path | None = None,
    browser_factory: Callable[[], Browser] | None = None,
) -> RunResult:
    """Train ``cfg.base_model`` against ``cfg.reward_model`` on ``questions``; the policy goes to
    ``cfg.output_dir`` (a Hugging Face folder + training.json with kind "rl", policy_format, config,
    base_model, reward_model, metrics). ``browser_factory`` makes a fresh browser for a browsing episode
    (required when cfg.episodes == "browse"). Progress: hooks.on_progress(step, steps, logs) once per
    step with logs {step, reward_mean, reward_std, kl, entropy, answer_tokens, valid_actions (browse
    only), loss, episodes, answered, seconds}; hooks.on_samples(step, [EpisodeReport]) once per step,
    every episode with its quotes and its terms of the objective (from which the logs are recomputed:
    docs/training.md, "Auditing a run");
    hooks.should_stop() after each step but the last. Raises ValueError on impossible input (no
    question with a reference for answer-only episodes, no browser factory for browsing, fewer questions a
    step than processes).

    Under ``accelerate launch`` or ``torchrun`` every process runs this with the same arguments and shares
    each step's questions (``training.rl.ranks``): the logs, the KL budget and a cancel are the whole
    step's, the first process alone calls the hooks and saves the policy, and the metrics add
    ``processes`` and the ``weights_sha256`` all of them ended with."""
    cfg.check()
    hooks = hooks or Hooks()
    plan = Plan(cfg, questions)
    if cfg.episodes != "answer" and browser_factory is None:
        raise ValueError("browsing episodes need a browser (a search source)")
    ranks = Ranks.start()
    ranks.share(range(cfg.questions_per_step))  # refuses a step too small to share, before any loading
    set_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    base_path = resolve_base_model(cfg.base_model, store or default_store())
    model, tokenizer = load_policy(base_path)
    model.to(ranks.device)
    model.eval()  # no dropout: the loss's probabilities must be the ones the episodes were sampled from
    reference = copy.deepcopy(model).requires_grad_(False)
    backend = LocalBackend.over(model, tokenizer)
    policy = BCPolicy(backend) if cfg.policy_format == BC else PromptedPolicy(backend)
    scorer = RewardScorer(cfg.reward_model, device=str(ranks.device))
    roller = Roller(cfg, policy, backend, scorer, browser_factory, ranks.before)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    resumed = state.Resumed(0, [])
    if cfg.state_dir:
        resumed = state.restore(Path(cfg.state_dir), model, reference, optimizer, ranks)
    history: list[dict[str, float]] = list(resumed.history)
    cancelled, stopped, step = False, "", resumed.step
    if resumed.step and ranks.main:
        hooks.on_resume(resumed.step, list(history))
    for step in range(resumed.step + 1, cfg.steps + 1):
        started = time.perf_counter()
        first, items = ranks.share(plan.for_step(step))
        rollout = roller.step(step, items, first)
        reports, actions = step_episodes(rollout, ranks)
        sampled = time.perf_counter()
        logs = {"step": float(step), "sample_seconds": sampled - started} | rollout_figures(reports, actions)
        within, terms = update(model, reference, optimizer, rollout, cfg, logs, ranks)
        for report, episode_terms in zip(reports, ranks.gather(terms), strict=True):
            report.terms = episode_terms
        logs["update_seconds"] = time.perf_counter() - sampled
        backend.forget_prompts()  # the cached keys and values are the old weights'
        logs["seconds"] = time.perf_counter() - started
        history.append(logs)
        if ranks.main:
            hooks.on_progress(step, cfg.steps, logs)
            hooks.on_samples(step, reports)
        if not within:
            stopped = "kl_budget"
            break
        if step < cfg.steps and ranks.main_says(ranks.main and hooks.should_stop()):
            cancelled = True
            break
        if cfg.state_dir and cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and step < cfg.steps:
            state.save(Path(cfg.state_dir), step, model, reference, optimizer, history, ranks)
    metrics = final_metrics(history, stopped)
    if ranks.count > 1:
        metrics |= {"processes": ranks.count, "weights_sha256": ranks.same_weights(model)}
    if not cancelled and ranks.main:
        summary = {
            "kind": RL_SUMMARY_KIND,
            "policy_format": cfg.policy_format,
            "config": cfg.to_dict(),
            "base_model": str(base_path),
            "reward_model": cfg.reward_model,
            "metrics": metrics,
        }
        save_model(model, tokenizer, Path(cfg.output_dir), summary)
    ranks.wait()  # the others return once the policy is saved
    updated = step - (stopped == "kl_budget")
    return RunResult(
        cfg.output_dir,
        updated,
        metrics,
        history,
        cancelled,
        train_examples=len(plan.items),
        resumed_from=resumed.step,
    )


def step_episodes(rollout: Rollout, ranks: Ranks) -> tuple[list[EpisodeReport], tuple[int, int]]:
    """Every process's episodes of the step, in step order, and its browsing actions (all, valid)."""
    shared = ranks.gather([(rollout.reports, rollout.actions, rollout.valid_actions)])
    reports = [report for part, _, _ in shared for report in part]
    return reports, (sum(part[1] for part in shared), sum(part[2] for part in shared))


def rollout_figures(reports: list[EpisodeReport], actions: tuple[int, int]) -> dict[str, float]:
    rewards = torch.tensor([report.reward for report in reports])
    answers = [r for r in reports if r.answer is not None]
    figures = {
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std()) if len(rewards) > 1 else 0.0,
        "episodes": float(len(reports)),
        "answered": len(answers) / len(reports),
        "answer_tokens": sum(r.answer_tokens for r in answers) / len(answers) if answers else 0.0,
    }
    taken, valid = actions
    if taken:
        figures["valid_actions"] = valid / taken
    return figures


def update(
    model: Any,
    reference: Any,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    cfg: RLConfig,
    logs: dict[str, float],
    ranks: Ranks,
) -> tuple[bool, list[EpisodeTerms]]:
    """``cfg.updates_per_step`` passes of the loss over the step's pairs in micro-batches, each pass one
    optimizer step; the first pass's figures (the policy that sampled: ratio 1) go into ``logs``, and each
    of this process's episodes' part in them into its EpisodeTerms (returned in rollout order). Not
    within (False), with no update made, when the episodes' KL is over ``cfg.kl_budget``: the run stops
    there. With several processes the loss is the whole step's: each divides its tokens' terms by the
    step's token count and the gradients are summed before the step; the figures are the whole step's."""
    device = next(model.parameters()).device
    advantages = group_advantages(
        torch.tensor(rollout.rewards), torch.tensor(rollout.groups), cfg.scale_rewards
    ).to(device)
    batches = shared_prompt_batches(rollout.pairs, cfg.max_length, cfg.micro_batch)
    own_tokens = sum(len(c) for batch in batches for c in batch.completions)
    tokens = max(1, int(ranks.sum(own_tokens)[0]))
    with torch.no_grad(), ranks.autocast():
        references = [_logprobs(reference, b, cfg.temperature)[0] for b in batches]
    olds: list[torch.Tensor] = []
    kl = torch.zeros(len(rollout.rewards), device=device)
    entropies = torch.zeros_like(kl)
    terms: list[EpisodeTerms] = []
    for update_pass in range(cfg.updates_per_step):
        optimizer.zero_grad(set_to_none=True)
        loss_total, entropy_total = 0.0, 0.0
        for index, (b, ref_logp) in enumerate(zip(batches, references, strict=True)):
            with ranks.autocast():
                logp, entropy = _logprobs(model, b, cfg.temperature)
            if update_pass == 0:
                olds.append(logp.detach())
                kl += episode_kl(logp.detach(), ref_logp, b.episodes.to(device), len(kl))
                entropies.index_add_(0, b.episodes.to(device), entropy)
                entropy_total += float(entropy.detach().sum())
            per_token = token_loss(
                logp, olds[index], ref_logp, advantages[b.episodes.to(device)], cfg.clip_epsilon, cfg.kl_coef
            )
            loss = per_token.sum() / tokens
            loss.backward()
            loss_total += float(loss.detach())
        if update_pass == 0:
            loss_sum, entropy_sum, kl_sum, episodes = ranks.sum(
                loss_total, entropy_total, float(kl.sum()), len(kl)
            )
            logs |= {"loss": loss_sum, "kl": kl_sum / episodes, "entropy": entropy_sum / tokens}
            terms = episode_terms(rollout, cfg, batches, advantages, kl, entropies, ranks)
            if cfg.kl_budget and logs["kl"] > cfg.kl_budget:  # the same figure, so the same stop, everywhere
                optimizer.zero_grad(set_to_none=True)
                return False, terms
        ranks.sum_gradients(model.parameters())
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        optimizer.step()
    return True, terms


def episode_terms(
    rollout: Rollout,
    cfg: RLConfig,
    batches: list[SharedPromptBatch],
    advantages: torch.Tensor,
    kl: torch.Tensor,
    entropies: torch.Tensor,
    ranks: Ranks,
) -> list[EpisodeTerms]:
    """Each of this process's episodes' part in the step's first pass, in rollout order; groups numbered
    among the whole step's (after the processes before this one: every process calls this)."""
    rewards, groups = torch.tensor(rollout.rewards), torch.tensor(rollout.groups)
    baselines, scales = group_baselines(rewards, groups, cfg.scale_rewards)
    counts = [0] * len(rollout.rewards)
    for batch in batches:
        for episode in batch.episodes.tolist():
            counts[episode] += 1
    first_group = ranks.before(rollout.group_count)
    return [
        EpisodeTerms(
            group=first_group + group,
            baseline=baseline,
            scale=scale,
            advantage=advantage,
            tokens=count,
            kl=episode_kl_sum,
            kl_penalty=cfg.kl_coef * episode_kl_sum,
            entropy=entropy,
        )
        for group, baseline, scale, advantage, count, episode_kl_sum, entropy in zip(
            rollout.groups,
            baselines.tolist(),
            scales.tolist(),
            advantages.tolist(),
            counts,
            kl.tolist(),
            entropies.tolist(),
            strict=True,
        )
    ]


@dataclass
class SharedPromptBatch:
    """Completions of one prompt (a micro-batch), and the episode of each of their tokens in order."""

    prompt: list[int]
    completions: list[list[int]]
    episodes: torch.Tensor


def shared_prompt_batches(
    pairs: Sequence[tuple[list[int], list[int], int]], max_length: int, micro_batch: int
) -> list[SharedPromptBatch]:
    """The step's (prompt, completion, episode) pairs as micro-batches of at most ``micro_batch``
    completions of the same prompt (a group's episodes share theirs), each fitted into ``max_length`` as
    BC fits an example: the completions keep at least 3/4 of the room, the prompt is cut in the middle to
    what the longest completion leaves."""
    by_prompt: dict[tuple[int, ...], list[tuple[list[int], int]]] = {}
    for prompt, completion, episode in pairs:
        if completion:
            by_prompt.setdefault(tuple(prompt), []).append((completion, episode))
    batches = []
    for prompt_key, members in by_prompt.items():
        for start in range(0, len(members), micro_batch):
            chunk = members[start : start + micro_batch]
            fitted = [fit_to_length(list(prompt_key), completion, max_length) for completion, _ in chunk]
            completions = [completion for _, completion in fitted]
            prompt = min((prompt for prompt, _ in fitted), key=len)  # room for the longest completion
            episodes = [episode for (_, episode), c in zip(chunk, completions, strict=True) for _ in c]
            batches.append(SharedPromptBatch(prompt, completions, torch.tensor(episodes)))
    return batches


def _logprobs(model: Any, batch: SharedPromptBatch, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    return completion_logprobs(model, batch.prompt, batch.completions, temperature)


def final_metrics(history: list[dict[str, float]], stopped: str) -> dict[str, Any]:
    if not history:
        return {}
    first, last = history[0], history[-1]
    return {
        "reward_first": first["reward_mean"],
        "reward_last": last["reward_mean"],
        "kl_last": last["kl"],
        "entropy_last": last["entropy"],
        "steps": len(history),
        "episodes": sum(entry["episodes"] for entry in history),
        "stopped": stopped,
    }
