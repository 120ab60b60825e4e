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
from tests.test_exports import export_rows

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


def test_a_removed_quote_is_left_out_of_the_bc_examples_as_if_never_taken(freshwiki, dana):
    import_questions(json.dumps({"question": QUESTION}).encode(), filename="q.jsonl")
    Question.objects.update(split="bc")
    episode = service.next_episode(dana)

    def act(command: str) -> None:
        episode.refresh_from_db()
        service.record_action(episode.pk, dana, command, uuid.uuid4(), episode.version)

    for command in ("Search AFL Grand Final 2022", "Clicked on link 0", "Quote: won by Geelong"):
        act(command)
    act("Quote: margin of 81 points")
    episode.refresh_from_db()
    service.remove_quote(episode.pk, dana, 1, uuid.uuid4(), episode.version)  # "won by Geelong"
    act("End: Answer")
    assert service.submit_answer(episode.pk, dana, "By 81 points [1].") == []
    examples = bc_examples(Episode.objects.get())
    (row,) = export_rows("demonstrations")  # the export's trajectory is the one trained on
    assert row["commands_merged"] == [example["completion"] for example in examples[:-1]]
    assert [removal["quote"]["extract"] for removal in row["removed_quotes"]] == ["won by Geelong"]
    assert [example["completion"] for example in examples] == [
        "Search AFL Grand Final 2022",
        "Clicked on link 0",
        "Quote: margin of 81 points",
        "End: Answer",
        "By 81 points [1].",
    ]
    quotes_seen = [example["prompt"].split("♦Past actions")[0] for example in examples[:-1]]
    assert not any("won by Geelong" in quotes for quotes in quotes_seen)
    # What the person saw before "End: Answer", byte for byte, but for the action the removed Quote cost.
    seen = Episode.objects.get().actions.get(command="End: Answer").observation_before
    assert examples[3]["prompt"] == seen.replace("♦Actions left: 96", "♦Actions left: 97")
    assert examples[-1]["prompt"].endswith(
        "[1] 2022 AFL Grand Final (en.wikipedia.org)\n\nmargin of 81 points■"
    )
