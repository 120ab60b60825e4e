"""Sampling core (issue 12): real episodes in the FreshWiki environment driven by a tiny random Llama with
the real SmolLM2 tokenizer through the local backend. Django-free: the browser is built from the index."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from browser.engine.browser import Browser
from browser.engine.commands import parse_command
from browser.engine.settings import BrowserSettings
from browser.search.local import LocalIndex
from tests.tiny_models import tiny_llama
from training.sampling.constraints import ends_at_a_word_boundary
from training.sampling.episode import (
    REPEATED_INVALID,
    EpisodeSample,
    SamplingSettings,
    derive_seed,
    run_episode,
    run_episodes,
)
from training.sampling.local import LocalBackend
from training.sampling.policies import BCPolicy, PromptedPolicy, constraint_for
from training.sampling.types import Completion, CompletionRequest, Constraint

QUESTIONS = (
    "Who won the 2022 AFL Grand Final?",
    "What happened to the Crimean Bridge in October 2022?",
    "Which party won the 2022 Hungarian parliamentary election?",
)
# A small window and quote budget keep observations short, so the tiny model's steps are fast.
ENV = BrowserSettings(window_lines=6, max_quote_chars=300)


def seeded_tiny_llama(folder: Path) -> Path:
    """The tiny random Llama of ``tiny_llama_dir``, but with fixed weights: what a random model happens
    to write (how soon it ends, which commands) is then the same on every run, whatever ran before."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return tiny_llama(folder)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return seeded_tiny_llama(tmp_path_factory.mktemp("tiny-llama-seeded"))


@pytest.fixture(scope="module")
def backend(tiny_dir):
    return LocalBackend(tiny_dir, device="cpu")


@pytest.fixture(scope="module")
def index(freshwiki_index_dir):
    return LocalIndex.open(freshwiki_index_dir / "freshwiki")


def browser(index) -> Browser:
    return Browser(index, ENV)


def replay_is_valid(sample: EpisodeSample, index, max_actions: int) -> None:
    """Replaying the sample's commands in a fresh browser gives the same observations and verdicts."""
    replay = Browser(index, replace(ENV, max_actions=max_actions))
    replay.reset(sample.question)
    for step in sample.steps:
        assert replay.observation() == step.observation
        assert replay.step(step.command).valid == step.valid


def test_bc_episode_runs_to_the_action_limit_and_counts_invalid_commands(backend, index):
    sample = run_episode(
        BCPolicy(backend), browser(index), QUESTIONS[0], SamplingSettings(max_actions=4, max_command_tokens=8)
    )
    assert len(sample.steps) == 4 and sample.end_reason == "action_limit"
    # A random model writes nonsense: every step is an invalid action, explained in the next observation.
    assert sample.invalid_actions == sum(not s.valid for s in sample.steps) > 0
    invalid = next(i for i, s in enumerate(sample.steps) if not s.valid)
    assert sample.steps[invalid].message.startswith("Invalid action")
    if invalid + 1 < len(sample.steps):
        assert "♦Error\nInvalid action" in sample.steps[invalid + 1].observation
    assert sample.steps[0].observation.startswith(f"♦Question\n{QUESTIONS[0]}\n♦Quotes")
    assert sample.steps[0].observation.endswith("♦Actions left: 4\n♦Next action")  # the run's limit
    assert sample.tokens_generated == sum(s.tokens for s in sample.steps) > 0
    assert sample.answer is None  # no quote, no answer
    assert sample.model_seconds > 0 and sample.env_seconds > 0
    replay_is_valid(sample, index, 4)


