"""The local backend: a causal LM from disk with transformers, on CPU or CUDA, a batch at a time.

``complete`` encodes each request (chat requests through the tokenizer's chat template, raw prompts as BC
training tokenized them: no special tokens), prefills each prompt on its own from the longest head an
earlier prompt shares (the prompt cache: consecutive observations of an episode start with the same
question, quotes and past actions), then decodes all rows together from one left-padded KV cache. Each
row samples with its own ``torch.Generator`` seeded from its request, so a request with a seed gives the
same text whatever its batch partners are (up to float rounding between batch shapes). Constraints
(``constraints.py``) mask each row's logits before sampling; a ``json_schema`` is not enforced here (the
row reports "none" and the caller parses and validates the text, as with a server that takes no schema).

Measured on this 2-core CPU by ``bench/bench_sampling.py`` (SmolLM2-135M, prompted, 4 questions x best-of-4,
6 actions): 2.06x the wall time of a naive ``generate()`` loop (docs/benchmarks.md). Dynamic int8
quantisation of the linear layers halves prefill and triples decode speed but moves logits by up to ~8,
so it is not used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from training.runs.config import SMOLLM2
from training.runs.data import cut_middle
from training.runs.store import default_store, resolve_base_model
from training.sampling.constraints import ConstraintProcessor, TokenTable
from training.sampling.types import BackendError, Completion, CompletionRequest, Constraint, TokenCounter


class LocalBackend:
    """``model_dir``: a Hugging Face model folder (a registered checkpoint); None: the SmolLM2 default
    converted into the model store (``training/runs/store.py``). ``threads`` > 0 sets torch's CPU threads.
    ``prompt_cache``: how many recent prompts keep their keys and values (at least the last batch's; 0:
    none), so that the next observation of an episode (the same question, quotes and past actions at its
    head) only computes what changed."""

    name = "local"

    def __init__(
        self,
        model_dir: str | Path | None = None,
        device: str | None = None,
        threads: int = 0,
        store: Path | None = None,
        prompt_cache: int = 16,
    ) -> None:
        if threads > 0:
            torch.set_num_threads(threads)
        path = Path(model_dir) if model_dir else resolve_base_model(SMOLLM2, store or default_store())
        device_ = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device_).eval()
        self._use(model, AutoTokenizer.from_pretrained(path), prompt_cache)

    @classmethod
    def over(cls, model: Any, tokenizer: Any, prompt_cache: int = 16) -> LocalBackend:
        """A backend over a model already in memory: an RL run samples from the policy it trains (call
        ``forget_prompts`` after each update: cached keys and values are the old weights')."""
        backend = cls.__new__(cls)
        backend._use(model, tokenizer, prompt_cache)
        return backend

    def forget_prompts(self) -> None:
        self.prompts = PromptCache(self.prompts.size)

    def _use(self, model: Any, tokenizer: Any, prompt_cache: int) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        self.pad_id = (
            self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else self.tokenizer.eos_token_id
        )
        eos = self.model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = sorted({self.tokenizer.eos_token_id, *eos} - {None})
        self.prompts = PromptCache(prompt_cache)
        self.max_positions = getattr(self.model.config, "max_position_embeddings", None) or 2048
        self._table: TokenTable | None = None

    @property
    def table(self) -> TokenTable:
        """The vocabulary index for constraints, built on first use (~1 s for a 49k vocabulary)."""
        if self._table is None:
            self._table = TokenTable(self.tokenizer, self.model.config.vocab_size)
        return self._table

    def encode(self, request: CompletionRequest) -> list[int]:
        """The prompt's token ids, cut in the middle (as in training) when it would not fit with the
        completion in the model's context."""
        if request.messages is not None:
            chat = [{"role": m.role, "content": m.content} for m in request.messages]
            text = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        else:
            text = request.prompt
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return cut_middle(ids, max(1, self.max_positions - request.max_new_tokens))

    def complete(
        self, requests: Sequence[CompletionRequest], on_tokens: TokenCounter | None = None
    ) -> list[Completion]:
        if not requests:
            return []
        try:
            with torch.inference_mode():
                return self._generate(list(requests), on_tokens)
        except torch.OutOfMemoryError as exc:
            raise BackendError(
                f"the local model ran out of memory on a batch of {len(requests)}: {exc}"
            ) from exc

    def _generate(
        self, requests: list[CompletionRequest], on_tokens: TokenCounter | None = None
    ) -> list[Completion]:
        """Prefill the prompts, then one token per unfinished row per step until every row is done
        (``on_tokens`` hears each step's count).
        ``active``: the rows still decoding (indices into ``requests``); a finished row leaves the batch
        at once, so a short command does not pay for the longest one's remaining steps. ``ids`` (active,
        generated): their generated tokens; ``mask`` (active, longest prompt + generated): what each
        attends to (left padding excluded); ``logits`` (active, vocab): their next tokens."""
        prompts = [self.encode(request) for request in requests]
        cache, mask, positions, heads, logits = self._prefill(prompts)
        ids = torch.empty((len(prompts), 0), dtype=torch.long, device=self.device)  # generated tokens
        generators = [torch.Generator(device=self.device).manual_seed(r.seed) for r in requests]
        constraints = [
            r.constraint if r.constraint and (r.constraint.commands or r.constraint.quote_source) else None
            for r in requests
        ]
        generated: list[list[int]] = [[] for _ in requests]
        results: list[Completion | None] = [None] * len(requests)
        active = list(range(len(requests)))
        for _ in range(max(r.max_new_tokens for r in requests)):
            if any(constraints[row] for row in active):
                rows = [constraints[row] for row in active]
                logits = ConstraintProcessor(self.table, rows, 0, self.eos_ids)(ids, logits)
            tokens = []
            for place, row in enumerate(active):
                token = _sample(logits[place], requests[row].temperature, generators[row])
                tokens.append(token)
                generated[row].append(token)
                results[row] = self._finished(requests[row], generated[row], len(prompts[row]))
            if on_tokens is not None:
                on_tokens(len(tokens))
            keep = [place for place, row in enumerate(active) if results[row] is None]
            if not keep:
                break
            step = torch.tensor(tokens, device=self.device)[:, None]
            ids = torch.cat([ids, step], dim=1)
            mask = torch.cat([mask, torch.ones_like(step)], dim=1)
            positions = positions[:, -1:] + 1
            if len(keep) < len(active):  # drop the finished rows from the batch and its cache
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                ids, mask, positions, step = ids[index], mask[index], positions[index], step[index]
                active = [active[place] for place in keep]
            logits = (
                self.model(input_ids=step, attention_mask=mask, position_ids=positions, cache=cache)
                .logits[:, -1]
                .float()
            )
        finished = [
            r if r is not None else self._finished(q, g, len(p), force=True)
            for r, q, g, p in zip(results, requests, generated, prompts, strict=True)
        ]
        return [
            replace(c, details=c.details | {"cached_prompt_tokens": n, "constraint": constraint_kind(r)})
            for c, n, r in zip(finished, heads, constraints, strict=True)
            if c is not None
        ]

    def _prefill(
        self, prompts: list[list[int]]
    ) -> tuple[DynamicCache, torch.Tensor, torch.Tensor, list[int], torch.Tensor]:
        """Each prompt on its own, so no padding is computed (prompts of one batch differ a lot in what is
        new: a fresh page or one more past action), from the longest head an earlier prompt shares
        (the prompt cache: the previous observation of the episode, the instructions of a prompted
        policy, the same observation for the previous of n samples); then the rows' caches are
        left-padded into one batch for decoding. Returns (cache, mask (batch, longest prompt), positions
        of the last prompt tokens (batch, 1), reused head lengths, next-token logits (batch, vocab))."""
        rows, heads, logits = [], [], []
        for prompt in prompts:
            head, layers = self.prompts.longest(prompt)
            head = min(head, len(prompt) - 1)  # the last token is fed again: its logits start the completion
            cache = DynamicCache()
            for index, (keys, values) in enumerate(layers if head else ()):
                cache.update(keys[None, :, :head], values[None, :, :head], index)
            out = self.model(
                input_ids=torch.tensor([prompt[head:]], device=self.device),
                position_ids=torch.arange(head, len(prompt), device=self.device)[None],
                cache=cache,
                logits_to_keep=1,
            )
            kv = [(keys[0], values[0]) for keys, values in _layers(cache)]  # (kv heads, tokens, head dim)
            self.prompts.put(prompt, kv)
            rows.append(kv)
            heads.append(head)
            logits.append(out.logits[0, -1].float())
        self.prompts.trim(len(prompts))
        longest = max(map(len, prompts))
        batch = DynamicCache()
        for index, (keys, _) in enumerate(rows[0]):
            shape = (len(prompts), keys.shape[0], longest, keys.shape[2])
            batch_keys, batch_values = keys.new_zeros(shape), keys.new_zeros(shape)
            for row, kv in enumerate(rows):
                batch_keys[row, :, longest - len(prompts[row]) :] = kv[index][0]
                batch_values[row, :, longest - len(prompts[row]) :] = kv[index][1]
            batch.update(batch_keys, batch_values, index)
        mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        positions = torch.tensor([[len(p) - 1] for p in prompts], device=self.device)
        return batch, mask, positions, heads, torch.stack(logits)

    def _finished(
        self, request: CompletionRequest, tokens: list[int], prompt_tokens: int, force: bool = False
    ) -> Completion | None:
        """The completion if ``tokens`` end it (end of sequence, a stop string, the limit), else None."""
        ended = tokens[-1] in self.eos_ids
        text = self.tokenizer.decode(
            tokens[:-1] if ended else tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        # The tokens as sampled, which an RL run trains on rather than the text re-tokenised: with the end of
        # sequence when the model ended it, or ending with the token that completed a stop string (the text
        # is checked after every token, so none follows it): what ended it is the policy's choice too.
        sampled = {"token_ids": list(tokens)}
        cuts = [text.find(stop) for stop in request.stop if stop and stop in text]
        if cuts:
            return Completion(text[: min(cuts)], len(tokens), "stop", prompt_tokens, sampled)
        if ended:
            return Completion(text, len(tokens), "stop", prompt_tokens, sampled)
        if force or len(tokens) >= request.max_new_tokens:
            return Completion(text, len(tokens), "length", prompt_tokens, sampled)
        return None


def constraint_kind(constraint: Constraint | None) -> str:
    """What a row's logits were masked with, as a run reports it (beside an endpoint's "commands (regex)")."""
    if constraint is None:
        return "none"
    return "commands (local)" if constraint.commands else "quotes (local)"


def _layers(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) of each layer, each (batch, kv heads, tokens, head dim)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


class PromptCache:
    """The keys and values of the ``size`` most recent prompts (at least the last batch's), per layer
    (kv heads, tokens, head dim)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[tuple[int, ...], tuple[np.ndarray, list]] = OrderedDict()

    def longest(self, prompt: list[int]) -> tuple[int, list | None]:
        """(n, layers) of the entry sharing the longest head with ``prompt``: its first n tokens."""
        best, layers, key_of_best = 0, None, None
        ids = np.asarray(prompt)
        for key, (tokens, kv) in self.entries.items():
            n = min(len(tokens), len(ids))
            differ = np.flatnonzero(tokens[:n] != ids[:n])
            n = int(differ[0]) if differ.size else n
            if n > best:
                best, layers, key_of_best = n, kv, key
        if key_of_best is not None:
            self.entries.move_to_end(key_of_best)
        return best, layers

    def put(self, prompt: list[int], layers: list) -> None:
        """Add an entry; nothing is evicted until ``trim``, so that every prompt of a batch still finds
        the previous round's entries (evicting here, a batch larger than ``size`` would push out the
        entries its later rows need and recompute their whole prompts)."""
        if not self.size:
            return
        key = tuple(prompt)
        self.entries[key] = (np.asarray(prompt), layers)
        self.entries.move_to_end(key)

    def trim(self, batch: int) -> None:
        """Keep the ``max(size, batch)`` most recently used entries: at least the last batch's prompts,
        which the next round of the same episodes extends."""
        while len(self.entries) > max(self.size, batch):
            self.entries.popitem(last=False)


def _sample(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    """One token from ``logits`` (vocab,): the likeliest at temperature 0, else sampled with ``generator``."""
    if temperature == 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))
