"""The demo's step-review batch (issue 38): episodes browsed on the demo corpus by a fixed script, so a
newcomer meets the step-review kind at once. No model and no person browsed them: each is a model-kind
episode whose ``policy`` says it is the demo's script. The script searches the question, clicks the page of
a hand-written demo answer's first quote (``demo_answers``, checked verbatim against the corpus), quotes it
and answers with that answer; in every other episode it first clicks a wrong result and goes back, so a
reviewer has a bad step to find. At each click it records the other click as a candidate it rejected (the
script's scores: 1 the click made, 0 the other), so the demo has step preferences to judge too."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from annotation.demo import DEMO_CORPUS_NAME
from annotation.demonstrations.model_episodes import ActionRecord, store_model_episode
from annotation.feedback.batch_settings import BatchSettings
from annotation.feedback.demo_answers import load_demo_answers
from annotation.feedback.step_batches import create_step_items
from annotation.feedback.step_pairs import candidate_pairs
from annotation.models import (
    Answer,
    Episode,
    FeedbackBatch,
    Question,
)
from browser.engine.browser import Browser
from browser.services import backend_for, browser_settings

DEMO_STEP_BATCH = "FreshWiki demo: step review"
DEMO_PREFERENCE_BATCH = "FreshWiki demo: step preference"
DEMO_POLICY = "demo script (no model: a fixed search, click, quote and answer)"
EPISODES = 2


def _link_to(browser: Browser, url: str) -> int | None:
    return next((i for i, link in enumerate(browser.page.links) if link.url == url), None)


def browse_by_script(
    browser: Browser, question: str, quote: dict[str, str], *, detour: bool
) -> list[ActionRecord]:
    """Run the script in ``browser``: search the question, (with ``detour``) click a wrong result and go
    back, click the quote's page, quote it, end. Each step recorded as the model would have seen it."""
    steps: list[ActionRecord] = []

    def run(command: str, rejected: str = "") -> None:
        observation, before = browser.observation(), browser.page.digest
        result = browser.step(command)
        candidates = (
            ({"command": command, "score": 1.0}, {"command": rejected, "score": 0.0}) if rejected else ()
        )
        after = browser.page.digest
        steps.append(
            ActionRecord(observation, command, result.valid, result.message, before, after, candidates)
        )

    browser.reset(question)
    run(f"Search {question}")
    target = _link_to(browser, quote["url"])
    if target is None:
        raise ValueError(f"the search for {question!r} does not find {quote['url']}")
    wrong = next((i for i in range(len(browser.page.links)) if i != target), None)
    rejected = "" if wrong is None else f"Clicked on link {wrong}"
    if detour and wrong is not None:
        run(rejected, rejected=f"Clicked on link {target}")
        run("Back")
    run(f"Clicked on link {target}", rejected=rejected)
    run(f"Quote: {quote['extract']}")
    run("End: Answer")
    return steps


def _save(question: Question, browser: Browser, steps: Sequence[ActionRecord], answer: str) -> Episode:
    return store_model_episode(
        question=question,
        policy=DEMO_POLICY,
        browser=browser,
        actions=steps,
        answer=answer,
        end_reason=browser.end_reason.value if browser.end_reason else "",
        corpus=DEMO_CORPUS_NAME,
        search="local",
    )


def _complete_answers() -> list[Answer]:
    """The demo's complete answers with a quote, the last questions first: the first ones are the sampling
    quick-start's (``demo.LOOP_QUESTIONS``), which the demo labeler is to meet first in its batch."""
    answers = [a for a in load_demo_answers() if a.source.get("quality") == "complete" and a.quotes]
    return sorted(answers, key=lambda answer: -answer.question_id)


@transaction.atomic
def create_demo_step_batch() -> list[FeedbackBatch]:
    """The demo's step-review batch of ``EPISODES`` scripted episodes, and its step-preference batch of
    their clicks (once: [] when they exist)."""
    if FeedbackBatch.objects.filter(name=DEMO_STEP_BATCH).exists():
        return []
    search = backend_for(DEMO_CORPUS_NAME)
    made = []
    for number, answer in enumerate(_complete_answers()[:EPISODES]):
        browser = Browser(search, browser_settings())
        steps = browse_by_script(browser, answer.question.text, answer.quotes[0], detour=number % 2 == 1)
        made.append(_save(answer.question, browser, steps, answer.text))
    demo = "Demo: episodes browsed by a fixed script on the FreshWiki demo corpus."
    review = BatchSettings(
        name=DEMO_STEP_BATCH,
        template="step_review",
        instructions=f"{demo} Rate each action as the page looked before it; one episode takes a wrong turn.",
        required_probability=0.0,
    )
    batches = [create_step_items(None, review, made, {"source": "demo script", "episodes": len(made)})]
    pairs = candidate_pairs(made)
    preference = BatchSettings(
        name=DEMO_PREFERENCE_BATCH,
        template="step_preference",
        instructions=f"{demo} At each click, which result was the better one to open?",
        required_probability=0.0,
    )
    origin = {"source": "demo script", "states": len(pairs)}
    steps = [pair.as_step() for pair in pairs]
    batches.append(create_step_items(None, preference, [pair.episode for pair in pairs], origin, steps=steps))
    return batches