def test_constrained_commands_are_always_valid_and_quotes_verbatim(backend, index):
    """With the grammar constraint every action of a random model is valid (100%); without, few are."""
    run = SamplingSettings(
        max_actions=8, max_command_tokens=16, max_answer_tokens=8, seed=3, constrain_commands=True
    )
    samples = run_episodes(BCPolicy(backend), [browser(index) for _ in QUESTIONS], list(QUESTIONS), run)
    steps = [s for sample in samples for s in sample.steps]
    assert all(step.valid for step in steps), [s.command for s in steps if not s.valid]
    kinds = {parse_command(s.command).kind for s in steps}
    assert len(kinds) >= 3  # it really browses: more than one kind of action
    free = run_episodes(
        BCPolicy(backend),
        [browser(index) for _ in QUESTIONS],
        list(QUESTIONS),
        SamplingSettings(max_actions=8, max_command_tokens=16, seed=3),
    )
    free_steps = [s for sample in free for s in sample.steps]
    valid_rate = sum(s.valid for s in free_steps) / len(free_steps)
    print(
        f"valid-action rate, tiny random model: constrained 100% of {len(steps)}, "
        f"free {valid_rate:.0%} of {len(free_steps)}"
    )
    assert valid_rate < 1
    for sample in samples:
        replay_is_valid(sample, index, run.max_actions)
        for quote in sample.quotes:
            assert quote.extract.strip()
        if sample.end_reason in ("answer", "action_limit", "quote_limit") and sample.quotes:
            assert sample.answer is not None and sample.answer_prompt
        if sample.end_reason in ("nonsense", "controversial"):
            assert sample.answer is None


def test_seeded_runs_reproduce_and_differ_across_seeds(backend, index):
    run = SamplingSettings(max_actions=5, max_command_tokens=16, seed=11, constrain_commands=True)
    first = run_episode(BCPolicy(backend), browser(index), QUESTIONS[1], run)
    again = run_episode(BCPolicy(backend), browser(index), QUESTIONS[1], run)
    assert first.steps == again.steps and first.answer == again.answer
    others = [
        run_episode(BCPolicy(backend), browser(index), QUESTIONS[1], replace(run, seed=seed)).commands
        for seed in (12, 13, 14)
    ]
    assert any(commands != first.commands for commands in others)
    assert derive_seed(11, 0, 1) == derive_seed(11, 0, 1) != derive_seed(11, 1, 0)


@pytest.mark.parametrize("kind", ["bc, three questions", "prompted, one question three times"])
def test_a_batch_of_episodes_equals_the_same_episodes_one_at_a_time(backend, index, kind):
    """Batch partners change nothing: not padding (three questions), nor computing the shared head of
    the prompts once for all rows (the system prompt and the first observation of one question)."""
    policy, questions = (
        (BCPolicy(backend), list(QUESTIONS))
        if kind.startswith("bc")
        else (PromptedPolicy(backend), [QUESTIONS[0]] * 3)
    )
    run = SamplingSettings(
        max_actions=5, max_command_tokens=16, max_answer_tokens=12, seed=5, constrain_commands=True
    )
    batched = run_episodes(policy, [browser(index) for _ in questions], questions, run)
    alone = [run_episode(policy, browser(index), q, run, episode_index=i) for i, q in enumerate(questions)]
    for b, a in zip(batched, alone, strict=True):
        assert (b.steps, b.answer, b.end_reason, b.tokens_generated) == (
            a.steps,
            a.answer,
            a.end_reason,
            a.tokens_generated,
        )
    assert len({tuple(s.commands) for s in batched}) > 1  # different episode indices, different episodes
    assert sum(s.steps[-1].tokens for s in batched) > 0


def test_a_stopped_batch_returns_the_episodes_that_ended_whole_and_the_others_unfinished(backend, index):
    """A cancel stops the stepping after a round: the episodes that had ended come back exactly as
    without the stop, those still browsing come back unfinished (their steps so far, no answer)."""
    run = SamplingSettings(
        max_actions=3, max_command_tokens=10, max_answer_tokens=8, seed=4, constrain_commands=True
    )
    questions = list(QUESTIONS)
    whole = run_episodes(BCPolicy(backend), [browser(index) for _ in questions], questions, run)
    rounds = []

    def cancel_after_the_first_round(samples, running: int) -> bool:
        rounds.append(running)
        return True

    stopped = run_episodes(
        BCPolicy(backend),
        [browser(index) for _ in questions],
        questions,
        run,
        on_round=cancel_after_the_first_round,
    )
    assert rounds == [1]  # seed 4: two episodes end at their first action, one browses on
    assert [s.finished for s in stopped] == [True, False, True]
    for cut, full in zip(stopped, whole, strict=True):
        if cut.finished:
            assert (cut.steps, cut.end_reason, cut.answer) == (full.steps, full.end_reason, full.answer)
        else:
            assert cut.steps == full.steps[:1] and len(full.steps) > 1
            assert (cut.end_reason, cut.answer, cut.quotes) == ("", None, ())


