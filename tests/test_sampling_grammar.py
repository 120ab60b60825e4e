"""A step's constraint written out for model servers (training/sampling/grammar.py, dialects.py): on real
FreshWiki pages, every command the grammar offers is valid there and the commands the local constraint
refuses are refused; the regex (vLLM, TGI) and the GBNF (llama.cpp) accept the same texts; each kind of
server gets its own fields."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from browser.engine.browser import Browser
from browser.engine.commands import InvalidCommand, parse_command
from browser.engine.matching import quote_span
from browser.search.local import LocalIndex
from tests.test_sampling_core import ENV
from training.sampling.dialects import SERVERS, request_fields
from training.sampling.episode import SamplingSettings
from training.sampling.grammar import (
    FREE,
    NONE,
    QUOTE_HEAD,
    Alternative,
    CommandGrammar,
    gbnf_literal,
    grammar_for,
    regex_escape,
    to_gbnf,
    to_regex,
)
from training.sampling.policies import constraint_for
from training.sampling.types import CompletionRequest, Constraint, Message

QUESTION = "Who won the 2022 AFL Grand Final?"


@pytest.fixture(scope="module")
def index(freshwiki_index_dir):
    return LocalIndex.open(freshwiki_index_dir / "freshwiki")


@pytest.fixture
def on_a_page(index) -> Browser:
    """A browser on the first result of a search for the question, one valid quote taken from it."""
    browser = Browser(index, ENV)
    browser.reset(QUESTION)
    assert browser.step("Search AFL Grand Final").valid
    assert browser.step("Clicked on link 0").valid and browser.page.lines
    assert browser.step(f"Quote: {first_sentence(browser)}").valid
    return browser


def first_sentence(browser: Browser) -> str:
    return next(line for line in browser.page.plain.splitlines() if len(line.split()) >= 4).split(". ")[0]


def gbnf_as_regex(gbnf: str) -> str:
    """Our GBNF subset (rules of literals, rule names and ``[...]`` classes with ``*``) as a Python regex, so
    that the same texts can be matched against both forms: an independent reading of what llama.cpp gets."""
    rules = dict(line.split(" ::= ", 1) for line in gbnf.splitlines())
    token = re.compile(r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]\*?|[a-z][a-z0-9]*|\|')

    def expand(body: str) -> str:
        parts = []
        for item in token.findall(body):
            if item == "|":
                parts.append("|")
            elif item.startswith('"'):
                literal = re.sub(r"\\x([0-9a-f]{2})", lambda m: f"\\u00{m.group(1)}", item)
                parts.append(re.escape(json.loads(literal)))
            elif item.startswith("["):
                parts.append(item)
            else:
                parts.append(f"(?:{expand(rules[item])})")
        return "".join(parts)

    return expand(rules["root"])


def offered(grammar: CommandGrammar) -> Iterator[str]:
    """Every command the grammar offers (a free argument written as one sample text)."""
    for alternative in grammar.alternatives:
        if alternative.argument is FREE:
            yield alternative.head + "anything at all"
        else:
            yield from (alternative.head + choice for choice in alternative.argument)


def accepts(grammar: CommandGrammar, text: str) -> tuple[bool, bool]:
    """(whether the regex takes ``text``, whether the GBNF does)."""
    return (
        re.fullmatch(to_regex(grammar), text) is not None,
        re.fullmatch(gbnf_as_regex(to_gbnf(grammar)), text) is not None,
    )


def valid_here(browser: Browser, command: str) -> bool:
    """Whether ``command`` parses and, for a quote, is on the page; for a link, one that exists."""
    try:
        parsed = parse_command(command)
    except InvalidCommand:
        return False
    if command.startswith(QUOTE_HEAD):
        return quote_span(browser.page.plain, parsed.argument) is not None
    if command.startswith("Clicked on link "):
        return int(parsed.argument) < len(browser.page.links)
    return True


def test_the_guided_grammar_of_a_real_page_offers_only_valid_commands(on_a_page):
    constraint = constraint_for(on_a_page, SamplingSettings(), default=True, guided=True)
    grammar = grammar_for(constraint)
    assert grammar is not None and grammar.kind == "commands"
    commands = list(offered(grammar))
    heads = {command.split(" ")[0] for command in commands}
    assert {"Search", "Clicked", "Quote:"} <= heads
    for command in commands:
        assert valid_here(on_a_page, command), command
        assert accepts(grammar, command) == (True, True), command
    refused = [
        "Search AFL Gra",  # not a whole word of the question
        "Search Geelong Cats",  # not in the question
        f"Clicked on link {len(on_a_page.page.links)}",  # no such link
        "Quote: a sentence that is on no page of this corpus",
        f"Quote: {first_sentence(on_a_page)}",  # quoted already (a repeat)
        "End: Nonsense",  # the guided grammar never declines
        "Top",  # at the top of the page
        "End: Answer\nSearch AFL",  # one line, one command
        "",
    ]
    for text in refused:
        assert accepts(grammar, text) == (False, False), text


def test_the_plain_grammar_takes_any_query_and_the_forms_valid_here(on_a_page):
    constraint = constraint_for(on_a_page, SamplingSettings(constrain_commands=True))
    grammar = grammar_for(constraint)
    for text in ("Search Geelong Cats premiership", "Find in page: Sydney", "End: Nonsense", "End: Answer"):
        assert accepts(grammar, text) == (True, True), text
    for text in ("Search ", "Search   ", "Find in page: \nx", "Scrolled down 4", "Clicked on link x"):
        assert accepts(grammar, text) == (False, False), text


def test_without_commands_only_a_quote_is_constrained(on_a_page):
    """A BC policy's constraint: free text unless it starts with "Quote: ", then a sentence of the page."""
    constraint = constraint_for(on_a_page, SamplingSettings())
    assert not constraint.commands
    grammar = grammar_for(constraint)
    assert grammar is not None and grammar.kind == "quotes"
    sentence = next(s for s in grammar.alternatives[0].argument if s != first_sentence(on_a_page))
    for text in ("Search Geelong", "Q", "Quote:", "Quote:x", "Quotes", "End: Answer", f"Quote: {sentence}"):
        assert accepts(grammar, text) == (True, True), text
    for text in ("Quote: not on the page at all", "Quote: ", "Quote: 2022 AFL Gra"):
        assert accepts(grammar, text) == (False, False), text
    assert grammar_for(Constraint()) is None  # nothing to constrain: the request goes as it is


