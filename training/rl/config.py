"""What an RL run is told: plain values only (stored as JSON on the run), each number with its range.

Defaults are the paper's where it gives one (WebGPT section 3.2 and appendix E: a KL coefficient of 0.02 to
the BC policy, 15 answer-only episodes per browsing episode, sampling temperature 0.8) and small-scale
elsewhere, so that a run on the CPU defaults (SmolLM2-135M, the demo reward model) ends in minutes.
Nothing here loads torch: the web app imports it to check a request."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from training.runs.config import SMOLLM2, Bound, StoredSettings

ANSWER, BROWSE = "answer", "browse"
EPISODE_KINDS = (ANSWER, BROWSE)
PROMPTED, BC = "prompted", "bc"  # how the policy is asked (training.sampling.policies)
POLICY_FORMATS = (PROMPTED, BC)


@dataclass
class RLConfig(StoredSettings):
    # Filled in by the job, never by whoever asks for the run.
    output_dir: str = ""  # where the trained policy folder is written
    base_model: str = SMOLLM2  # the starting policy: a preset name or a local model folder
    policy_format: str = PROMPTED  # "prompted" (chat, the instruct default) or "bc" (raw BC prompts)
    reward_model: str = ""  # a reward-model folder (training.runs.reward)
    state_dir: str = ""  # where checkpoints to resume from are kept ("": none are saved)

    # What an episode is. "answer": the prompt is a question with the quotes of a finished episode or
    # answer, the completion is the answer. "browse": the policy browses the text environment (commands
    # and answer are its tokens, pages are not), then answers; each browsing episode with quotes is
    # followed by ``answers_per_browse`` answer-only episodes on its quotes (the paper: 15).
    episodes: str = ANSWER
    answers_per_browse: int = 15
    max_actions: int = 10  # browsing actions per episode (the paper drew 20-100; small for the CPU)

    steps: int = 20  # optimizer steps
    questions_per_step: int = 2  # prompts (answer) or questions (browse) per step
    group_size: int = 4  # episodes per prompt: the advantage is an episode's reward minus its group's mean
    learning_rate: float = 1e-5
    kl_coef: float = 0.02  # beta: the per-token KL penalty to the starting policy
    kl_budget: float = 0.0  # stop once the mean KL per episode (nats) exceeds this; 0 = no budget
    clip_epsilon: float = 0.2  # the policy ratio's clip range
    updates_per_step: int = 1  # passes over each step's episodes (more than 1: the clip matters)
    # Divide advantages by the group's standard deviation (GRPO's default). Reward models differ in scale
    # (the demo's, after 20 steps, spreads a group's answers by about 0.01; the paper's by about 1): scaled,
    # the KL coefficient weighs the same against the reward whatever the model's scale.
    scale_rewards: bool = True
    no_answer_reward: float = -1.0  # the reward of an episode that ends without an answer
    temperature: float = 0.8
    max_answer_tokens: int = 64
    max_command_tokens: int = 32
    max_length: int = 512  # tokens of prompt + completion in the loss; prompts are cut in the middle
    micro_batch: int = 4  # sequences per forward/backward pass (memory), gradients accumulated
    threads: int = 0  # CPU threads; 0 = torch's default
    seed: int = 0
    # Steps between checkpoints a run resumes from after a crash (policy, optimizer, random states, the
    # step and its figures; the frozen reference policy once); 0: none.
    checkpoint_every: int = 10
    # How the worker runs it (training.runs.processes): processes sharing each step's questions, and how
    # often the sweeper resumes it when its worker dies.
    processes: int = 1
    resume_attempts: int = 0

    def check(self) -> None:
        """Raise ValueError naming the first impossible setting and the range it must be in."""
        if not self.output_dir:
            raise ValueError("output_dir: required")
        if not self.reward_model:
            raise ValueError("reward_model: required")
        if self.episodes not in EPISODE_KINDS:
            raise ValueError(f"episodes: expected one of {', '.join(EPISODE_KINDS)}, not {self.episodes!r}")
        if self.policy_format not in POLICY_FORMATS:
            raise ValueError(f"policy_format: expected one of {', '.join(POLICY_FORMATS)}")
        for name, bound in RL_BOUNDS.items():
            bound.check(name, getattr(self, name))
        if self.processes > self.questions_per_step:
            raise ValueError(
                f"processes: at most questions_per_step ({self.questions_per_step}): each process samples "
                f"whole groups of its own questions, not {self.processes}"
            )


RL_BOUNDS: dict[str, Bound] = {
    "answers_per_browse": Bound(0, 256),
    "max_actions": Bound(1, 1_000),
    "steps": Bound(1, 1_000_000),
    "questions_per_step": Bound(1, 4_096),
    "group_size": Bound(2, 256),  # one episode has no group to compare with
    "learning_rate": Bound(0, 1, low_open=True, high_open=True),
    "kl_coef": Bound(0, 100),
    "kl_budget": Bound(0, 1_000_000),
    "clip_epsilon": Bound(0, 10, low_open=True),
    "updates_per_step": Bound(1, 64),
    "no_answer_reward": Bound(-1_000, 1_000),
    "temperature": Bound(0, 10, low_open=True),  # sampling must be random for a policy gradient
    "max_answer_tokens": Bound(1, 4_096),
    "max_command_tokens": Bound(1, 1_024),
    "max_length": Bound(32, 32_768),
    "micro_batch": Bound(1, 4_096),
    "threads": Bound(0, 1_024),
    "seed": Bound(0, 2**32 - 1),
    "checkpoint_every": Bound(0, 1_000_000),
    "processes": Bound(1, 1_024),
    "resume_attempts": Bound(0, 100),
}
# Filled in by the job from the registry and the model store; a request may set the rest.
RL_JOB_SETTINGS = frozenset({"output_dir", "state_dir", "base_model", "policy_format", "reward_model"})
RL_SETTABLE = tuple(f.name for f in fields(RLConfig) if f.name not in RL_JOB_SETTINGS)


def saved_policy_format(folder: Path) -> str:
    """How a saved policy is prompted, from its training.json: an RL policy names its format (that of the
    policy it started from); a BC model (or a folder without one, registered by hand) takes raw BC
    prompts."""
    path = folder / "training.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    if summary.get("kind") == "rl":
        return BC if summary.get("policy_format") == BC else PROMPTED
    return BC