def test_an_episode_is_whole_by_the_end_of_its_round_and_tokens_are_heard_as_they_come(backend, index):
    """Issue 24: answers were written only once every episode of a batch had stopped browsing, so a job
    could store nothing before then; and nothing was heard within a round. Now the episodes that ended
    in a round are answered in it (the same answers: each has its own seed), and ``on_tokens`` hears
    every generated token as it comes."""
    run = SamplingSettings(
        max_actions=3, max_command_tokens=10, max_answer_tokens=8, seed=4, constrain_commands=True
    )
    questions = list(QUESTIONS)
    after_round_one, heard = [], []

    def look(samples, running: int) -> bool:
        if not after_round_one:
            after_round_one.extend((s.finished, s.end_reason, s.answer) for s in samples)
        return False

    policy = BCPolicy(backend)
    samples = run_episodes(
        policy, [browser(index) for _ in questions], questions, run, on_round=look, on_tokens=heard.append
    )
    assert [finished for finished, *_ in after_round_one] == [True, False, True]  # seed 4, as above
    for (finished, end_reason, answer), sample in zip(after_round_one, samples, strict=True):
        assert not finished or (end_reason, answer) == (sample.end_reason, sample.answer)
    assert sum(heard) == sum(sample.tokens_generated for sample in samples)
    assert len(heard) > sum(len(sample.steps) for sample in samples[1:2])  # a report per decoding step


def test_reused_keys_and_values_change_no_text(backend, tiny_dir, index):
    """The head of a prompt is taken from an earlier prompt that starts the same way (the previous
    observation; the same observation for the second of two samples); the texts are those of a backend
    that recomputes everything."""
    cold = LocalBackend(tiny_dir, device="cpu", prompt_cache=0)
    env = browser(index)
    env.reset(QUESTIONS[0])
    env.step("Search AFL Grand Final 2022 Geelong Sydney Swans premiership match, the result and the crowd")
    first = BCPolicy(backend).command_request(env, SamplingSettings(), seed=1)
    env.step("Scrolled down 1")
    second = [BCPolicy(backend).command_request(env, SamplingSettings(), seed=s) for s in (2, 3)]
    backend.complete([first])
    warm = backend.complete(second)
    a, b = backend.encode(first), backend.encode(second[0])
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert common >= 32 and [c.details["cached_prompt_tokens"] for c in warm] == [common, len(b) - 1]
    recomputed = cold.complete(second)
    assert [c.details["cached_prompt_tokens"] for c in recomputed] == [0, 0]
    assert [c.text for c in warm] == [c.text for c in recomputed]
    assert [c.text for c in warm] == [c.text for c in (cold.complete([r])[0] for r in second)]


def test_a_batch_larger_than_the_prompt_cache_still_reuses_each_rows_previous_prompt(tiny_dir, index):
    """The cache keeps at least the last batch: with room for one prompt, two episodes stepped together
    both start their next prompt from their own previous one (evicting while putting, the first row's
    new entry pushed out the second row's old one), and the texts are those computed from scratch."""
    small = LocalBackend(tiny_dir, device="cpu", prompt_cache=1)
    cold = LocalBackend(tiny_dir, device="cpu", prompt_cache=0)
    envs = [browser(index) for _ in QUESTIONS[:2]]
    for env, question in zip(envs, QUESTIONS, strict=False):
        env.reset(question)
        env.step(f"Search {question}")
    small.complete([BCPolicy(small).command_request(env, SamplingSettings(), seed=1) for env in envs])
    for env in envs:
        env.step("Scrolled down 1")
    second = [BCPolicy(small).command_request(env, SamplingSettings(), seed=2) for env in envs]
    warm = small.complete(second)
    assert all(c.details["cached_prompt_tokens"] >= 32 for c in warm)
    assert len(small.prompts.entries) == 2  # trimmed back to one batch, not growing without bound
    assert [c.text for c in warm] == [c.text for c in cold.complete(second)]


