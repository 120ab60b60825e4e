"""A step's ``Constraint`` as a grammar a model server can enforce: a regular expression (vLLM's structured
outputs, TGI's regex grammar) or GBNF (llama.cpp's server).

The local backend checks each token against the page (``constraints.py``); a server compiles a grammar
once per request, so the same rules are written out here:

- Commands (``Constraint.commands``): one of the forms valid on this observation (``Constraint.forms``),
  link ids that exist, scroll 1-3, the fixed commands. Search queries and find texts are whole-word spans
  of the question when the constraint names one (the guided grammar), else any non-blank text on one line.
- Quotes: a regular (or context-free) grammar cannot say "any span of this page" compactly, so a quote on a
  server is one of the page's sentences (lines split at sentence ends), up to ``MAX_SPANS`` of them and
  ``MAX_GRAMMAR_CHARS`` in all, in page order. Still verbatim by construction; shorter spans are the local
  backend's.
- ``Constraint.repeats``: the spans that would write a past search or quote again are left out.
- Without ``commands``, only a quote is constrained (what a BC policy gets): text that does not start with
  ``Quote: `` is free (on one line), and a quote is a sentence of the page.

Django-free and torch-free (the endpoint backend is imported by the web app).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from browser.engine.commands import COMMAND_FORMS
from training.sampling.types import Constraint

QUOTE_HEAD = "Quote: "
MAX_SPANS = 400  # sentences of a page offered as quotes (a long page's grammar stays small to compile)
MAX_GRAMMAR_CHARS = 60_000  # the quoted sentences' characters, all together
FREE = None  # an argument that is any non-blank text on one line
NONE = ("",)  # no argument: a fixed command
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_REGEX_SPECIAL = set("\\.^$|?*+()[]{}/")
_NON_BLANK_LINE = r"[^\n]*[^\s][^\n]*"


@dataclass(frozen=True)
class Alternative:
    """One way a command can be written: ``head`` then ``argument``, one of these strings (``NONE``: a fixed
    command; ``()``: none fits, so it cannot be written) or, with ``FREE``, any non-blank text on one line."""

    head: str
    argument: tuple[str, ...] | None = NONE

    @property
    def possible(self) -> bool:
        return self.argument is FREE or bool(self.argument)


@dataclass(frozen=True)
class CommandGrammar:
    """``alternatives``; with ``free_text`` any line that does not start with ``Quote: `` is allowed too
    (only quotes are constrained). ``kind``: "commands" or "quotes", what the request reports."""

    alternatives: tuple[Alternative, ...]
    free_text: bool = False

    @property
    def kind(self) -> str:
        return "quotes" if self.free_text else "commands"


def grammar_for(constraint: Constraint | None) -> CommandGrammar | None:
    """The grammar of ``constraint``, or None when it constrains nothing (no commands and no page text)."""
    if constraint is None or not (constraint.commands or constraint.quote_source is not None):
        return None
    quotes = Alternative(QUOTE_HEAD, _without_repeats(QUOTE_HEAD, quote_spans(constraint), constraint))
    if not constraint.commands:
        return CommandGrammar((quotes,) if quotes.possible else (), free_text=True)
    alternatives: list[Alternative] = []
    for form in constraint.forms or COMMAND_FORMS:
        if form == "Search <query>":
            alternatives.append(_question_spans("Search ", constraint))
        elif form == "Find in page: <text>":
            alternatives.append(_question_spans("Find in page: ", constraint))
        elif form == "Clicked on link <id>":
            alternatives.append(Alternative("Clicked on link ", tuple(map(str, constraint.link_ids))))
        elif form == "Quote: <text>":
            if constraint.quote_source is not None:
                alternatives.append(quotes)
        elif form.endswith("<1|2|3>"):
            alternatives.extend(Alternative(form.replace("<1|2|3>", n)) for n in "123")
        else:
            alternatives.append(Alternative(form))
    # A form whose every argument was left out (no links, every sentence quoted already) cannot be written;
    # when nothing can, the request goes unconstrained (the local backend ends the text there instead).
    kept = tuple(alternative for alternative in alternatives if alternative.possible)
    return CommandGrammar(kept) if kept else None


def quote_spans(constraint: Constraint) -> tuple[str, ...]:
    """The page's sentences offered as quotes: lines split at sentence ends, stripped, each once, in page
    order, within ``MAX_SPANS`` and ``MAX_GRAMMAR_CHARS``."""
    spans: dict[str, None] = {}
    total = 0
    for piece in _SENTENCE_END.split(constraint.quote_source or ""):
        sentence = piece.strip()
        if not sentence or sentence in spans or not any(char.isalnum() for char in sentence):
            continue
        if len(spans) >= MAX_SPANS or total + len(sentence) > MAX_GRAMMAR_CHARS:
            break
        spans[sentence] = None
        total += len(sentence)
    return tuple(spans)


def whole_word_spans(text: str) -> tuple[str, ...]:
    """Every span of ``text`` that starts and ends at a word boundary and neither starts nor ends with a
    space, shortest first from each start ("AFL", "AFL Grand", ...), each once: what the guided grammar lets
    a search query or a find text be (``constraints.starts_a_word``)."""
    from_here = [i for i in range(len(text)) if not text[i].isspace() and _boundary(text, i)]
    to_here = [j for j in range(1, len(text) + 1) if not text[j - 1].isspace() and _boundary(text, j)]
    spans = (text[i:j] for i in from_here for j in to_here if j > i)
    return tuple(dict.fromkeys(spans))


def _boundary(text: str, position: int) -> bool:
    return position in (0, len(text)) or not (text[position - 1].isalnum() and text[position].isalnum())


def _question_spans(head: str, constraint: Constraint) -> Alternative:
    if constraint.search_source is None:
        return Alternative(head, FREE)
    spans = whole_word_spans(constraint.search_source)
    return Alternative(head, _without_repeats(head, spans, constraint))


def _without_repeats(head: str, spans: Sequence[str], constraint: Constraint) -> tuple[str, ...]:
    return tuple(span for span in spans if f"{head}{span}" not in constraint.repeats)


# --- as a regular expression (vLLM, TGI) ---------------------------------------------------------------


def regex_escape(text: str) -> str:
    """``text`` as a literal in the regex dialects servers compile (Rust's regex, xgrammar, outlines): a
    backslash before each metacharacter only (``re.escape`` also escapes spaces and ``-``, which some of
    them refuse), newlines and tabs as ``\\n`` and ``\\t``."""
    out = []
    for char in text:
        if char in _REGEX_SPECIAL:
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        else:
            out.append(char)
    return "".join(out)


def to_regex(grammar: CommandGrammar) -> str:
    """The grammar as one regular expression matched against the whole completion."""
    branches = [_regex_alternative(alternative) for alternative in grammar.alternatives]
    if grammar.free_text:
        branches.append(_regex_not_starting_with(QUOTE_HEAD))
    return "(" + "|".join(branches) + ")"


def _regex_alternative(alternative: Alternative) -> str:
    head = regex_escape(alternative.head)
    if alternative.argument is FREE:
        return head + _NON_BLANK_LINE
    if alternative.argument == NONE:
        return head
    return head + "(" + "|".join(regex_escape(choice) for choice in alternative.argument) + ")"


def _regex_not_starting_with(head: str) -> str:
    """A non-empty line that does not start with ``head``, without lookahead (which the servers' engines
    lack): a proper prefix of it, or text that leaves it at some character."""
    prefixes = [regex_escape(head[:n]) for n in range(1, len(head))]
    departures = [regex_escape(head[:n]) + f"[^{_class_escape(head[n])}\\n]" for n in range(len(head))]
    return "(" + "|".join(prefixes) + "|(" + "|".join(departures) + ")[^\\n]*)"


def _class_escape(char: str) -> str:
    return "\\" + char if char in "\\]^-[" else char


# --- as GBNF (llama.cpp) -------------------------------------------------------------------------------


_GBNF_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal: llama.cpp's escapes (not JSON's: no ``\\b`` or ``\\f``)."""
    escaped = (
        _GBNF_ESCAPES.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x20 else char) for char in text
    )
    return '"' + "".join(escaped) + '"'


