"""The browser environment: one episode of searching, reading and quoting toward an answer.

The same object serves people (through the demonstration UI) and models (through ``observation()``),
so a demonstration is exactly the text a policy is trained on. It is deterministic: the same pages and
the same commands give byte-identical observations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from browser.engine.backend import AddressNotAllowed, FetchError, PageNotFound, SearchBackend
from browser.engine.commands import Command, EndReason, InvalidCommand, Kind, parse_command
from browser.engine.matching import find, quote_span
from browser.engine.observation import format_answer_prompt, format_quote
from browser.engine.page import BLANK_PAGE, Page, Quote, RemovedQuote
from browser.engine.render import error_page, render_document, render_search_results
from browser.engine.settings import BrowserSettings
from browser.engine.text import shares_ngram

STATE_VERSION = 1
QUOTE_DISPLAY = "Quote"  # a valid Quote's line in "Past actions"
# Find shows this many lines above the match's: a sentence seldom starts on the match's line, and with the
# match on the window's first line its start was in the window before, so it could not be quoted in one piece.
FIND_LINES_ABOVE = 1


@dataclass(frozen=True)
class StepResult:
    valid: bool
    message: str
    done: bool
    end_reason: EndReason | None


@dataclass
class Action:
    """One step as recorded: the command text, whether it was valid, and its line in "Past actions"."""

    command: str
    valid: bool
    display: str = ""
    message: str = ""
    request: str = ""  # "search:<query>" or "fetch:<url>" when the action opened a page
    opened: str = ""  # the digest of the page it opened


@dataclass
class _Cursor:
    digest: str
    top: int = 0
    find_offset: int | None = None  # where the last Find matched, so the next one moves on


class _Pages(dict):
    """Pages by digest, loading a missing one on first use when a loader is given."""

    def __init__(self, pages: dict[str, Page], loader: Callable[[str], Page] | None) -> None:
        super().__init__(pages)
        self._loader = loader

    def ensure(self, digests: Sequence[str]) -> None:
        for digest in digests:
            if digest not in self:
                self.__missing__(digest)

    def __missing__(self, digest: str) -> Page:
        if self._loader is None:
            raise KeyError(digest)
        page = self[digest] = self._loader(digest)
        return page


@dataclass
class _Episode:
    question: str = ""
    reference_answers: tuple[str, ...] = ()
    pages: dict[str, Page] = field(default_factory=lambda: {BLANK_PAGE.digest: BLANK_PAGE})
    cursor: _Cursor = field(default_factory=lambda: _Cursor(BLANK_PAGE.digest))
    history: list[_Cursor] = field(default_factory=list)
    quotes: list[Quote] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    end_reason: EndReason | None = None
    removed_quotes: list[RemovedQuote] = field(default_factory=list)


class Browser:
    """``recorded`` maps requests ("search:<query>", "fetch:<url>") to pages served before: a replay of
    an episode serves exactly the pages that were seen, without asking the backend."""

    def __init__(
        self,
        backend: SearchBackend,
        settings: BrowserSettings | None = None,
        recorded: dict[str, Page] | None = None,
    ) -> None:
        self.backend = backend
        self.settings = settings or BrowserSettings()
        self.recorded = dict(recorded or {})
        self._episode = _Episode()
        self._navigation: tuple[str, str] = ("", "")

    # --- the episode -------------------------------------------------------------------------------
    def reset(self, question: str, reference_answers: Sequence[str] = ()) -> None:
        self._episode = _Episode(question=question.strip(), reference_answers=tuple(reference_answers))

    @property
    def question(self) -> str:
        return self._episode.question

    @property
    def page(self) -> Page:
        return self._episode.pages[self._episode.cursor.digest]

    @property
    def top(self) -> int:
        return self._episode.cursor.top

    @property
    def pages(self) -> dict[str, Page]:
        """Every page served in this episode, by digest (for content-addressed snapshots)."""
        return dict(self._episode.pages)

    @property
    def quotes(self) -> tuple[Quote, ...]:
        return tuple(self._episode.quotes)

    @property
    def actions(self) -> tuple[Action, ...]:
        return tuple(self._episode.actions)

    @property
    def removed_quotes(self) -> tuple[RemovedQuote, ...]:
        return tuple(self._episode.removed_quotes)

    def quote_actions(self) -> list[int]:
        """The index of the Quote action behind each quote of the list, in order: each valid Quote added
        one quote, and the removed ones are left out."""
        removed = {removal.action for removal in self._episode.removed_quotes}
        return [
            index
            for index, action in enumerate(self._episode.actions)
            if action.valid and action.display == QUOTE_DISPLAY and index not in removed
        ]

    @property
    def actions_left(self) -> int:
        return max(0, self.settings.max_actions - len(self._episode.actions))

    @property
    def quote_chars_left(self) -> int:
        return max(0, self.settings.max_quote_chars - sum(len(q.extract) for q in self._episode.quotes))

    @property
    def can_go_back(self) -> bool:
        """Whether ``Back`` has a page to return to."""
        return bool(self._episode.history)

    @property
    def done(self) -> bool:
        return self._episode.end_reason is not None

    @property
    def end_reason(self) -> EndReason | None:
        return self._episode.end_reason

    def visible_lines(self) -> tuple[str, ...]:
        return self.page.lines[self.top : self.top + self.settings.window_lines]

    def scrollbar(self) -> tuple[int, int]:
        """First and last visible line, 0-based and inclusive (0 - 0 for an empty page)."""
        count = len(self.page.lines)
        return (self.top, min(self.top + self.settings.window_lines, count) - 1) if count else (0, 0)

    def observation(self) -> str:
        """One section per marker; "♦Error" / "♦Note" appear only right after an action that produced one."""
        sections = ["♦Question", self.question, "♦Quotes"]
        sections.extend(format_quote(quote) for quote in self.quotes)
        sections.append("♦Past actions")
        removed = {removal.action for removal in self.removed_quotes}  # as if never quoted (remove_quote)
        shown = [a.display for i, a in enumerate(self.actions) if a.valid and i not in removed]
        sections.extend(shown[-self.settings.past_actions_shown :] if shown else [])
        first, last = self.scrollbar()
        sections += ["♦Title", self.page.display_title, f"♦Scrollbar: {first} - {last}", "♦Text"]
        sections.extend(self.visible_lines())
        if self.actions and self.actions[-1].message:
            last_action = self.actions[-1]
            sections += ["♦Note" if last_action.valid else "♦Error", last_action.message]
        sections += [f"♦Actions left: {self.actions_left}", "♦Next action"]
        return "\n".join(sections)

    def answer_prompt(self) -> str:
        return format_answer_prompt(self.question, self.quotes)

    # --- stepping ----------------------------------------------------------------------------------
    def step(self, text: str) -> StepResult:
        """Apply one command. Never raises on any input: invalid text is an explained, counted action."""
        if self.done:
            return StepResult(False, "Browsing has ended.", True, self.end_reason)
        self._navigation = ("", "")
        try:
            command = parse_command(text)
            display, message = self._apply(command)
            request, opened = self._navigation
            action = Action(text.strip(), True, display, message, request=request, opened=opened)
        except InvalidCommand as exc:
            action = Action(command=text.strip(), valid=False, message=str(exc))
        self._episode.actions.append(action)
        if not self.done and self.actions_left == 0:
            self._episode.end_reason = EndReason.ACTION_LIMIT
        return StepResult(action.valid, action.message, self.done, self.end_reason)

    def _apply(self, command: Command) -> tuple[str, str]:
        handler = {
            Kind.SEARCH: self._search,
            Kind.CLICK: self._click,
            Kind.FIND: self._find,
            Kind.QUOTE: self._quote,
            Kind.SCROLL_DOWN: self._scroll,
            Kind.SCROLL_UP: self._scroll,
            Kind.TOP: self._top,
            Kind.BACK: self._back,
            Kind.END: self._end,
        }[command.kind]
        return handler(command)

    def _navigate(self, request: str, load: Callable[[], Page]) -> None:
        """Open the page for ``request``: the recorded one when replaying, the one this episode already
        opened for it, else a fresh one."""
        page = self.recorded.get(request) or self._opened_before(request) or load()
        self._navigation = (request, page.digest)
        self._open(page)

    def _opened_before(self, request: str) -> Page | None:
        """The page this episode opened for ``request`` before: within an episode a page never changes
        under the reader (a live site edited, a search engine reshuffling its results). Error pages are
        asked for again: the network may be back, the rate limit over."""
        for action in reversed(self._episode.actions):
            if action.request == request and action.opened:
                page = self._episode.pages[action.opened]
                return page if page.kind != "error" else None
        return None

    def _open(self, page: Page) -> None:
        self._episode.pages.setdefault(page.digest, page)
        if self.page.kind != "blank":
            self._episode.history.append(self._episode.cursor)
        self._episode.cursor = _Cursor(page.digest)

    def _search(self, command: Command) -> tuple[str, str]:
        self._navigate(f"search:{command.argument}", lambda: self._results_page(command.argument))
        return f"Search {command.argument}", ""

    def _results_page(self, query: str) -> Page:
        try:
            results = self.backend.search(query, self.settings.search_results)
        except FetchError as exc:
            return error_page("", f"The search failed: {exc}", self.settings)
        return render_search_results(query, results, self.settings)

    def _click(self, command: Command) -> tuple[str, str]:
        links = self.page.links
        index = int(command.argument)
        if index >= len(links):
            available = f"links: 0 - {len(links) - 1}" if links else "it has no links"
            raise InvalidCommand(f"There is no link {index} on this page ({available}).")
        link = links[index]
        self._navigate(f"fetch:{link.url}", lambda: self._fetch(link.url))
        return f"Click {link.text} {link.domain}".rstrip(), ""

    def _fetch(self, url: str) -> Page:
        try:
            page = render_document(self.backend.fetch(url), self.settings)
        except PageNotFound:
            return error_page(
                url,
                f"{url} is not in the corpus. Go back or search again.",
                self.settings,
                title="Page not in the corpus",
            )
        except AddressNotAllowed as exc:
            return error_page(
                url, f"{exc} Go back or search again.", self.settings, title="This address is not allowed"
            )
        except FetchError as exc:
            return error_page(url, f"This page could not be loaded: {exc}", self.settings)
        others = [self.question, *self._episode.reference_answers]
        if shares_ngram(page.plain, others, self.settings.censor_ngram):
            return error_page(
                url,
                "This page was removed because it contains the question or its answer.",
                self.settings,
                title="Censored page",
            )
        return page

    def _find(self, command: Command) -> tuple[str, str]:
        cursor, page = self._episode.cursor, self.page
        if not page.lines:
            raise InvalidCommand("There is no page text to search: search first.")
        start = cursor.find_offset + 1 if cursor.find_offset is not None else page.line_starts[cursor.top]
        position = find(page.plain, command.argument, start)
        display = f"Find in page: {command.argument}"
        if position is None:
            return display, f"{command.argument!r} was not found on this page."
        cursor.top = self._clamp(page.line_of(position) - FIND_LINES_ABOVE)
        cursor.find_offset = position
        return display, "Wrapped to the top of the page." if position < start else ""

    def _quote(self, command: Command) -> tuple[str, str]:
        page = self.page
        span = quote_span(page.plain, command.argument) if page.lines else None
        if span is None:
            raise InvalidCommand("That text is not on this page, so it cannot be quoted.")
        extract = page.plain[span[0] : span[1]]
        message = ""
        if len(extract) >= self.quote_chars_left:
            extract = extract[: self.quote_chars_left].rstrip()
            self._episode.end_reason = EndReason.QUOTE_LIMIT
            message = "The quote budget is used up: browsing has ended."
        self._episode.quotes.append(
            Quote(title=page.title, url=page.url, domain=page.domain, extract=extract)
        )
        return QUOTE_DISPLAY, message

    def _scroll(self, command: Command) -> tuple[str, str]:
        cursor = self._episode.cursor
        step = int(command.argument) * self.settings.window_lines
        before = cursor.top
        cursor.top = self._clamp(before + step if command.kind == Kind.SCROLL_DOWN else before - step)
        cursor.find_offset = None
        verb = "down" if command.kind == Kind.SCROLL_DOWN else "up"
        edge = "bottom" if verb == "down" else "top"
        return (
            f"Scrolled {verb} {command.argument}",
            "" if cursor.top != before else f"Already at the {edge}.",
        )

    def _top(self, command: Command) -> tuple[str, str]:
        self._episode.cursor.top, self._episode.cursor.find_offset = 0, None
        return "Top", ""

    def _back(self, command: Command) -> tuple[str, str]:
        if not self._episode.history:
            raise InvalidCommand("There is no previous page to go back to.")
        self._episode.cursor = self._episode.history.pop()
        return "Back", ""

    def _end(self, command: Command) -> tuple[str, str]:
        reason = EndReason(command.argument.lower())
        if reason == EndReason.ANSWER and not self._episode.quotes:
            raise InvalidCommand("Answering needs at least one quote: quote a supporting passage first.")
        self._episode.end_reason = reason
        return f"End: {command.argument}", ""

    def remove_quote(self, number: int) -> Quote:
        """Take quote ``number`` (from 1, as people see them numbered) off the list; InvalidCommand when
        there is no such quote. A person's edit, not a command of the language (models never remove): it
        costs no action and frees its part of the quote budget. From then on the observation shows the
        quote in neither the quotes nor the past actions, and the trajectory a model learns from leaves
        out the Quote that made it (``trajectory.model_commands``), as it leaves out invalid actions."""
        quotes = self._episode.quotes
        if not 1 <= number <= len(quotes):
            held = f"quotes are numbered 1 to {len(quotes)}" if quotes else "there are no quotes"
            raise InvalidCommand(f"There is no quote {number} ({held}).")
        action = self.quote_actions()[number - 1]
        quote = quotes.pop(number - 1)
        self._episode.removed_quotes.append(RemovedQuote(action, len(self._episode.actions), quote))
        return quote

    def reopen(self) -> bool:
        """Go back to browsing after "End: Answer" (the answer step), while actions remain."""
        if self.end_reason != EndReason.ANSWER or self.actions_left == 0:
            return False
        self._episode.end_reason = None
        return True

    def _clamp(self, top: int) -> int:
        return max(0, min(top, len(self.page.lines) - self.settings.window_lines))

    # --- persistence -------------------------------------------------------------------------------
    def state(self) -> dict:
        """Everything needed to resume the episode, as JSON-compatible data (pages included)."""
        episode = self._episode
        return {
            "version": STATE_VERSION,
            "settings": self.settings.to_dict(),
            "question": episode.question,
            "reference_answers": list(episode.reference_answers),
            "pages": {digest: page.to_dict() for digest, page in episode.pages.items()},
            "cursor": vars(episode.cursor).copy(),
            "history": [vars(cursor).copy() for cursor in episode.history],
            "quotes": [quote.to_dict() for quote in episode.quotes],
            "actions": [vars(action).copy() for action in episode.actions],
            "end_reason": episode.end_reason.value if episode.end_reason else None,
            "removed_quotes": [removal.to_dict() for removal in episode.removed_quotes],
        }

    @classmethod
    def from_state(
        cls,
        backend: SearchBackend,
        state: dict,
        page_loader: Callable[[str], Page] | None = None,
        preload: Sequence[str] = (),
    ) -> Browser:
        """The browser ``state()`` described. ``state["pages"]`` may hold only some pages when
        ``page_loader`` fetches the others (by digest) the first time they are needed; ``preload``
        names pages to fetch now (so a missing snapshot fails here, not halfway through a step)."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported browser state version {state.get('version')!r}")
        browser = cls(backend, BrowserSettings.from_dict(state["settings"]))
        pages = {digest: Page.from_dict(page) for digest, page in state["pages"].items()}
        browser._episode = _Episode(
            question=state["question"],
            reference_answers=tuple(state["reference_answers"]),
            pages=_Pages(pages, page_loader),
            cursor=_Cursor(**state["cursor"]),
            history=[_Cursor(**cursor) for cursor in state["history"]],
            quotes=[Quote.from_dict(quote) for quote in state["quotes"]],
            actions=[Action(**action) for action in state["actions"]],
            end_reason=EndReason(state["end_reason"]) if state["end_reason"] else None,
            # (states saved before quotes could be removed have no such list)
            removed_quotes=[RemovedQuote.from_dict(r) for r in state.get("removed_quotes", [])],
        )
        browser._episode.pages.ensure(preload)
        return browser


def recorded_pages(state: dict) -> dict[str, Page]:
    """The pages an episode opened, by request, from its state: what a replay needs."""
    return {
        action["request"]: Page.from_dict(state["pages"][action["opened"]])
        for action in state["actions"]
        if action.get("request") and action.get("opened") in state["pages"]
    }


def removed_quote_actions(state: dict) -> set[int]:
    """The indexes of the Quote actions whose quotes the person removed, from an episode's state."""
    return {removal["action"] for removal in state.get("removed_quotes", [])}