def test_prompted_policy_chat_with_demonstrations(backend, index):
    policy = PromptedPolicy(backend, demonstrations=[("♦Question\nWhat is X?\n♦Next action", "Search X")])
    env = browser(index)
    env.reset(QUESTIONS[2])
    request = policy.command_request(env, SamplingSettings(), seed=1)
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "user"]
    assert (
        "Clicked on link <id>" in request.messages[0].content
        and request.messages[-1].content == env.observation()
    )
    sample = run_episode(
        policy,
        browser(index),
        QUESTIONS[2],
        SamplingSettings(max_actions=3, max_command_tokens=12),
    )
    # Constrained by default for prompted models (not for BC): a random model's actions are all valid.
    assert (
        request.constraint.commands
        and not BCPolicy(backend).command_request(env, SamplingSettings(), 1).constraint.commands
    )
    assert len(sample.steps) <= 3 and all(step.valid for step in sample.steps)


def test_bc_prompt_is_the_bare_observation(backend, index):
    env = browser(index)
    env.reset(QUESTIONS[0])
    request = BCPolicy(backend).command_request(env, SamplingSettings(), seed=0)
    assert request.prompt == env.observation() and request.messages is None
    assert (
        backend.encode(request) == backend.tokenizer(env.observation(), add_special_tokens=False)["input_ids"]
    )


def test_constraint_forms_follow_the_browser_state(index):
    env = browser(index)
    env.reset(QUESTIONS[0])
    blank = constraint_for(env, SamplingSettings(constrain_commands=True))
    assert (
        "Back" not in blank.forms and "End: Answer" not in blank.forms and "Quote: <text>" not in blank.forms
    )
    env.step("Search AFL Grand Final")
    results = constraint_for(env, SamplingSettings(constrain_commands=True))
    assert "Clicked on link <id>" in results.forms and results.link_ids and results.quote_source


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_guided_prompted_model_searches_spans_of_the_question_and_quotes_before_the_end(
    backend, index, seed
):
    """Prompted models get the guided grammar: no declining, no scrolling a blank page, queries and find
    texts that are whole-word spans of the question (and, below, with two actions left and no quote yet
    only a quote)."""
    question = QUESTIONS[seed]
    # Room for a random model to spell "Clicked on link 12" a character at a time, or a long span of the
    # question: a command cut short by the token limit is the one way a constrained command can still be
    # invalid or end inside a word (seed 1 did at 24 tokens once search snippets stopped repeating titles).
    settings = SamplingSettings(max_actions=5, max_command_tokens=40, max_answer_tokens=4, seed=seed)
    sample = run_episode(PromptedPolicy(backend), browser(index), question, settings)
    assert all(step.valid for step in sample.steps)
    assert parse_command(sample.steps[0].command).kind not in ("scroll_down", "scroll_up", "top")
    for step in sample.steps:
        command = parse_command(step.command)
        assert step.command not in ("End: Nonsense", "End: Controversial")
        if command.kind in ("search", "find"):
            assert ends_at_a_word_boundary(question, command.argument), step.command
    unguided = constraint_for(_at_limit(index), settings, default=True)
    assert unguided.search_source is None and "Top" in unguided.forms  # BC and explicit settings: not guided


def _at_limit(index) -> Browser:
    env = browser(index)
    env.settings = replace(ENV, max_actions=5)
    env.reset(QUESTIONS[0])
    env.step("Search AFL Grand Final")
    env.step("Clicked on link 0")
    env.step("Top")
    return env


def test_the_guided_grammar_at_two_actions_left_allows_only_a_quote(index):
    env = _at_limit(index)
    assert env.actions_left == 2 and env.page.lines and not env.quotes
    guided = constraint_for(env, SamplingSettings(), default=True, guided=True)
    assert guided.forms == ("Quote: <text>",) and guided.search_source == QUESTIONS[0]
    start = browser(index)
    start.reset(QUESTIONS[0])
    blank = constraint_for(start, SamplingSettings(), default=True, guided=True)
    assert "Search <query>" in blank.forms and not {"Top", "Scrolled down <1|2|3>"} & set(blank.forms)


