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

from typing import Any

import torch


def group_advantages(rewards: torch.Tensor, groups: torch.Tensor, scale: bool = False) -> torch.Tensor:
    """Each reward minus the mean of its group (``groups[i]``: the group of episode i), divided by the
    group's standard deviation (unbiased; 1 where it is 0) when ``scale``."""
    count = torch.zeros(int(groups.max()) + 1, dtype=rewards.dtype).index_add_(
        0, groups, torch.ones_like(rewards)
    )
    total = torch.zeros_like(count).index_add_(0, groups, rewards)
    mean = total / count
    advantages = rewards - mean[groups]
    if not scale:
        return advantages
    squares = torch.zeros_like(count).index_add_(0, groups, advantages**2)
    std = (squares / (count - 1).clamp(min=1)).sqrt()
    std = torch.where(std > 0, std, torch.ones_like(std))
    return advantages / std[groups]


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
    return torch.zeros(count, dtype=logp.dtype).index_add_(0, episodes, k3_kl(logp, ref_logp))


def completion_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (at ``temperature``, as sampled) of the completion tokens and the entropy of the
    distribution they were drawn from, flattened over the batch in row order. ``targets`` (batch, length):
    the token each position is followed by where that token is the policy's, else -100. Only those
    positions are projected onto the vocabulary (``logits_to_keep`` as a mask): a browsing prompt is most of
    the sequence, and the output layer over every position would be most of the cost."""
    keep = targets != -100
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep)
    logits = outputs.logits.float() / temperature
    logits = logits.reshape(-1, logits.shape[-1])
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(1, targets[keep][:, None]).squeeze(1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return chosen, entropy