def test_a_page_without_text_offers_no_quote(index):
    browser = Browser(index, ENV)
    browser.reset(QUESTION)  # the start page: no text
    grammar = grammar_for(constraint_for(browser, SamplingSettings(), default=True, guided=True))
    assert grammar is not None
    assert [a.head for a in grammar.alternatives] == ["Search "]  # only a search makes progress there


def test_literals_survive_both_forms():
    """Page text is anything: regex metacharacters, quotes, backslashes, tabs, control characters."""
    text = 'a.b*c (d) [e] {f} ^g$ h|i? +j \\k "l" /m\tn\x0bo é'
    assert re.fullmatch(regex_escape(text), text)
    literal = gbnf_literal(text)
    assert "\\x0b" in literal and "\\t" in literal and '\\"' in literal
    grammar = CommandGrammar((Alternative(text, NONE),))
    assert accepts(grammar, text) == (True, True)
    assert accepts(grammar, text + "x") == (False, False)


def command_request(constraint: Constraint | None, chat: bool = True, temperature: float = 0.8):
    text = {"messages": (Message("user", "q"),)} if chat else {"prompt": "q"}
    return CompletionRequest(max_new_tokens=8, temperature=temperature, constraint=constraint, **text)


def test_each_kind_of_server_gets_its_own_fields(on_a_page):
    constraint = constraint_for(on_a_page, SamplingSettings(), default=True, guided=True)
    regex, gbnf = to_regex(grammar_for(constraint)), to_gbnf(grammar_for(constraint))
    chat, prompt = command_request(constraint), command_request(constraint, chat=False)
    assert request_fields("openai", chat) == ({}, "none")
    assert request_fields("vllm", prompt) == ({"structured_outputs": {"regex": regex}}, "commands (regex)")
    assert request_fields("llamacpp", chat) == ({"grammar": gbnf}, "commands (gbnf)")
    tgi = {"response_format": {"type": "regex", "value": regex}}
    assert request_fields("tgi", chat) == (tgi, "commands (regex)")
    assert request_fields("tgi", prompt) == ({}, "none")  # TGI's /v1/completions takes no grammar
    # transformers serve: no grammar, but sampling asked for (its converted folders decode greedily)
    assert request_fields("transformers", chat) == ({"generation_config": '{"do_sample": true}'}, "none")
    greedy = command_request(constraint, temperature=0)
    assert request_fields("transformers", greedy)[0] == {"generation_config": '{"do_sample": false}'}
    for server in SERVERS:
        assert request_fields(server, command_request(None))[1] == "none"
    with pytest.raises(ValueError, match="unknown server kind"):
        request_fields("ollama", chat)
