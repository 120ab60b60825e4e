"""Corpora on the Django side: import_corpus, the FreshWiki demo corpus, snapshots, the browse CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from browser.engine.browser import Browser
from browser.models import Corpus, CorpusImport, PageSnapshot
from browser.services import backend_for, browser_settings, import_corpus, store_snapshots
from core.models import AuditEntry
from tests.conftest import ROOT, database_url_for_tests

FRESHWIKI = ROOT / "data" / "corpus" / "freshwiki" / "json"
pytestmark = pytest.mark.django_db


def test_import_corpus_indexes_freshwiki_and_records_the_import(capsys):
    call_command("import_corpus", "freshwiki", str(FRESHWIKI))
    assert "freshwiki: 100 pages imported (freshwiki); 100 pages in the corpus" in capsys.readouterr().out
    corpus = Corpus.objects.get(name="freshwiki")
    assert corpus.document_count == 100
    assert CorpusImport.objects.get().record_count == 100
    assert AuditEntry.objects.filter(action="corpus.import").count() == 1
    results = backend_for("freshwiki").search("Odisha train collision", 3)
    assert results[0].title == "2023 Odisha train collision"


def test_a_bad_record_leaves_the_corpus_as_it_was(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"url": "https://example.org/a", "title": "A", "text": "alpha bravo"}\n')
    import_corpus("mine", good)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"url": "https://example.org/b", "title": "B", "text": "charlie"}\n'
        '{"url": "ftp://x", "title": "C", "text": "d"}\n'
    )
    with pytest.raises(CommandError, match=r"bad.jsonl: line 2: .*; the corpus is unchanged"):
        call_command("import_corpus", "mine", str(bad))
    assert backend_for("mine").count() == 1
    assert backend_for("mine").search("charlie") == []
    assert Corpus.objects.get(name="mine").document_count == 1
    assert CorpusImport.objects.count() == 1


def test_import_corpus_refuses_bad_names_and_missing_paths(tmp_path):
    with pytest.raises(CommandError, match="no such file or folder"):
        call_command("import_corpus", "mine", str(tmp_path / "nothing.jsonl"))
    with pytest.raises(CommandError, match="letters, digits, - and _ only"):
        call_command("import_corpus", "../escape", str(FRESHWIKI))
    assert not Corpus.objects.exists()


def test_pages_are_stored_once_per_content(tmp_path):
    import_corpus("freshwiki", FRESHWIKI)
    browser = Browser(backend_for("freshwiki"), browser_settings())
    browser.reset("What happened at the 2022 Winter Olympics opening ceremony?")
    for command in [
        "Search Winter Olympics opening ceremony",
        "Clicked on link 0",
        "Back",
        "Clicked on link 0",
    ]:
        assert browser.step(command).valid
    assert store_snapshots(browser.pages.values()) == 3  # blank, results, article: the article only once
    assert store_snapshots(browser.pages.values()) == 0
    article = PageSnapshot.objects.get(kind="page")
    assert article.title == "2022 Winter Olympics opening ceremony"
    assert article.digest == browser.page.digest


@pytest.mark.django_db(transaction=True)
def test_browse_cli_drives_the_environment_through_stdin(settings):
    import_corpus("freshwiki", FRESHWIKI)
    env = {
        **os.environ,
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "CORPUS_INDEX_DIR": str(settings.CORPUS_INDEX_DIR),
    }
    commands = "Search Grammy Awards 2023\nClicked on link 0\nDance\nQuote: Grammy Awards\nEnd: Answer\n"
    result = subprocess.run(
        [sys.executable, "manage.py", "browse", "--question", "Who hosted the 65th Grammy Awards?", "--json"],
        input=commands,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["command"] for r in records] == [
        None,
        "Search Grammy Awards 2023",
        "Clicked on link 0",
        "Dance",
        "Quote: Grammy Awards",
        "End: Answer",
    ]
    assert records[0]["observation"].startswith("♦Question\nWho hosted the 65th Grammy Awards?\n♦Quotes\n")
    assert "♦Title\nSearch results for: Grammy Awards 2023" in records[1]["observation"]
    assert records[3]["valid"] is False and "Invalid action 'Dance'" in records[3]["message"]
    assert records[4]["quotes"][0]["extract"].lower() == "grammy awards"
    assert records[5]["done"] is True and records[5]["end_reason"] == "answer"
    assert records[5]["answer_prompt"].startswith("Who hosted the 65th Grammy Awards?■[1] ")
    assert PageSnapshot.objects.filter(kind="search").exists()

    text = subprocess.run(
        [sys.executable, "manage.py", "browse", "--question", "Q?"],
        input="Top\n",
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert text.returncode == 0 and text.stdout.count("♦Next action") == 2


def test_browse_explains_an_unknown_corpus():
    with pytest.raises(CommandError, match="There is no corpus 'nope'"):
        call_command("browse", "--corpus", "nope", "--question", "Q?")
