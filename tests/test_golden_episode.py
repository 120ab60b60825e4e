"""A scripted episode on the shipped FreshWiki corpus, compared byte for byte with a reviewed transcript.

When the environment's output changes on purpose, regenerate with
``UPDATE_GOLDEN=1 scripts/test.sh tests/test_golden_episode.py`` and review the diff.
"""

import os

import pytest

from browser.corpus.readers import read_corpus
from browser.engine.browser import Browser
from browser.engine.settings import BrowserSettings
from browser.search.local import LocalIndex
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden" / "freshwiki_episode.txt"
FRESHWIKI = ROOT / "data" / "corpus" / "freshwiki" / "json"
QUESTION = "Who won the 2022 AFL Grand Final, and by how much?"
COMMANDS = [
    "Search AFL Grand Final 2022 winner",
    "Clicked on link 0",
    "Find in page: margin of",
    "Quote: The match, attended by 100,024 spectators━tenth VFL/AFL premiership.",
    "Scrolled down 1",
    "Clicked on link 99",
    "Back",
    "Search Norm Smith Medal",
    "Back",
    "End: Answer",
]


@pytest.fixture(scope="module")
def freshwiki_index(tmp_path_factory):
    index = LocalIndex.open(tmp_path_factory.mktemp("freshwiki"))
    index.add(read_corpus(FRESHWIKI, "freshwiki"))
    return index


def transcript(index: LocalIndex) -> str:
    browser = Browser(index, BrowserSettings())
    browser.reset(QUESTION)
    parts = [browser.observation()]
    for command in COMMANDS:
        browser.step(command)
        parts += [f"<<< {command}", browser.observation()]
    parts += ["<<< answer prompt", browser.answer_prompt()]
    return "\n".join(parts) + "\n"


def test_scripted_freshwiki_episode_matches_the_golden_transcript(freshwiki_index):
    text = transcript(freshwiki_index)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")
