"""The RL objective against values computed by hand (training/rl/objective.py; docs/training.md)."""

from __future__ import annotations

import math

import pytest
import torch

from training.rl.objective import (
    completion_logprobs,
    episode_kl,
    group_advantages,
    k3_kl,
    token_loss,
)


def test_the_advantage_is_the_reward_minus_its_groups_mean():
    rewards = torch.tensor([1.0, 3.0, 2.0, -1.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    # group 0: mean 2 -> -1, 1, 0; group 1: mean 0 -> -1, 0, 1
    assert group_advantages(rewards, groups).tolist() == [-1.0, 1.0, 0.0, -1.0, 0.0, 1.0]


def test_scaled_advantages_divide_by_the_groups_sample_standard_deviation():
    rewards = torch.tensor([1.0, 3.0, 5.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1])
    # group 0: deviations -1, 1, std sqrt((1 + 1) / 1) = sqrt 2; group 1: all equal, std 0 -> divide by 1
    scaled = group_advantages(rewards, groups, scale=True).tolist()
    assert scaled == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2), 0.0, 0.0])


def test_groups_need_not_be_contiguous_or_equal_in_size():
    rewards = torch.tensor([4.0, 0.0, 2.0, 10.0])
    groups = torch.tensor([1, 0, 1, 0])  # group 0: 0, 10 (mean 5); group 1: 4, 2 (mean 3)
    assert group_advantages(rewards, groups).tolist() == [1.0, -5.0, -1.0, 5.0]


def test_k3_is_the_kl_estimate_by_hand_and_zero_where_the_policies_agree():
    logp = torch.tensor([math.log(0.5), math.log(0.2), math.log(0.3)])
    ref = torch.tensor([math.log(0.25), math.log(0.2), math.log(0.6)])
    # r = ref/pi: 0.5, 1, 2 -> k3 = r - 1 - log r
    expected = [0.5 - 1 - math.log(0.5), 0.0, 2 - 1 - math.log(2)]
    assert k3_kl(logp, ref).tolist() == pytest.approx(expected)
    assert all(value >= 0 for value in k3_kl(logp, ref).tolist())


def test_k3_averages_to_the_true_kl_over_samples_from_the_policy():
    pi = torch.tensor([0.7, 0.2, 0.1])
    ref = torch.tensor([0.4, 0.4, 0.2])
    true_kl = float((pi * (pi / ref).log()).sum())
    # the expectation under pi, exactly: sum_a pi(a) k3(a)
    expected = float((pi * k3_kl(pi.log(), ref.log())).sum())
    assert expected == pytest.approx(true_kl)


def test_the_token_loss_clips_the_ratio_on_the_side_the_advantage_pushes():
    old = torch.log(torch.tensor([0.5, 0.5, 0.5, 0.5]))
    new = torch.log(torch.tensor([0.75, 0.75, 0.25, 0.25]))  # ratios 1.5, 1.5, 0.5, 0.5
    advantages = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss = token_loss(new, old, new, advantages, clip_epsilon=0.2, kl_coef=0.0).tolist()
    # min(ratio * A, clip(ratio) * A): A=+1, r=1.5 -> 1.2; A=-1, r=1.5 -> -1.5; A=+1, r=0.5 -> 0.5;
    # A=-1, r=0.5 -> -0.8. The loss is minus that.
    assert loss == pytest.approx([-1.2, 1.5, -0.5, 0.8])


def test_the_kl_penalty_adds_beta_times_k3_per_token():
    logp = torch.tensor([math.log(0.5)])
    ref = torch.tensor([math.log(0.25)])
    loss = token_loss(logp, logp, ref, torch.tensor([2.0]), clip_epsilon=0.2, kl_coef=0.02)
    # ratio 1: -A; plus 0.02 * (0.5 - 1 - log 0.5)
    assert loss.item() == pytest.approx(-2.0 + 0.02 * (0.5 - 1 - math.log(0.5)))


def test_the_gradient_of_the_loss_at_ratio_one_is_the_policy_gradient():
    logp = torch.tensor([math.log(0.4), math.log(0.1)], requires_grad=True)
    advantages = torch.tensor([3.0, -2.0])
    token_loss(logp, logp.detach(), logp.detach(), advantages, 0.2, 0.0).sum().backward()
    # d/dlogp of -ratio * A at ratio 1 is -A
    assert logp.grad.tolist() == pytest.approx([-3.0, 2.0])


def test_episode_kl_sums_each_episodes_tokens():
    logp = torch.log(torch.tensor([0.5, 0.5, 0.5]))
    ref = torch.log(torch.tensor([0.25, 0.5, 1.0]))
    per_token = k3_kl(logp, ref).tolist()
    kl = episode_kl(logp, ref, torch.tensor([1, 0, 1]), 3).tolist()
    assert kl == pytest.approx([per_token[1], per_token[0] + per_token[2], 0.0])


def test_completion_logprobs_computes_the_shared_prompt_once_and_equals_whole_sequences(tiny_llama_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32).eval()
    prompt = [5, 17, 300, 42, 9]
    completions = [[11, 12, 13], [7], [2000, 3, 4, 5]]
    logp, entropy = completion_logprobs(model, prompt, completions, temperature=0.5)
    expected_logp, expected_entropy = [], []
    with torch.no_grad():
        for completion in completions:
            sequence = torch.tensor([prompt + completion])
            logits = model(input_ids=sequence).logits[0, len(prompt) - 1 : -1].float() / 0.5
            log_probs = torch.log_softmax(logits, -1)
            expected_logp += log_probs.gather(1, torch.tensor(completion)[:, None]).squeeze(1).tolist()
            expected_entropy += (-(log_probs.exp() * log_probs).sum(-1)).tolist()
    assert logp.tolist() == pytest.approx(expected_logp, abs=1e-4)
    assert entropy.tolist() == pytest.approx(expected_entropy, abs=1e-4)

    # and the gradient flows into the prompt's computation once per completion: equal to the sum of the
    # whole sequences' gradients
    model.zero_grad()
    completion_logprobs(model, prompt, completions, 0.5)[0].sum().backward()
    shared = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    for completion in completions:
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1] / 0.5
        torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(completion)[:, None]).sum().backward()
    for mine, whole in zip(shared, (p.grad for p in model.parameters()), strict=True):
        assert torch.allclose(mine, whole, atol=1e-4)
