"""Policies: what a model is asked at each step of an episode, and how its text becomes a command.

- ``BCPolicy``: a behaviour-cloned checkpoint sees exactly what it was trained on (``training/runs/bc.py``):
  the bare observation as a raw prompt, the command as the completion, ended by the end-of-sequence token;
  then the bare answer prompt and the answer.
- ``PromptedPolicy``: an instruct model (SmolLM2-135M-Instruct by default) gets chat messages: short
  instructions with the command list (WebGPT Table 1), a few demonstrations as examples when there are
  any, then the observation. It answers one line, the command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from browser.engine.browser import Browser
from browser.engine.commands import COMMAND_FORMS
from training.sampling.episode import SamplingSettings
from training.sampling.types import Backend, Completion, CompletionRequest, Constraint, Message

# Never inside a command: "♦" only starts a section of the observation, so a BC model that runs on into
# the next observation has finished its command.
BC_STOP = ("\n♦",)


# With this many actions left and no quote yet, a guided policy may only quote (when the page has text).
QUOTE_BEFORE_END = 2
MOVES = ("Scrolled down <1|2|3>", "Scrolled up <1|2|3>", "Top")
UPWARD = ("Scrolled up <1|2|3>", "Top")
DECLINES = ("End: Nonsense", "End: Controversial")


def constraint_for(
    browser: Browser, settings: SamplingSettings, default: bool = False, guided: bool = False
) -> Constraint:
    """What the next command may be on the current observation: quotes from the page text, and (when
    ``settings.constrain_commands``, or ``default`` when that is None) only the forms valid right now.

    ``guided`` (prompted models, whose few parameters know nothing of this browser) narrows the grammar to
    moves that make progress, so that even the 135M default reaches an answer with quotes: no declining
    (End: Nonsense/Controversial), no scrolling a page without text or up from its top, search queries
    and find texts are whole-word spans of the question, no search or quote is written twice, and with
    ``QUOTE_BEFORE_END`` actions left and no quote only a quote from the page is allowed."""
    page = browser.page
    commands = default if settings.constrain_commands is None else settings.constrain_commands
    forms = list(COMMAND_FORMS)
    if not page.lines:
        forms = [f for f in forms if not f.startswith(("Find in page", "Quote"))]
    if not page.links:
        forms.remove("Clicked on link <id>")
    if not browser.quotes:
        forms.remove("End: Answer")
    if not browser.can_go_back:  # Back on the first page is an invalid action
        forms.remove("Back")
    guided = guided and commands
    if guided:
        forms = guided_forms(browser, forms)
    return Constraint(
        commands=commands,
        quote_source=page.plain if page.lines else None,
        link_ids=tuple(range(len(page.links))),
        forms=tuple(forms),
        search_source=browser.question if guided else None,
        repeats=past_searches_and_quotes(browser) if guided else frozenset(),
    )


def guided_forms(browser: Browser, forms: list[str]) -> list[str]:
    """``forms`` narrowed to the moves that make progress (see ``constraint_for``)."""
    if browser.page.lines and not browser.quotes and browser.actions_left <= QUOTE_BEFORE_END:
        return ["Quote: <text>"]  # end with evidence
    # Declining is the reward threshold's job: a 135M model would end with Nonsense at random.
    useless = DECLINES + (MOVES if not browser.page.lines else UPWARD if browser.top == 0 else ())
    return [form for form in forms if form not in useless]


def past_searches_and_quotes(browser: Browser) -> frozenset[str]:
    """The episode's valid Search and Quote commands so far, as written: a guided policy does not repeat
    them (the same query shows the same results; the same quote adds nothing)."""
    return frozenset(
        action.command.strip()
        for action in browser.actions
        if action.valid and action.command.strip().startswith(("Search ", "Quote: "))
    )


@dataclass
class BCPolicy:
    """A BC checkpoint: raw prompt = the observation, completion = the command + end of sequence."""

    backend: Backend

    def command_request(self, browser: Browser, settings: SamplingSettings, seed: int) -> CompletionRequest:
        return self.command_request_for(
            browser.observation(), settings, seed, constraint_for(browser, settings)
        )

    def command_request_for(
        self, observation: str, settings: SamplingSettings, seed: int, constraint: Constraint | None = None
    ) -> CompletionRequest:
        """The request for a command on ``observation`` (an RL run rebuilds an episode's prompts from it)."""
        return CompletionRequest(
            prompt=observation,
            max_new_tokens=settings.max_command_tokens,
            temperature=settings.temperature,
            seed=seed,
            stop=BC_STOP,
            constraint=constraint,
        )

    def answer_request(self, browser: Browser, settings: SamplingSettings, seed: int) -> CompletionRequest:
        return self.answer_request_for(browser.answer_prompt(), settings, seed)

    def answer_request_for(
        self, answer_prompt: str, settings: SamplingSettings, seed: int
    ) -> CompletionRequest:
        """The request for an answer to ``answer_prompt`` (the question and its quotes, as in rm-pairs)."""
        return CompletionRequest(
            prompt=answer_prompt,
            max_new_tokens=settings.max_answer_tokens,
            temperature=settings.temperature,
            seed=seed,
        )

    def command_from(self, completion: Completion) -> str:
        return completion.text.strip()


COMMANDS_HELP = (
    ("Search <query>", "send <query> to the search engine and show the results"),
    ("Clicked on link <id>", "follow the link with that id to a new page"),
    ("Find in page: <text>", "scroll to the next occurrence of <text> in the page"),
    ("Quote: <text>", "if <text> is on the current page, keep it as a reference for the answer"),
    ("Scrolled down <1|2|3>", "scroll down that many windows"),
    ("Scrolled up <1|2|3>", "scroll up that many windows"),
    ("Top", "scroll to the top of the page"),
    ("Back", "go to the previous page"),
    ("End: Answer", "stop browsing and write the answer from the quotes"),
    ("End: <Nonsense|Controversial>", "stop browsing without answering"),
)
INSTRUCTIONS = (
    "You answer a question by browsing a text-based web browser. Each turn you see the question, your "
    "quotes so far, your past actions and the current page, and you reply with exactly one action on one "
    "line, nothing else. Search, open relevant pages, quote short passages that support the answer, then "
    "end with End: Answer. Actions:\n" + "\n".join(f"{form}: {what}" for form, what in COMMANDS_HELP)
)
ANSWER_INSTRUCTIONS = (
    "Write a short, helpful answer to the question using only the numbered quotes that follow it, citing "
    "them as [1], [2], ... The question and each quote end with ■."
)


@dataclass
class PromptedPolicy:
    """An instruct model, prompted. ``demonstrations``: (observation, command) pairs shown as earlier
    turns of the chat, e.g. from human demonstrations of other questions."""

    backend: Backend
    demonstrations: Sequence[tuple[str, str]] = ()
    instructions: str = INSTRUCTIONS

    def command_request(self, browser: Browser, settings: SamplingSettings, seed: int) -> CompletionRequest:
        constraint = constraint_for(browser, settings, default=True, guided=True)
        return self.command_request_for(browser.observation(), settings, seed, constraint)

    def command_request_for(
        self, observation: str, settings: SamplingSettings, seed: int, constraint: Constraint | None = None
    ) -> CompletionRequest:
        """The request for a command on ``observation`` (an RL run rebuilds an episode's prompts from it)."""
        messages = [Message("system", self.instructions)]
        for example, command in self.demonstrations:
            messages += [Message("user", example), Message("assistant", command)]
        messages.append(Message("user", observation))
        return CompletionRequest(
            messages=tuple(messages),
            max_new_tokens=settings.max_command_tokens,
            temperature=settings.temperature,
            seed=seed,
            stop=("\n",),  # one action, one line
            constraint=constraint,
        )

    def answer_request(self, browser: Browser, settings: SamplingSettings, seed: int) -> CompletionRequest:
        return self.answer_request_for(browser.answer_prompt(), settings, seed)

    def answer_request_for(
        self, answer_prompt: str, settings: SamplingSettings, seed: int
    ) -> CompletionRequest:
        """The request for an answer to ``answer_prompt`` (the question and its quotes, as in rm-pairs)."""
        return CompletionRequest(
            messages=(Message("system", ANSWER_INSTRUCTIONS), Message("user", answer_prompt)),
            max_new_tokens=settings.max_answer_tokens,
            temperature=settings.temperature,
            seed=seed,
        )

    def command_from(self, completion: Completion) -> str:
        # Chat models sometimes wrap the action in backticks; the line itself is the command.
        lines = [line for line in completion.text.strip().splitlines() if line.strip()]
        return lines[0].strip().strip("`").strip() if lines else ""
