"""A demonstration batch names the corpus its questions are answered with: the console form, the command and
the service refuse a corpus that does not exist; its episodes search that corpus; the bc-split fallback uses
the default corpus and can be turned off (the demo does: its corpus cannot answer the bc questions)."""

from __future__ import annotations

import uuid

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.demonstrations import service
from annotation.demonstrations.batches import create_demonstration_batch
from annotation.models import DemonstrationBatch, Episode, Question
from annotation.questions.service import import_questions
from browser.corpus import CorpusRecord
from browser.models import Corpus
from browser.search import LocalIndex

pytestmark = pytest.mark.django_db

OKAPI_QUESTION = b'{"question": "Where does the okapi live?"}'


@pytest.fixture
def okapis(settings, freshwiki, tmp_path):
    """A second, one-page corpus next to FreshWiki (the shared FreshWiki index is linked, not copied)."""
    root = tmp_path / "two-corpora"
    root.mkdir()
    (root / "freshwiki").symlink_to(settings.CORPUS_INDEX_DIR / "freshwiki")
    settings.CORPUS_INDEX_DIR = root
    text = "Okapis\nThe okapi lives in the rainforests of the Congo."
    LocalIndex.open(root / "okapis").add(
        [CorpusRecord("https://zoo.example/okapi", "Okapis", text, "text/plain")]
    )
    return Corpus.objects.create(name="okapis", document_count=1)


@pytest.fixture
def okapi_question(freshwiki):
    import_questions(OKAPI_QUESTION, filename="okapi.jsonl", dataset="okapi")
    return Question.objects.filter(dataset="okapi")


def search(episode: Episode, user, query: str) -> str:
    episode.refresh_from_db()
    outcome = service.record_action(episode.pk, user, f"Search {query}", uuid.uuid4(), episode.version)
    return outcome.browser.observation()


def test_the_episodes_of_a_batch_search_the_batchs_corpus(okapis, okapi_question, dana):
    batch = create_demonstration_batch(None, "Okapis", okapi_question, corpus="okapis")
    episode = service.next_episode(dana)
    assert (episode.batch, episode.corpus) == (batch, "okapis")
    observation = search(episode, dana, "okapi")
    assert "zoo.example" in observation and "en.wikipedia.org" not in observation


def test_a_batch_without_a_corpus_and_the_bc_split_use_the_default_corpus(freshwiki, okapi_question, dana):
    create_demonstration_batch(None, "Default corpus", okapi_question)
    assert service.next_episode(dana).corpus == "freshwiki"
    import_questions(
        b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="afl.jsonl", dataset="afl"
    )
    Question.objects.filter(dataset="afl").update(split="bc")
    service.skip_episode(Episode.objects.get().pk, dana, "done with it")
    fallback = service.next_episode(dana)
    assert (fallback.question.dataset, fallback.batch, fallback.corpus) == ("afl", None, "freshwiki")


def test_a_batch_naming_an_unknown_corpus_is_refused_and_nothing_is_created(freshwiki, okapi_question):
    with pytest.raises(ValueError, match="There is no corpus 'wikipedia' \\(corpora: freshwiki\\)"):
        create_demonstration_batch(None, "Nope", okapi_question, corpus="wikipedia")
    assert not DemonstrationBatch.objects.exists()


def test_the_console_form_sets_the_corpus_and_refuses_an_unknown_one(
    settings, client_for, alice, okapis, okapi_question
):
    client = client_for(alice)
    form = {"name": "Okapis", "dataset": "okapi", "split": "", "limit": 10, "overlap": 1, "corpus": "okapis"}
    assert client.post(reverse("console:demonstration_batches"), form).status_code == 302
    assert DemonstrationBatch.objects.get().corpus == "okapis"
    refused = client.post(reverse("console:demonstration_batches"), {**form, "corpus": "wikipedia"})
    assert refused.status_code == 400 and "There is no corpus" in refused.content.decode()
    assert DemonstrationBatch.objects.count() == 1
    default = client.post(reverse("console:demonstration_batches"), {**form, "name": "Plain", "corpus": ""})
    assert default.status_code == 302
    page = client.get(reverse("console:demonstration_batches")).content.decode()
    assert "<td>okapis</td>" in page and "<td>freshwiki (default)</td>" in page
    assert "DEMONSTRATION_SPLIT_FALLBACK" not in page  # on: the bc split follows the batches
    settings.DEMONSTRATION_SPLIT_FALLBACK = False
    page = client.get(reverse("console:demonstration_batches")).content.decode()
    assert "<code>DEMONSTRATION_SPLIT_FALLBACK</code> is off" in page


def test_the_command_sets_the_corpus_and_refuses_an_unknown_one(okapis, okapi_question, capsys):
    call_command("create_demonstration_batch", "Okapis", "--dataset", "okapi", "--corpus", "okapis")
    assert "searching okapis: 1 page" in capsys.readouterr().out
    assert DemonstrationBatch.objects.get().corpus == "okapis"
    with pytest.raises(CommandError, match="There is no corpus 'wikipedia'"):
        call_command("create_demonstration_batch", "Nope", "--dataset", "okapi", "--corpus", "wikipedia")
    assert DemonstrationBatch.objects.count() == 1


def test_without_the_split_fallback_only_batch_questions_are_handed_out(
    settings, freshwiki, okapi_question, dana
):
    """The demo's rule: its corpus cannot answer TriviaQA or NQ, so the bc split is not its pool."""
    import_questions(b'{"question": "Who wrote Hamlet?"}', filename="trivia.jsonl", dataset="triviaqa")
    Question.objects.filter(dataset="triviaqa").update(split="bc")
    settings.DEMONSTRATION_SPLIT_FALLBACK = False
    assert service.open_question_count() == 0
    assert service.next_episode(dana) is None
    create_demonstration_batch(None, "Okapis", okapi_question)
    assert service.open_question_count() == 1
    episode = service.next_episode(dana)
    assert episode.question.dataset == "okapi"
    service.skip_episode(episode.pk, dana, "cannot find it")
    assert service.next_episode(dana) is None  # the batch is done for dana; no bc question instead
    settings.DEMONSTRATION_SPLIT_FALLBACK = True
    assert service.next_episode(dana).question.dataset == "triviaqa"


def test_the_demo_batch_names_the_demo_corpus(demo_site):
    from annotation.demo import DEMO_BATCH_NAME, DEMO_CORPUS_NAME

    assert DemonstrationBatch.objects.get(name=DEMO_BATCH_NAME).corpus == DEMO_CORPUS_NAME
