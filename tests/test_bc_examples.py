"""A demonstration is exactly the model's text: stored observations equal `browse`, and BC pairs replay."""

from __future__ import annotations

import io
import json
import sys
import uuid

import pytest
from django.core.management import call_command

from annotation.demonstrations import service
from annotation.demonstrations.training_data import bc_examples
from annotation.models import Episode, Question
from annotation.questions.service import import_questions

pytestmark = pytest.mark.django_db
QUESTION = "Who won the 2022 AFL Grand Final, and by how much?"
COMMANDS = [
    "Search AFL Grand Final 2022",
    "Clicked on link 0",
    "Scrolled down 1",
    "Scrolled down 1",
    "Quote: not on the page at all",
    "Scrolled up 1",
    "Find in page: margin of",
    "Quote: won by Geelong by a margin of 81 points",
    "Back",
    "Clicked on link 0",
    "End: Answer",
]


@pytest.fixture
def finished_episode(freshwiki, dana):
    import_questions(json.dumps({"question": QUESTION}).encode(), filename="q.jsonl")
    Question.objects.update(split="bc")
    episode = service.next_episode(dana)
    for command in COMMANDS:
        episode.refresh_from_db()
        service.record_action(episode.pk, dana, command, uuid.uuid4(), episode.version)
    assert service.submit_answer(episode.pk, dana, "Geelong, by 81 points [1].") == []
    return Episode.objects.get()


def test_each_stored_observation_is_what_browse_prints_for_the_same_commands(finished_episode, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{command}\n" for command in COMMANDS)))
    out = io.StringIO()
    call_command("browse", "--question", QUESTION, "--json", stdout=out)
    printed = [json.loads(line)["observation"] for line in out.getvalue().splitlines()]
    stored = list(finished_episode.actions.order_by("index").values_list("observation_before", flat=True))
    assert len(stored) == len(COMMANDS)
    assert stored == printed[: len(COMMANDS)]


def test_bc_examples_merge_scrolls_drop_invalid_actions_and_end_with_the_answer(finished_episode):
    examples = bc_examples(finished_episode)
    commands = [example["completion"] for example in examples]
    assert commands == [
        "Search AFL Grand Final 2022",
        "Clicked on link 0",
        "Scrolled down 2",
        "Scrolled up 1",
        "Find in page: margin of",
        "Quote: won by Geelong by a margin of 81 points",
        "Back",
        "Clicked on link 0",
        "End: Answer",
        "Geelong, by 81 points [1].",
    ]
    assert examples[0]["prompt"] == finished_episode.actions.get(index=0).observation_before
    assert (
        "♦Past actions\nSearch AFL Grand Final 2022\nClick 2022 AFL Grand Final en.wikipedia.org\n"
        in examples[2]["prompt"]
    )
    assert "Scrolled down 2\n♦Title" in examples[3]["prompt"]
    assert examples[-1]["prompt"].startswith(f"{QUESTION}■[1] 2022 AFL Grand Final (en.wikipedia.org)\n\n")
    assert examples[-1]["prompt"].endswith("won by Geelong by a margin of 81 points■")
