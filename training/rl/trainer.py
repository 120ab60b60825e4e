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
from pathlib import Path
from typing import Any

import torch

from browser.engine.browser import Browser
from training.rl.config import BC, RLConfig
from training.rl.objective import completion_logprobs, episode_kl, group_advantages, token_loss
from training.rl.rollout import Plan, Roller, Rollout
from training.rl.types import RLQuestion
from training.runs.bc import IGNORE, fit_to_length, load_policy
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
    only), loss, episodes, answered, seconds}; hooks.on_samples(step, [EpisodeReport]) once per step;
    hooks.should_stop() after each step but the last. Raises ValueError on impossible input (no
    question with a reference for answer-only episodes, no browser factory for browsing)."""
    cfg.check()
    hooks = hooks or Hooks()
    plan = Plan(cfg, questions)
    if cfg.episodes != "answer" and browser_factory is None:
        raise ValueError("browsing episodes need a browser (a search source)")
    set_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    base_path = resolve_base_model(cfg.base_model, store or default_store())
    model, tokenizer = load_policy(base_path)
    model.eval()  # no dropout: the loss's probabilities must be the ones the episodes were sampled from
    reference = copy.deepcopy(model).requires_grad_(False)
    backend = LocalBackend.over(model, tokenizer)
    policy = BCPolicy(backend) if cfg.policy_format == BC else PromptedPolicy(backend)
    roller = Roller(cfg, policy, backend, RewardScorer(cfg.reward_model), browser_factory)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    history: list[dict[str, float]] = []
    cancelled, stopped, step = False, "", 0
    for step in range(1, cfg.steps + 1):
        started = time.perf_counter()
        rollout = roller.step(step, plan.for_step(step))
        logs = {"step": float(step)} | rollout_figures(rollout)
        within = update(model, reference, optimizer, rollout, cfg, tokenizer.pad_token_id, logs)
        backend.forget_prompts()  # the cached keys and values are the old weights'
        logs["seconds"] = time.perf_counter() - started
        history.append(logs)
        hooks.on_progress(step, cfg.steps, logs)
        hooks.on_samples(step, rollout.reports)
        if not within:
            stopped = "kl_budget"
            break
        if step < cfg.steps and hooks.should_stop():
            cancelled = True
            break
    metrics = final_metrics(history, stopped)
    if not cancelled:
        summary = {
            "kind": RL_SUMMARY_KIND,
            "policy_format": cfg.policy_format,
            "config": cfg.to_dict(),
            "base_model": str(base_path),
            "reward_model": cfg.reward_model,
            "metrics": metrics,
        }
        save_model(model, tokenizer, Path(cfg.output_dir), summary)
    updated = step - (stopped == "kl_budget")
    return RunResult(cfg.output_dir, updated, metrics, history, cancelled, train_examples=len(plan.items))


def rollout_figures(rollout: Rollout) -> dict[str, float]:
    rewards = torch.tensor(rollout.rewards)
    answers = [r for r in rollout.reports if r.answer is not None]
    figures = {
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std()) if len(rewards) > 1 else 0.0,
        "episodes": float(len(rollout.reports)),
        "answered": len(answers) / len(rollout.reports),
        "answer_tokens": sum(r.answer_tokens for r in answers) / len(answers) if answers else 0.0,
    }
    if rollout.actions:
        figures["valid_actions"] = rollout.valid_actions / rollout.actions
    return figures


def update(
    model: Any,
    reference: Any,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    cfg: RLConfig,
    pad_id: int,
    logs: dict[str, float],
) -> bool:
    """``cfg.updates_per_step`` passes of the loss over the step's pairs in micro-batches, each pass one
    optimizer step; the first pass's figures (the policy that sampled: ratio 1) go into ``logs``. False,
    with no update made, when the episodes' KL is over ``cfg.kl_budget``: the run stops there."""
    advantages = group_advantages(
        torch.tensor(rollout.rewards), torch.tensor(rollout.groups), cfg.scale_rewards
    )
    batches = [
        _batch(rollout.pairs[i : i + cfg.micro_batch], cfg.max_length, pad_id)
        for i in range(0, len(rollout.pairs), cfg.micro_batch)
    ]
    tokens = max(1, sum(int((b["targets"] != IGNORE).sum()) for b in batches))
    with torch.no_grad():
        references = [_logprobs(reference, b, cfg.temperature)[0] for b in batches]
    olds: list[torch.Tensor] = []
    kl = torch.zeros(len(rollout.rewards))
    for update_pass in range(cfg.updates_per_step):
        optimizer.zero_grad(set_to_none=True)
        loss_total, entropy_total = 0.0, 0.0
        for index, (b, ref_logp) in enumerate(zip(batches, references, strict=True)):
            logp, entropy = _logprobs(model, b, cfg.temperature)
            if update_pass == 0:
                olds.append(logp.detach())
                kl += episode_kl(logp.detach(), ref_logp, b["episodes"], len(kl))
                entropy_total += float(entropy.detach().sum())
            per_token = token_loss(
                logp, olds[index], ref_logp, advantages[b["episodes"]], cfg.clip_epsilon, cfg.kl_coef
            )
            loss = per_token.sum() / tokens
            loss.backward()
            loss_total += float(loss.detach())
        if update_pass == 0:
            logs |= {"loss": loss_total, "kl": float(kl.mean()), "entropy": entropy_total / tokens}
            if cfg.kl_budget and logs["kl"] > cfg.kl_budget:
                optimizer.zero_grad(set_to_none=True)
                return False
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        optimizer.step()
    return True


def _logprobs(model: Any, batch: dict[str, torch.Tensor], temperature: float) -> tuple[torch.Tensor, Any]:
    return completion_logprobs(
        model, batch["input_ids"], batch["attention_mask"], batch["targets"], temperature
    )


def _batch(pairs: Sequence[tuple[list[int], list[int], int]], max_length: int, pad_id: int) -> dict:
    """Right-padded ids, the mask, the targets (the next token where it is the policy's, else IGNORE)
    and the episode of each policy token, in the order ``completion_logprobs`` returns them."""
    rows = [fit_to_length(prompt, completion, max_length) for prompt, completion, _ in pairs]
    width = max(len(prompt) + len(completion) for prompt, completion in rows)
    ids = torch.full((len(rows), width), pad_id)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    targets = torch.full((len(rows), width), IGNORE)
    episodes = []
    for row, ((prompt_ids, completion_ids), (_, _, episode)) in enumerate(zip(rows, pairs, strict=True)):
        sequence = prompt_ids + completion_ids
        ids[row, : len(sequence)] = torch.tensor(sequence)
        mask[row, : len(sequence)] = 1
        # position t predicts token t + 1: the completion's tokens are predicted from len(prompt) - 1 on
        start = len(prompt_ids) - 1
        targets[row, start : start + len(completion_ids)] = torch.tensor(completion_ids)
        episodes += [episode] * len(completion_ids)
    return {"input_ids": ids, "attention_mask": mask, "targets": targets, "episodes": torch.tensor(episodes)}


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