def test_the_guided_grammar_does_not_repeat_a_search_or_scroll_up_from_the_top(backend, index):
    env = browser(index)
    env.reset(QUESTIONS[0])
    env.step("Search AFL Grand Final")
    env.step("Clicked on link 0")
    guided = constraint_for(env, SamplingSettings(), default=True, guided=True)
    assert guided.repeats == {"Search AFL Grand Final"} and env.top == 0
    assert not {"Top", "Scrolled up <1|2|3>"} & set(guided.forms) and "Scrolled down <1|2|3>" in guided.forms
    assert not backend.table.allowed(guided, "Search AFL Grand Final")[1]  # written before: not again
    assert (
        backend.table.allowed(guided, "Search AFL Grand Final?")[1]
        and backend.table.allowed(guided, "Back")[1]
    )
    env.step("Scrolled down 1")
    assert "Top" in constraint_for(env, SamplingSettings(), default=True, guided=True).forms
    # The whole tail of the question was searched: the token that would end it there (and so repeat the
    # search) is no longer offered; spans that can still go on are.
    env.step("Search Grand Final?")
    guided = constraint_for(env, SamplingSettings(), default=True, guided=True)
    table = backend.table
    tail = {table.texts[i] for i in table.allowed(guided, "Search Grand Final")[0].nonzero()[:, 0]}
    assert "?" not in tail and table.allowed(guided, "Search Grand Final")[1]
    unguided = replace(guided, repeats=frozenset())
    assert "?" in {table.texts[i] for i in table.allowed(unguided, "Search Grand Final")[0].nonzero()[:, 0]}
    env.step("Search Grand Final")  # now both ways to end after " Final" were searched: not " Final" either
    guided = constraint_for(env, SamplingSettings(), default=True, guided=True)
    after_grand = {table.texts[i] for i in table.allowed(guided, "Search Grand")[0].nonzero()[:, 0]}
    assert " Final" not in after_grand and " Final" in {
        table.texts[i] for i in table.allowed(unguided, "Search Grand")[0].nonzero()[:, 0]
    }


def test_a_guided_query_ends_only_on_a_whole_word_of_the_question(backend):
    table = backend.table
    guided = Constraint(commands=True, forms=("Search <query>",), search_source=QUESTIONS[0])
    assert table.allowed(guided, "Search AFL Grand")[1] and table.allowed(guided, "Search 2022 AFL")[1]
    assert not table.allowed(guided, "Search AFL Gra")[1] and not table.allowed(guided, "Search FL Grand")[1]
    mask, _ = table.allowed(guided, "Search AFL Grand")
    assert all("AFL Grand" + table.texts[i] in QUESTIONS[0] for i in mask.nonzero().flatten().tolist())
    assert ends_at_a_word_boundary("Who won?", "won?") and ends_at_a_word_boundary("a b", "a b")
    assert not ends_at_a_word_boundary("Who won?", "wo")


def test_a_random_model_with_no_end_token_stops_at_its_limit_and_on_stop_strings(backend):
    out = backend.complete(
        [
            CompletionRequest(prompt="Hello", max_new_tokens=5, seed=1),
            CompletionRequest(prompt="Hello there, a longer prompt", max_new_tokens=9, seed=2, temperature=0),
        ]
    )
    assert [c.tokens for c in out] == [5, 9] and [c.finish_reason for c in out] == ["length", "length"]
    cut = backend.complete(
        [CompletionRequest(prompt="Hello", max_new_tokens=5, seed=1, stop=(out[0].text[2:4],))]
    )[0]
    assert (
        cut.finish_reason == "stop" and out[0].text.startswith(cut.text) and len(cut.text) < len(out[0].text)
    )


@pytest.fixture(scope="module")
def table(backend):
    return backend.table


