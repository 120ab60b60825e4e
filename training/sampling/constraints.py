"""Constrained decoding (GopherCite): a logits processor that only lets the model choose tokens that keep
its text valid.

- Quotes, always: while the text is ``Quote: <q>``, ``<q>`` plus the next token must stay an exact substring
  of the page text (stricter than the browser, which ignores case and whitespace), so quotes are verbatim
  by construction.
- Commands, when ``Constraint.commands``: the text must stay a prefix of a command form valid on this
  observation (``Constraint.forms``; link ids from ``Constraint.link_ids``; scroll 1-3; ``End: ...``), and
  the end-of-sequence token is allowed only once it is a complete command. With
  ``Constraint.search_source`` a search query or a find text must be a span of that text (the question)
  made of whole words, and a command in ``Constraint.repeats`` cannot end there.

How: for each row and step, the generated text so far decides a set of allowed tokens, found from the
vocabulary's decoded token texts (a dict of texts, a sorted list for "starts with", a trie for "is a
prefix of the page from here"). Constrained text never contains a newline, so line-based stop strings
cannot cut a command short. Results are cached per (constraint, text): episodes at the same state share them.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from transformers import LogitsProcessor

from browser.engine.commands import COMMAND_FORMS
from training.sampling.types import Constraint

QUOTE_HEAD = "Quote: "
# COMMAND_FORMS entry -> (head, argument kind or None for a fixed command)
_FORMS: dict[str, list[tuple[str, str | None]]] = {
    "Search <query>": [("Search ", "query")],
    "Clicked on link <id>": [("Clicked on link ", "link")],
    "Find in page: <text>": [("Find in page: ", "find")],
    "Quote: <text>": [(QUOTE_HEAD, "quote")],
    "Scrolled down <1|2|3>": [(f"Scrolled down {n}", None) for n in (1, 2, 3)],
    "Scrolled up <1|2|3>": [(f"Scrolled up {n}", None) for n in (1, 2, 3)],
    **{form: [(form, None)] for form in COMMAND_FORMS if "<" not in form},
}


class TokenTable:
    """The decoded text of every token of a tokenizer, indexed for the constraint checks. Tokens that are
    special, empty, hold a newline or a partial UTF-8 character are never allowed in constrained text."""

    def __init__(self, tokenizer: Any, vocab_size: int | None = None) -> None:
        self.size = max(
            vocab_size or 0, len(tokenizer)
        )  # the model's logits may be padded past the tokenizer
        texts = tokenizer.batch_decode(
            [[i] for i in range(len(tokenizer))], clean_up_tokenization_spaces=False
        )
        special = set(tokenizer.all_special_ids)
        self.texts: list[str] = texts + [""] * (self.size - len(texts))
        self.usable = torch.zeros(self.size, dtype=torch.bool)
        self.blank = torch.zeros(self.size, dtype=torch.bool)
        self.by_text: dict[str, list[int]] = {}
        self.trie: dict = {}  # char -> node; node[""] = ids whose text ends here
        for i, text in enumerate(texts):
            if i in special or not text or "\n" in text or "\ufffd" in text:
                continue
            self.usable[i] = True
            self.blank[i] = text.isspace()
            self.by_text.setdefault(text, []).append(i)
            node = self.trie
            for char in text:
                node = node.setdefault(char, {})
            node.setdefault("", []).append(i)
        self.sorted_texts = sorted(self.by_text)
        self.max_len = max(map(len, self.sorted_texts))
        self._cache: OrderedDict[tuple[Constraint, str], tuple[torch.Tensor | None, bool]] = OrderedDict()

    # --- lookups ---------------------------------------------------------------------------------------
    def prefixes_of(self, text: str) -> list[int]:
        """Tokens whose text is a non-empty prefix of ``text``."""
        return [i for n in range(1, min(len(text), self.max_len) + 1) for i in self.by_text.get(text[:n], ())]

    def starting_with(self, prefix: str) -> list[tuple[int, str]]:
        """(id, text) of tokens whose text starts with ``prefix`` and is longer than it."""
        start = bisect.bisect_right(self.sorted_texts, prefix)
        found = []
        for text in self.sorted_texts[start:]:
            if not text.startswith(prefix):
                break
            found.extend((i, text) for i in self.by_text[text])
        return found

    def continuations(self, source: str, quote: str, whole_words: bool = False) -> list[int]:
        """Tokens ``t`` such that ``quote + t`` is a substring of ``source`` (with ``whole_words``, one that
        does not start inside a word): walk the trie from every place where ``quote`` ends in ``source``."""
        ids: set[int] = set()
        for position in occurrences(source, quote, whole_words):
            node, end = self.trie, position + len(quote)
            for char in source[end : end + self.max_len]:
                node = node.get(char)
                if node is None:
                    break
                ids.update(node.get("", ()))
        return list(ids)

    # --- the grammar -----------------------------------------------------------------------------------
    def allowed(self, constraint: Constraint, text: str) -> tuple[torch.Tensor | None, bool]:
        """(mask of allowed next tokens or None for "anything", whether the sequence may end here)."""
        key = (constraint, text)
        if key not in self._cache:
            self._cache[key] = self._allowed(constraint, text)
            if len(self._cache) > 4096:
                self._cache.popitem(last=False)
        return self._cache[key]

    def _allowed(self, constraint: Constraint, text: str) -> tuple[torch.Tensor | None, bool]:
        if constraint.commands:
            items = [item for form in (constraint.forms or COMMAND_FORMS) for item in _FORMS[form]]
            mask = torch.zeros(self.size, dtype=torch.bool)
            can_end = False
        elif constraint.quote_source is not None and (
            text.startswith(QUOTE_HEAD) or QUOTE_HEAD.startswith(text)
        ):
            items, mask, can_end = [(QUOTE_HEAD, "quote")], None, True
        else:
            return None, True
        for head, kind in items:
            if kind is not None and text.startswith(head):  # inside the argument
                argument = text[len(head) :]
                arg_mask, complete = self._argument(constraint, kind, argument)
                if constraint.repeats and kind in QUESTION_SPANS:
                    self._drop_dead_ends(constraint, head, argument, arg_mask)
                mask = arg_mask if mask is None else mask | arg_mask
                can_end = can_end or complete
            elif head.startswith(text):  # still writing the head
                if mask is None:  # free text that could become a quote: only tokens crossing into it matter
                    mask = torch.ones(self.size, dtype=torch.bool)
                rest = head[len(text) :]
                if not rest:
                    can_end = True  # a fixed command, complete
                    continue
                mask[self.prefixes_of(rest)] = True
                for i, token in self.starting_with(rest):  # tokens that finish the head and go on
                    ok = kind is not None and self._argument_starts(constraint, kind, token[len(rest) :])
                    if ok or not constraint.commands:  # (free text allowed them all: take the bad ones out)
                        mask[i] = ok
        if can_end and text in constraint.repeats:
            can_end = False  # written before: go on to a longer one (or end anyway if nothing fits)
        return mask, can_end

    def _argument(self, constraint: Constraint, kind: str, argument: str) -> tuple[torch.Tensor, bool]:
        """Allowed tokens inside an argument, and whether the argument is complete."""
        blank = not argument.strip()
        if kind == "link":
            ids = [str(i) for i in constraint.link_ids]
            mask = torch.zeros(self.size, dtype=torch.bool)
            for full in ids:
                if full.startswith(argument):
                    mask[self.prefixes_of(full[len(argument) :])] = True
            return mask, argument in ids
        source = _span_source(constraint, kind)
        if source is not None:
            mask = torch.zeros(self.size, dtype=torch.bool)
            mask[self.continuations(source, argument, whole_words=kind in QUESTION_SPANS)] = True
        else:
            mask = self.usable.clone()
        if blank:  # the parser needs a non-space character: never end up with a blank argument
            mask &= ~self.blank
        complete = not blank
        if complete and kind in QUESTION_SPANS and source is not None:
            complete = ends_at_a_word_boundary(source, argument)  # "AFL Grand Final", not "AFL Gra"
        return mask, complete

    def _drop_dead_ends(self, constraint: Constraint, head: str, argument: str, mask: torch.Tensor) -> None:
        """Take out of ``mask`` the tokens after which every way to complete the command gives one already
        written: the grammar would end there anyway ("nothing fits") and repeat it."""
        source = constraint.search_source or ""
        for i in mask.nonzero().flatten().tolist():
            if _only_repeats_ahead(source, head, argument + self.texts[i], constraint.repeats):
                mask[i] = False

    def _argument_starts(self, constraint: Constraint, kind: str, start: str) -> bool:
        """Whether a token that finishes the head and goes on with ``start`` begins a valid argument."""
        if not start:
            return True
        if not start.strip():
            return False
        if kind == "link":
            return start.isdigit() and any(str(i).startswith(start) for i in constraint.link_ids)
        source = _span_source(constraint, kind)
        if source is None:
            return True
        if kind in QUESTION_SPANS:
            return ends_at_a_word_boundary(source, start, ending=False)
        return start in source


QUESTION_SPANS = ("query", "find")  # the arguments that guided decoding takes from the question


def _span_source(constraint: Constraint, kind: str) -> str | None:
    """The text an argument must be a span of: the page for quotes, the question for guided searches and
    finds."""
    if kind == "quote":
        return constraint.quote_source
    if kind in QUESTION_SPANS:
        return constraint.search_source
    return None


def _only_repeats_ahead(source: str, head: str, span: str, repeats: frozenset[str]) -> bool:
    """Whether every whole-word span of ``source`` that starts with ``span`` (where ``span`` starts a word)
    makes, after ``head``, a command in ``repeats``."""
    for position in occurrences(source, span, whole_words=True):
        for end in range(position + len(span), len(source) + 1):
            command = (head + source[position:end]).rstrip()
            if starts_a_word(source, end) and command not in repeats and command != head.rstrip():
                return False
    return True


def starts_a_word(source: str, position: int) -> bool:
    """Whether a span of ``source`` from ``position`` does not start inside a word."""
    return (
        position == 0
        or position >= len(source)
        or not (source[position - 1].isalnum() and source[position].isalnum())
    )


def ends_at_a_word_boundary(source: str, span: str, ending: bool = True) -> bool:
    """Whether ``span`` occurs in ``source`` somewhere it does not start inside a word (nor, with
    ``ending``, end inside one)."""
    return any(
        not ending or starts_a_word(source, position + len(span))
        for position in occurrences(source, span, whole_words=True)
    )


def occurrences(source: str, span: str, whole_words: bool = False) -> Iterator[int]:
    """Where ``span`` starts in ``source``, overlapping occurrences too (with ``whole_words``, only where it
    does not start inside a word)."""
    position = source.find(span)
    while position >= 0:
        if not whole_words or starts_a_word(source, position):
            yield position
        position = source.find(span, position + 1)


class ConstraintProcessor(LogitsProcessor):
    """A transformers ``LogitsProcessor`` for a batch whose generated tokens start at column
    ``prompt_width`` of ``input_ids`` (left-padded prompts). ``constraints[row]`` None: unconstrained.
    ``__call__(input_ids: (batch, width), scores: (batch, vocab)) -> scores`` with disallowed tokens -inf."""

    def __init__(
        self,
        table: TokenTable,
        constraints: Sequence[Constraint | None],
        prompt_width: int,
        eos_ids: Sequence[int],
    ) -> None:
        self.table = table
        self.constraints = list(constraints)
        self.prompt_width = prompt_width
        self.eos_ids = list(eos_ids)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        for row, constraint in enumerate(self.constraints):
            if constraint is None:
                continue
            generated = input_ids[row, self.prompt_width :].tolist()
            mask, can_end = self.table.allowed(constraint, "".join(self.table.texts[i] for i in generated))
            if mask is None:
                continue
            allow = mask.clone()
            if can_end or not allow.any():  # nothing fits (e.g. an empty page): end rather than fail
                allow[self.eos_ids] = True
            scores[row, ~allow.to(scores.device)[: scores.shape[1]]] = float("-inf")
        return scores