def to_gbnf(grammar: CommandGrammar) -> str:
    """The grammar in llama.cpp's GBNF, ``root`` matching the whole completion; each argument list is a rule
    of its own."""
    rules: list[str] = []
    branches = []
    for index, alternative in enumerate(grammar.alternatives):
        head = gbnf_literal(alternative.head)
        if alternative.argument is FREE:
            branches.append(f"{head} line")
        elif alternative.argument == NONE:
            branches.append(head)
        else:
            rules.append(f"arg{index} ::= " + " | ".join(map(gbnf_literal, alternative.argument)))
            branches.append(f"{head} arg{index}")
    if grammar.free_text:
        prefixes = [gbnf_literal(QUOTE_HEAD[:n]) for n in range(1, len(QUOTE_HEAD))]
        departures = [
            (f"{gbnf_literal(QUOTE_HEAD[:n])} " if n else "") + f"[^{_class_escape(QUOTE_HEAD[n])}\\n] rest"
            for n in range(len(QUOTE_HEAD))
        ]
        branches += [*prefixes, *departures]
        rules.append("rest ::= [^\\n]*")
    if any(alternative.argument is FREE for alternative in grammar.alternatives):
        rules.append("line ::= [^\\n]* [^ \\t\\n] [^\\n]*")
    return "\n".join(["root ::= " + " | ".join(branches), *rules])
