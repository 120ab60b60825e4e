"""The local backend: a causal LM from disk with transformers, on CPU or CUDA, a batch at a time.

``complete`` left-pads the batch's prompts (chat requests through the tokenizer's chat template, raw
prompts as BC training tokenized them: no special tokens), prefills them together and decodes them
together with a KV cache. Each row samples with its own ``torch.Generator`` seeded from its request, so a
request with a seed gives the same text whatever its batch partners are (up to float rounding between
batch shapes). Constraints (``constraints.py``) mask each row's logits before sampling.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from training.config import SMOLLM2
from training.data import cut_middle
from training.sampling.constraints import ConstraintProcessor, TokenTable
from training.sampling.types import BackendError, Completion, CompletionRequest
from training.store import default_store, resolve_base_model

MIN_SHARED = 32  # below this a shared head is not worth a separate forward pass


class LocalBackend:
    """``model_dir``: a Hugging Face model folder (a registered checkpoint); None: the SmolLM2 default
    converted into the model store (``training/store.py``). ``threads`` > 0 sets torch's CPU threads.
    ``prompt_cache``: how many recent prompts keep their keys and values, so that the next observation of
    an episode (the same question, quotes and past actions at its head) only computes what changed."""

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
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(self.device).eval()
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

    def complete(self, requests: Sequence[CompletionRequest]) -> list[Completion]:
        if not requests:
            return []
        try:
            with torch.inference_mode():
                return self._generate(list(requests))
        except torch.OutOfMemoryError as exc:
            raise BackendError(
                f"the local model ran out of memory on a batch of {len(requests)}: {exc}"
            ) from exc

    def _generate(self, requests: list[CompletionRequest]) -> list[Completion]:
        """Prefill all prompts, then one token per unfinished row per step until every row is done.
        ``ids`` (batch, tail width + generated): the tails and generated tokens; ``mask`` (batch, shared +
        tail width + generated): what each row attends to; ``logits`` (batch, vocab): the next token."""
        prompts = [self.encode(request) for request in requests]
        cache, ids, mask, positions, heads, logits = self._prefill(prompts)
        generators = [torch.Generator(device=self.device).manual_seed(r.seed) for r in requests]
        constraints = [
            r.constraint if r.constraint and (r.constraint.commands or r.constraint.quote_source) else None
            for r in requests
        ]
        processor = (
            ConstraintProcessor(self.table, constraints, ids.shape[1], self.eos_ids)
            if any(constraints)
            else None
        )
        generated: list[list[int]] = [[] for _ in requests]
        results: list[Completion | None] = [None] * len(requests)
        for _ in range(max(r.max_new_tokens for r in requests)):
            if processor is not None:
                logits = processor(ids, logits)
            tokens = []
            for row, request in enumerate(requests):
                if results[row] is not None:  # finished rows ride along with padding
                    tokens.append(self.pad_id)
                    continue
                token = _sample(logits[row], request.temperature, generators[row])
                tokens.append(token)
                generated[row].append(token)
                results[row] = self._finished(request, generated[row], len(prompts[row]))
            if all(result is not None for result in results):
                break
            step = torch.tensor(tokens, device=self.device)[:, None]
            ids = torch.cat([ids, step], dim=1)
            mask = torch.cat([mask, torch.ones_like(step)], dim=1)
            positions = positions[:, -1:] + 1
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
            replace(c, details={"cached_prompt_tokens": n})
            for c, n in zip(finished, heads, strict=True)
            if c is not None
        ]

    def _prefill(
        self, prompts: list[list[int]]
    ) -> tuple[DynamicCache, torch.Tensor, torch.Tensor, torch.Tensor, list[int], torch.Tensor]:
        """The KV cache of all prompts. Each row starts with a head whose keys and values are reused
        (``_heads``), right-aligned, then its left-padded tail. Returns (cache, tail ids (batch, width),
        mask (batch, heads + width), positions of the tails (batch, width), head lengths, next-token
        logits (batch, vocab))."""
        cache, heads = self._heads(prompts)
        longest = max(heads)
        tails = [p[n:] for p, n in zip(prompts, heads, strict=True)]
        width = max(map(len, tails))
        ids = torch.tensor([[self.pad_id] * (width - len(t)) + t for t in tails], device=self.device)
        mask = torch.tensor(
            [
                [0] * (longest - n) + [1] * n + [0] * (width - len(t)) + [1] * len(t)
                for n, t in zip(heads, tails, strict=True)
            ],
            device=self.device,
        )
        # Padding sits before each head and between head and tail: every row counts on from its head.
        tail_mask = mask[:, longest:]
        positions = torch.tensor(heads, device=self.device)[:, None] + (tail_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, logits_to_keep=1
        )
        if self.prompts.size:
            for row, prompt in enumerate(prompts):
                kept = mask[row].nonzero().flatten()  # this row's prompt tokens, in order
                self.prompts.put(prompt, [(k[row][:, kept], v[row][:, kept]) for k, v in _layers(cache)])
        return cache, ids, mask, positions, heads, out.logits[:, -1].float()

    def _heads(self, prompts: list[list[int]]) -> tuple[DynamicCache, list[int]]:
        """A cache holding each row's reusable head, right-aligned (batch, heads, longest head, dim), and
        the head lengths. A head comes from an earlier prompt that starts the same way (the previous
        observation of the episode), or else from the head all rows share (a prompted policy's
        instructions, the first observation n samples of a question share), computed once for all."""
        found = [self.prompts.longest(prompt) for prompt in prompts]
        found = [
            (min(n, len(p) - 1), kv) if n >= MIN_SHARED else (0, None)
            for p, (n, kv) in zip(prompts, found, strict=True)
        ]
        cache = DynamicCache()
        if any(n for n, _ in found):
            longest = max(n for n, _ in found)
            layers = next(kv for n, kv in found if n)
            for index, (k0, _) in enumerate(layers):
                keys = k0.new_zeros((len(prompts), k0.shape[0], longest, k0.shape[2]))
                values = torch.zeros_like(keys)
                for row, (n, kv) in enumerate(found):
                    if n:
                        keys[row, :, longest - n :] = kv[index][0][:, :n]
                        values[row, :, longest - n :] = kv[index][1][:, :n]
                cache.update(keys, values, index)
            return cache, [n for n, _ in found]
        shared = _shared_length(prompts) if len(prompts) > 1 else 0
        if shared < MIN_SHARED:
            return cache, [0] * len(prompts)
        self.model(input_ids=torch.tensor([prompts[0][:shared]], device=self.device), cache=cache)
        cache.batch_repeat_interleave(len(prompts))
        return cache, [shared] * len(prompts)

    def _finished(
        self, request: CompletionRequest, tokens: list[int], prompt_tokens: int, force: bool = False
    ) -> Completion | None:
        """The completion if ``tokens`` end it (end of sequence, a stop string, the limit), else None."""
        ended = tokens[-1] in self.eos_ids
        text = self.tokenizer.decode(
            tokens[:-1] if ended else tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        cuts = [text.find(stop) for stop in request.stop if stop and stop in text]
        if cuts:
            return Completion(text[: min(cuts)], len(tokens), "stop", prompt_tokens)
        if ended:
            return Completion(text, len(tokens), "stop", prompt_tokens)
        if force or len(tokens) >= request.max_new_tokens:
            return Completion(text, len(tokens), "length", prompt_tokens)
        return None


def _layers(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) of each layer, each (batch, kv heads, tokens, head dim)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


class PromptCache:
    """The keys and values of the ``size`` most recent prompts, per layer (kv heads, tokens, head dim)."""

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
        key = tuple(prompt)
        self.entries[key] = (np.asarray(prompt), layers)
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


def _shared_length(prompts: list[list[int]]) -> int:
    """How many leading tokens all prompts share, leaving each at least one token of its own (whose
    logits start the completion)."""
    shared = 0
    for column in zip(*prompts, strict=False):
        if any(token != column[0] for token in column):
            break
        shared += 1
    return min(shared, min(map(len, prompts)) - 1)


def _sample(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    """One token from ``logits`` (vocab,): the likeliest at temperature 0, else sampled with ``generator``."""
    if temperature == 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))
