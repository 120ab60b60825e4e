"""Reinforcement learning against a reward model (WebGPT section 3.2): group-relative policy-gradient
updates with a per-token KL penalty to the starting policy, on answer-only and browsing episodes."""
