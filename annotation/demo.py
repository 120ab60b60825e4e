"""What ``load_demo`` loads: the shipped question sets (see NOTICE.md) and the demo accounts (the demo's
reward model is training's: ``training/demo.py``)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

DEMO_QUESTION_DIR = Path(settings.BASE_DIR) / "data" / "questions"
DEMO_QUESTION_FILES = (
    DEMO_QUESTION_DIR / "TruthfulQA.csv",
    DEMO_QUESTION_DIR / "triviaqa_sm_sub.jsonl",
    DEMO_QUESTION_DIR / "nq_open.jsonl",
    DEMO_QUESTION_DIR / "web_questions.jsonl",
    DEMO_QUESTION_DIR / "freshwiki_demo.jsonl",
)
# Questions written for the demo corpus, handed to demonstrators first.
DEMO_BATCH_NAME = "FreshWiki demo questions"
DEMO_BATCH_DATASET = "freshwiki_demo"
DEMO_CORPUS_NAME = "freshwiki"
DEMO_CORPUS_DIR = Path(settings.BASE_DIR) / "data" / "corpus" / "freshwiki" / "json"
# (user name = password, group, is admin)
DEMO_USERS = (
    ("demonstrator", "demonstrator", False),
    ("labeler", "labeler", False),
    # The workforce's journey (annotation.workforce.demo): a labeler still to pass the screening test, and
    # one whose gold accuracy has tripped the automatic pause.
    ("applicant", "labeler", False),
    ("drifter", "labeler", False),
    ("researcher", "researcher", False),
    ("admin", None, True),
)
