"""The endpoint backend against a real model server: ``transformers serve`` running a tiny random Llama in
the converted SmolLM2 layout (tests/servers.py). Completions and chats, usage, stop strings and seeds as a
real server answers them; episodes and a whole sampling run (the job, its stored samples and its page)
through ``EndpointBackend``. The scripted fake (test_sampling_endpoint.py) is left for the faults a real
server does not produce: 429, 5xx, malformed answers, timeouts, echoed keys."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from django.urls import reverse

from browser.engine.browser import Browser
from browser.search.local import LocalIndex
from tests.servers import ServedModel
from tests.test_sampling_core import ENV, QUESTIONS
from tests.test_sampling_jobs import questions
from training.models import RunStatus, Sample
from training.sampling.endpoint import EndpointBackend
from training.sampling.endpoints import EndpointConfig
from training.sampling.episode import SamplingSettings, run_episodes
from training.sampling.jobs import run_sampling_job
from training.sampling.policies import PromptedPolicy
from training.sampling.runs import QuestionSet, SamplingRequest, request_sampling
from training.sampling.types import Completion, CompletionRequest, Message, TokenCounter

pytestmark = pytest.mark.worker  # one server per test process, these tests on one xdist worker

CHAT = (Message("system", "You browse the web."), Message("user", "Who won the 2022 AFL Grand Final?"))


def served(server: ServedModel, kind: str = "transformers", **options) -> EndpointBackend:
    return EndpointBackend(
        server.base_url, server.model, server=kind, max_retries=1, backoff_s=0.01, timeout_s=60, **options
    )


def texts(backend: EndpointBackend, seeds: Sequence[int], temperature: float = 0.8) -> list[str]:
    requests = [
        CompletionRequest(messages=CHAT, max_new_tokens=6, temperature=temperature, seed=seed)
        for seed in seeds
    ]
    return [completion.text for completion in backend.complete(requests)]


def test_prompts_and_chats_come_back_with_usage_in_order(transformers_server):
    backend = served(transformers_server, max_parallel=3)
    prompt = CompletionRequest(prompt="Question: capital of France?\nAction:", max_new_tokens=5, seed=1)
    chats = [CompletionRequest(messages=CHAT, max_new_tokens=4, seed=seed) for seed in (2, 3)]
    heard: list[int] = []
    completions = backend.complete([prompt, *chats], on_tokens=heard.append)

    assert all(
        c.finish_reason == "length" and c.tokens == r.max_new_tokens
        for c, r in zip(completions, [prompt, *chats], strict=True)
    )
    assert all(c.prompt_tokens > 0 and not c.details["usage_estimated"] for c in completions)
    assert completions[1].prompt_tokens > 30  # the chat template's system and user turns, not the bare text
    assert heard == [c.tokens for c in completions]  # each completion's tokens as it is collected
    # The same requests one at a time: the batch came back in the order of its requests.
    assert [backend.complete([r])[0].text for r in (prompt, *chats)] == [c.text for c in completions]
    assert all(c.details["constraint"] == "none" for c in completions)  # transformers serve has no grammars


def test_a_stop_string_ends_the_completion_on_the_server(transformers_server):
    backend = served(transformers_server)
    [free] = backend.complete([CompletionRequest(messages=CHAT, max_new_tokens=12, seed=5)])
    stop = free.text.strip()[3:5]  # two characters the model writes after its first few
    assert len(stop) == 2, free.text
    [stopped] = backend.complete([CompletionRequest(messages=CHAT, max_new_tokens=12, seed=5, stop=(stop,))])
    assert stopped.finish_reason == "stop" and stop not in stopped.text
    assert free.text.startswith(stopped.text) and stopped.tokens < free.tokens


def test_the_seed_decides_the_text_at_a_temperature(transformers_server):
    """Issue 28: a converted folder's generation config does not sample, so `transformers serve` ignored
    the temperature and every seed gave the same greedy text, and a policy repeated one invalid action to
    the limit. Asked for sampling (``server: transformers``), one seed gives one text, others others."""
    backend = served(transformers_server)
    sampled = texts(backend, [1, 1, 2, 3])
    assert sampled[0] == sampled[1] and len(set(sampled[1:])) == 3, sampled
    assert len(set(texts(backend, [1, 2, 3], temperature=0))) == 1  # temperature 0 stays greedy
    # What the platform sent before: the standard fields only, and the server decodes greedily.
    assert len(set(texts(served(transformers_server, kind="openai"), [1, 2, 3]))) == 1


class Recording:
    """A backend that passes requests to another one and keeps them (to read the seeds sent)."""

    def __init__(self, backend: EndpointBackend) -> None:
        self.backend, self.name, self.requests = backend, backend.name, []

    def complete(
        self, requests: Sequence[CompletionRequest], on_tokens: TokenCounter | None = None
    ) -> list[Completion]:
        self.requests.extend(requests)
        return self.backend.complete(requests, on_tokens)


def test_episodes_on_a_real_server_are_not_locked_into_one_invalid_action(
    transformers_server, freshwiki_index_dir
):
    """The tiny random model writes no valid command: each episode runs to its limit on invalid actions,
    every request with a seed of its own (by episode and action), so no two actions of an episode repeat
    one text; and the same seed gives the same episodes."""
    index = LocalIndex.open(freshwiki_index_dir / "freshwiki")
    settings = SamplingSettings(max_actions=4, max_command_tokens=6, max_answer_tokens=6, seed=11)

    def sample() -> tuple[list[list[str]], Recording]:
        backend = Recording(served(transformers_server))
        episodes = run_episodes(
            PromptedPolicy(backend), [Browser(index, ENV) for _ in range(2)], QUESTIONS[:2], settings
        )
        return [episode.commands for episode in episodes], backend

    commands, backend = sample()
    seeds = [request.seed for request in backend.requests]
    assert len(seeds) == len(set(seeds)) == 8  # 2 episodes x 4 actions, no answer (no quote)
    for episode in commands:
        assert len(episode) == 4 and len(set(episode)) == 4, episode
    assert sample()[0] == commands


@pytest.mark.django_db
def test_a_sampling_run_on_transformers_serve_is_stored_and_reported(
    transformers_server, alice, freshwiki, settings, client_for
):
    settings.SAMPLING_ENDPOINTS = {
        "serve": EndpointConfig(
            "serve",
            transformers_server.base_url,
            transformers_server.model,
            server="transformers",
            timeout_s=60,
        )
    }
    questions(2)
    values = {
        "n": 2,
        "max_actions": 3,
        "max_command_tokens": 6,
        "max_answer_tokens": 6,
        "examples": 0,
        "seed": 2,
    }
    request = SamplingRequest(backend="serve", questions=QuestionSet(dataset="demo"), settings=values)
    run = run_sampling_job(request_sampling(alice, request, queue=False).pk)

    assert run.status == RunStatus.DONE, run.error
    assert run.policy_name == f"serve:{transformers_server.model}" and run.episodes_done == 4
    samples = list(Sample.objects.filter(run=run).select_related("episode"))
    assert len(samples) == 4 and all(s.episode.actions.count() == s.actions == 3 for s in samples)
    commands = [list(s.episode.actions.values_list("command", flat=True)) for s in samples]
    assert all(len(set(episode)) == 3 for episode in commands), commands
    assert len({tuple(episode) for episode in commands}) == 4  # the n samples of a question differ too
    actions, invalid = run.metrics["actions"], run.metrics["invalid_actions"]
    assert run.metrics["constraints"] == {"none": {"actions": actions, "valid": actions - invalid}}
    html = client_for(alice).get(reverse("training:sampling_run", args=[run.pk])).content.decode()
    assert "Valid actions on serve" in html and "<td>none</td>" in html
