"""What a policy asks a model backend for, and what it gets back. Every backend (local transformers, an
OpenAI-compatible endpoint) implements ``Backend.complete`` over a batch of requests, so the episode loop
can send all episodes that are at the same step at once and the backend decides how to batch them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]
# Told how many tokens were just generated, while a batch is still being completed: a job's live figure
# (one round of a CPU model can take half a minute; the tokens move every second meanwhile).
TokenCounter = Callable[[int], None]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class Constraint:
    """What the next completion may be, for backends that can enforce it while decoding (the local one);
    others ignore it and the environment judges the result (an invalid action, counted and explained).

    ``commands``: the text must be one of the command forms valid on the current observation (the Table 1
    forms, link ids on the page, scroll amounts, ``End: ...``). ``quote_source``: while the text is a
    ``Quote: ...`` command, what follows ``Quote: `` must stay a span of this page text (GopherCite's
    constrained sampling), so quotes are verbatim by construction. ``link_ids``: the ids that exist.
    ``forms``: the entries of ``browser.engine.commands.COMMAND_FORMS`` that are valid actions here (e.g. no
    "Back" without a previous page, no "End: Answer" without a quote); empty means all of them.
    ``search_source``: when set, a ``Search`` query or a ``Find in page`` text must be a whole-word span of
    this text (the question), as quotes are spans of the page. ``repeats``: complete commands that may not
    be written again (a guided policy's past searches and quotes: the same text gives the same page)."""

    commands: bool = False
    quote_source: str | None = None
    link_ids: tuple[int, ...] = ()
    forms: tuple[str, ...] = ()
    search_source: str | None = None
    repeats: frozenset[str] = frozenset()


@dataclass(frozen=True)
class JsonSchema:
    """Structured output: the completion should be one JSON value matching ``schema``. A server that
    constrains decoding to a JSON schema is asked to (``dialects.py``: vLLM, llama.cpp, TGI); other backends
    (hosted APIs, ``transformers serve``, the local one) ignore it, so the caller parses and validates the
    text either way. ``name``: what OpenAI's ``json_schema`` form calls it (letters, digits, _ and -)."""

    name: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class CompletionRequest:
    """One completion. Exactly one of ``prompt`` (raw text, as a BC checkpoint was trained: the bare
    observation or answer prompt) and ``messages`` (a chat, for a prompted instruct model) is set.
    ``seed`` makes sampling reproducible: the same request with the same seed gives the same text on the
    same backend and hardware. ``stop``: strings that end the completion (not included in the text).
    ``constraint`` (a browser command or quote) and ``json_schema`` (a structured answer) are the two
    kinds of constrained decoding; a request asks for at most one."""

    max_new_tokens: int
    temperature: float = 0.8
    seed: int = 0
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    stop: tuple[str, ...] = ()
    constraint: Constraint | None = None
    json_schema: JsonSchema | None = None

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("a completion request has either a prompt or messages, not both or neither")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if self.temperature < 0:
            raise ValueError("temperature must be at least 0")
        if self.constraint is not None and self.json_schema is not None:
            raise ValueError("a completion request has a command constraint or a JSON schema, not both")


@dataclass(frozen=True)
class Completion:
    """The generated text (stop string excluded), how many tokens it took, and why it ended:
    ``"stop"`` (a stop string or end of sequence) or ``"length"`` (``max_new_tokens`` reached)."""

    text: str
    tokens: int
    finish_reason: Literal["stop", "length"]
    prompt_tokens: int = 0
    details: dict = field(default_factory=dict)  # backend-specific facts (e.g. cached prompt tokens)


class Backend(Protocol):
    """A model that completes text. ``complete`` returns one completion per request, in order; it raises
    ``BackendError`` with a message a researcher can act on when the model cannot answer. ``on_tokens``,
    when given, hears the tokens generated as they come (in the calling thread), summing to the
    completions' ``tokens``."""

    name: str

    def complete(
        self, requests: Sequence[CompletionRequest], on_tokens: TokenCounter | None = None
    ) -> list[Completion]: ...


class BackendError(RuntimeError):
    """The backend could not complete (unreachable, refused, malformed answer after retries): the message
    says what happened and what to check."""
