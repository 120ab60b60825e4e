"""The two kinds of judge, each turning asks (one item in one order) into verdicts.

- ``RewardJudge``: a registered reward model's scores (``reward``); an item's answers are scored once and
  both orders read the same scores.
- ``EndpointJudge``: a language model behind an endpoint of ``SAMPLING_ENDPOINTS``, sent the versioned
  prompt (``prompts``) through ``EndpointBackend``; each request carries the verdict's JSON schema, which
  the backend sends where the endpoint's kind of server constrains decoding to one (vLLM, llama.cpp's
  server, TGI: ``training.sampling.dialects``), otherwise the output is parsed. Either way the verdict is
  checked like a human submission (``verdicts``); an unreadable output is a verdict with its error, and
  only a server that cannot answer at all (``BackendError``, after the backend's retries) stops the run.

Seeds: each request's seed is derived from the run's seed, the item and the order (``derived_seed``), so a
run reproduces and the two orders of an item are two draws, not one repeated."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from annotation.feedback.validation import AnswerShape
from browser.engine.observation import format_answer_prompt
from browser.engine.page import Quote
from training.judging.outputs import ReadOutput, check_verdict, read_verdict
from training.judging.prompts import ShownItem, messages_for, verdict_schema
from training.judging.reward import reward_response
from training.sampling.types import Backend, CompletionRequest, JsonSchema


def derived_seed(seed: int, *parts: object) -> int:
    """A seed for one request, from the run's seed and what the request is about (stable across runs and
    machines: SHA-256, not Python's salted ``hash``)."""
    text = ":".join(str(part) for part in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class Ask:
    """One item in one order: the answers' ids in that order, and the item as shown."""

    item_id: int
    swapped: bool
    order: tuple[int, ...]
    shown: ShownItem
    shapes: tuple[AnswerShape, ...]
    always_required: tuple[str, ...]
    # Each answer's stored quotes and text, in ``order``: what a reward model reads.
    quotes: tuple[tuple[Any, ...], ...]
    texts: tuple[str, ...]


class RewardJudge:
    """Scores with a ``RewardScorer`` (``scorer.score(prompts, answers)``) and maps them (``reward``)."""

    def __init__(self, scorer: Any, tie_margin: float, much_margin: float) -> None:
        self.scorer, self.tie_margin, self.much_margin = scorer, tie_margin, much_margin

    def judge(self, asks: Sequence[Ask]) -> list[ReadOutput]:
        scores = self._scores(asks)
        verdicts = []
        for ask in asks:
            in_order = [scores[answer] for answer in ask.order]
            response, confidence = reward_response(
                ask.shown.template, in_order, self.tie_margin, self.much_margin
            )
            cleaned, error = check_verdict(
                ask.shown.template, ask.shown.preset, response, ask.shapes, ("overall",)
            )
            if cleaned is not None:
                # Validation fills the question flags in as unticked: a reward model never judged them.
                cleaned.pop("flags", None)
            raw = json.dumps({"scores": dict(zip(_slots(ask), in_order, strict=True))})
            details = {
                "scores": {str(answer): scores[answer] for answer in ask.order},
                "judged": sorted(response),  # the parts of a response it gives: ratings (overall) or ranks
            }
            verdicts.append(ReadOutput(cleaned, raw, error, confidence, details))
        return verdicts

    def _scores(self, asks: Sequence[Ask]) -> dict[int, float]:
        """Every answer of the asks scored once (both orders of an item share its answers)."""
        wanted: dict[int, tuple[str, str]] = {}
        for ask in asks:
            for answer, text, quotes in zip(ask.order, ask.texts, ask.quotes, strict=True):
                wanted.setdefault(answer, (format_answer_prompt(ask.shown.question, _quotes(quotes)), text))
        ids = list(wanted)
        rewards = self.scorer.score([wanted[i][0] for i in ids], [wanted[i][1] for i in ids])
        return dict(zip(ids, rewards, strict=True))


def _slots(ask: Ask) -> list[str]:
    return [answer.slot for answer in ask.shown.answers]


def _quotes(stored: Sequence[Any]) -> tuple[Quote, ...]:
    """An answer's stored quotes ({title, url, domain, extract}) as the reward model's prompt reads them."""
    return tuple(
        Quote(q.get("title", ""), q.get("url", ""), q.get("domain", ""), q.get("extract", ""))
        for q in stored
        if isinstance(q, dict)
    )


class EndpointJudge:
    """Asks a language model behind ``backend`` for verdicts, each request carrying its item's verdict
    schema (``CompletionRequest.json_schema``: sent where the server constrains decoding to one)."""

    def __init__(
        self, backend: Backend, prompt_version: str, *, temperature: float, max_tokens: int, seed: int
    ) -> None:
        self.backend, self.prompt_version = backend, prompt_version
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed

    def judge(self, asks: Sequence[Ask]) -> list[ReadOutput]:
        """One verdict per ask, in order; the asks with the same number of answers (the same schema) are
        sent together, in parallel up to the endpoint's ``max_parallel``."""
        verdicts: list[ReadOutput | None] = [None] * len(asks)
        groups: dict[int, list[int]] = {}
        for index, ask in enumerate(asks):
            groups.setdefault(len(ask.order), []).append(index)
        for indexes in groups.values():
            group = [asks[i] for i in indexes]
            for index, verdict in zip(indexes, self._judge_alike(group), strict=True):
                verdicts[index] = verdict
        return [verdict for verdict in verdicts if verdict is not None]

    def _judge_alike(self, asks: Sequence[Ask]) -> list[ReadOutput]:
        schema = JsonSchema("verdict", verdict_schema(asks[0].shown))
        requests = [
            CompletionRequest(
                max_new_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=derived_seed(self.seed, ask.item_id, "swapped" if ask.swapped else "drawn"),
                messages=messages_for(self.prompt_version, ask.shown),
                json_schema=schema,
            )
            for ask in asks
        ]
        verdicts = []
        for ask, request, completion in zip(asks, requests, self.backend.complete(requests), strict=True):
            details = {
                "seed": request.seed,
                "tokens": completion.tokens,
                "prompt_tokens": completion.prompt_tokens,
                "finish_reason": completion.finish_reason,
                "constraint": completion.details.get("constraint", "none"),
            }
            shown = ask.shown
            verdicts.append(
                read_verdict(
                    completion.text, shown.template, shown.preset, ask.shapes, ask.always_required, details
                )
            )
        return verdicts