words = st.sampled_from(["the", "Bridge", "won", "2022", "final", "élection", "a", "is", ",", ".", "x"])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(page=st.lists(words, min_size=5, max_size=60).map(" ".join), seed=st.integers(0, 2**31))
def test_constrained_quotes_are_verbatim_spans_of_random_pages(backend, page, seed):
    """Whatever the page, a quote written under the constraint is a substring of it: when the grammar
    makes the model quote, and when it writes free text that happens to become a quote."""
    quote_only = Constraint(commands=True, quote_source=page, forms=("Quote: <text>",))
    free = Constraint(quote_source=page)
    forced, loose = backend.complete(
        [
            CompletionRequest(prompt="Quote the page.", max_new_tokens=12, seed=seed, constraint=quote_only),
            CompletionRequest(prompt="Quote: ", max_new_tokens=12, seed=seed, constraint=free),
        ]
    )
    assert forced.text.startswith("Quote: ") and forced.text[len("Quote: ") :] in page
    assert parse_command(forced.text).argument  # a complete, non-blank quote
    if loose.text.startswith("Quote: "):
        assert loose.text[len("Quote: ") :] in page


def test_token_table_grammar_basics(table):
    c = Constraint(commands=True, link_ids=(0, 12), forms=("Clicked on link <id>", "Top"))
    mask, can_end = table.allowed(c, "Clicked on link 1")
    allowed = {table.texts[i] for i in mask.nonzero().flatten().tolist()}
    assert allowed == {"2"} and not can_end
    assert table.allowed(c, "Clicked on link 12")[1] and table.allowed(c, "Top")[1]
    start = {table.texts[i] for i in table.allowed(c, "")[0].nonzero().flatten().tolist()}
    assert start and all("Clicked on link ".startswith(t) or "Top".startswith(t) for t in start)


def test_real_smollm2_prompted_runs_a_short_episode(tmp_path, index):
    """The default model (SmolLM2-135M-Instruct, converted from its wheel into a fresh store) browses two
    constrained steps and, if it quoted, answers."""
    from training.runs.config import SMOLLM2
    from training.runs.store import resolve_base_model

    real = LocalBackend(resolve_base_model(SMOLLM2, tmp_path / "store"), device="cpu")
    run = SamplingSettings(max_actions=2, max_command_tokens=16, max_answer_tokens=24, seed=1)
    sample = run_episode(PromptedPolicy(real), browser(index), QUESTIONS[0], run)
    print(f"SmolLM2: {sample.commands} -> {sample.answer!r} ({sample.tokens_generated} tokens)")
    assert 1 <= len(sample.steps) <= 2 and all(step.valid for step in sample.steps)
    assert sample.tokens_generated > 0 and sample.model_seconds > 0


class Scripted:
    """A backend that writes the given texts in turn, whatever it is asked (a stuck or a wandering policy)."""

    name = "scripted"

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.seeds = texts, []

    def complete(self, requests, on_tokens=None) -> list[Completion]:
        self.seeds += [request.seed for request in requests]
        return [Completion(self.texts[(len(self.seeds) - 1) % len(self.texts)], 3, "stop") for _ in requests]


def test_the_same_invalid_command_twice_in_a_row_ends_the_episode_with_its_reason(index):
    stuck = Scripted(["Jump to the end"])
    sample = run_episode(BCPolicy(stuck), browser(index), QUESTIONS[0], SamplingSettings(max_actions=6))
    assert [step.valid for step in sample.steps] == [False, False]
    assert sample.end_reason == REPEATED_INVALID and sample.answer is None
    assert len(set(stuck.seeds)) == 2  # a seed of its own at each step: the repeat is the policy's
    # Two invalid commands in turn, or a valid one between repeats, are not stuck: the limit ends them.
    for texts in (["Jump to the end", "Fly away"], ["Jump to the end", "Search Crimean Bridge"]):
        wandering = run_episode(
            BCPolicy(Scripted(texts)), browser(index), QUESTIONS[0], SamplingSettings(max_actions=6)
        )
        assert len(wandering.steps) == 6 and wandering.end_reason == "action_limit"
        assert any(step.valid for step in wandering.steps) == texts[1].startswith("Search")
