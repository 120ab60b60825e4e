"""The RL objective as plain tensor functions (checked by hand-computed values: tests/test_rl_objective.py).

Group-relative policy optimisation (GRPO, DeepSeekMath; the form TRL's ``GRPOTrainer`` implements) with
WebGPT's per-token KL penalty to the starting policy:

- advantage of episode i in its group g:  A_i = r_i - mean_g(r)   (optionally / std_g(r));
- per token t of episode i:  ratio = pi(a_t) / pi_old(a_t),
  loss_t = -min(ratio * A_i, clip(ratio, 1 - eps, 1 + eps) * A_i) + beta * k3_t,
  k3_t = pi_ref(a_t) / pi(a_t) - log(pi_ref(a_t) / pi(a_t)) - 1   (an unbiased, never negative estimate of
  the KL to the reference policy, Schulman 2020);
- the step's loss is the sum of loss_t over every policy token of the step divided by their number (token
  level, as DAPO and TRL's default: no length bias).

The KL figure a run reports (and its budget is checked against) is the mean over episodes of sum_t k3_t
over the episode's own tokens: the KL per episode in nats (k3 rather than log pi - log pi_ref: both are
unbiased, k3 is never negative and varies less, so a budget is not crossed or met by noise).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache


def group_advantages(rewards: torch.Tensor, groups: torch.Tensor, scale: bool = False) -> torch.Tensor:
    """Each reward minus the mean of its group (``groups[i]``: the group of episode i), divided by the
    group's standard deviation (unbiased; 1 where it is 0) when ``scale``."""
    baseline, divisor = group_baselines(rewards, groups, scale)
    return (rewards - baseline) / divisor


def group_baselines(
    rewards: torch.Tensor, groups: torch.Tensor, scale: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per episode, what ``group_advantages`` makes of its reward: its group's mean reward (the baseline)
    and the divisor (the group's unbiased standard deviation when ``scale`` and it is not 0, else 1)."""
    count = torch.zeros(int(groups.max()) + 1, dtype=rewards.dtype).index_add_(
        0, groups, torch.ones_like(rewards)
    )
    total = torch.zeros_like(count).index_add_(0, groups, rewards)
    mean = total / count
    if not scale:
        return mean[groups], torch.ones_like(rewards)
    squares = torch.zeros_like(count).index_add_(0, groups, (rewards - mean[groups]) ** 2)
    std = (squares / (count - 1).clamp(min=1)).sqrt()
    std = torch.where(std > 0, std, torch.ones_like(std))
    return mean[groups], std[groups]


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref) from the sampled tokens' log-probabilities."""
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1


def token_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor,
    advantages: torch.Tensor,
    clip_epsilon: float,
    kl_coef: float,
) -> torch.Tensor:
    """The clipped policy-gradient loss plus the KL penalty, per token (all arguments per token: a
    token's advantage is its episode's)."""
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    surrogate = torch.minimum(ratio * advantages, clipped * advantages)
    return -surrogate + kl_coef * k3_kl(logp, ref_logp)


def episode_kl(
    logp: torch.Tensor, ref_logp: torch.Tensor, episodes: torch.Tensor, count: int
) -> torch.Tensor:
    """sum_t k3_t per episode (``episodes[t]``: the episode of token t)."""
    return torch.zeros(count, dtype=logp.dtype, device=logp.device).index_add_(
        0, episodes, k3_kl(logp, ref_logp)
    )


def completion_logprobs(
    model: Any, prompt: list[int], completions: Sequence[list[int]], temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (at ``temperature``, as sampled) of each completion's tokens after ``prompt``, and
    the entropy of the distribution each was drawn from, flattened in row order.

    The prompt is computed once for all the completions (a group's episodes share it; a browsing
    prompt is most of the sequence): its keys and values, with their gradients, are expanded to one row
    per completion, and only the completions run row by row. Equal, to float rounding, to running each
    whole sequence (tests/test_rl_objective.py), at 1/G of the prompt's cost."""
    device = next(model.parameters()).device
    rows = len(completions)
    cache = DynamicCache()
    head = prompt[:-1]  # the last prompt token is fed with the completions: it predicts their first token
    if head:
        model(input_ids=torch.tensor([head], device=device), cache=cache, use_cache=True, logits_to_keep=1)
        expanded = DynamicCache()
        for index, layer in enumerate(cache.layers):
            shape = (rows, *layer.keys.shape[1:])
            expanded.update(layer.keys.expand(shape), layer.values.expand(shape), index)
        cache = expanded
    width = max(len(c) for c in completions)
    inputs = torch.full((rows, width), prompt[-1], device=device)
    keep = torch.zeros((rows, width), dtype=torch.bool, device=device)
    for row, completion in enumerate(completions):
        tail = [prompt[-1], *completion[:-1]]
        inputs[row, : len(tail)] = torch.tensor(tail, device=device)
        keep[row, : len(completion)] = True
    # Right padding past a row's end is never attended to by its real tokens (causal), so no mask is needed.
    positions = torch.arange(len(head), len(head) + width, device=device).expand(rows, width)
    outputs = model(
        input_ids=inputs, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=keep
    )
    logits = outputs.logits.float().reshape(-1, outputs.logits.shape[-1]) / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    targets = torch.tensor([t for completion in completions for t in completion], device=device)
    chosen = log_probs.gather(1, targets[:, None]).squeeze(1)
    with torch.no_grad():  # a figure to report, not a term of the loss: no graph of the vocabulary's size
        entropy = -(log_probs.exp() * log_probs).sum(-1)
    return chosen, entropy
