"""The RL trainer (being written): see ``train_rl``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from browser.engine.browser import Browser
from training.rl.config import RLConfig
from training.rl.types import RLQuestion
from training.runs.hooks import Hooks, RunResult

RL_SUMMARY_KIND = "rl"  # training.json "kind" of a policy an RL run saved


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
    raise NotImplementedError
