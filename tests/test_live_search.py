"""Live-web search providers against real HTTP servers on 127.0.0.1 (tests/fake_web.py): SearXNG and Brave
results on the same results page as the local index, errors as error pages, the fetcher's refusals, the
blocklist and censoring on live pages, the web cache's policies, and a live episode recorded through the
demonstration service and replayed byte for byte with the network gone."""

from __future__ import annotations

import io
import time
import uuid
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation.demonstrations import service
from annotation.demonstrations.batches import create_demonstration_batch
from annotation.demonstrations.training_data import bc_examples
from annotation.models import DemonstrationBatch, Episode, EpisodeAction, Question
from annotation.questions.service import import_questions
from browser.engine.browser import Browser
from browser.engine.settings import BrowserSettings
from browser.fetch import SafeFetcher, refusal_counts
from browser.models import WebCacheEntry
from browser.search.web import SearxngSearch, api_fetcher
from browser.sources import describe_source, open_source, provider_choices, provider_status, source_error

pytestmark = pytest.mark.django_db

AURORA = "What causes the aurora borealis?"


def browse(search: str, question: str = AURORA, *commands: str) -> Browser:
    browser = Browser(open_source(search), BrowserSettings())
    browser.reset(question)
    for command in commands:
        browser.step(command)
    return browser


def test_searxng_results_read_like_the_local_indexs(fake_web):
    browser = browse("searxng", AURORA, "Search aurora solar wind")
    text = browser.observation()
    assert "Search results for: aurora solar wind" in text
    assert "【0†Aurora borealis†127.0.0.1】" in text and "【1†Solar wind†127.0.0.1】" in text
    assert "The aurora borealis is a natural light display" in text  # the snippet, as plain text
    assert "ftp://" not in text and "Not a web page" not in text  # only http(s) results
    assert "reddit" not in text and "A thread" not in text  # blocklisted results are removed


def test_brave_sends_its_key_and_its_marked_up_snippets_become_plain_text(fake_web, settings):
    text = browse("brave", AURORA, "Search tides Moon").observation()
    assert "【0†Tides†127.0.0.1】" in text and "<strong>" not in text
    assert "rotation of the Earth & more" in text
    settings.BRAVE_API_KEY = "a-wrong-key"
    text = browse("brave", AURORA, "Search tides").observation()
    assert "The search failed: Brave Search answered 401." in text


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("ratelimited", "SearXNG is limiting requests; try again in a moment."),
        ("broken", "SearXNG answered 500."),
        ("garbled", "SearXNG: Pages of type text/html are not fetched"),
    ],
)
def test_a_provider_that_misbehaves_gives_an_error_page_not_a_crash(fake_web, query, message):
    browser = browse("searxng", AURORA, f"Search {query}")
    assert browser.page.kind == "error" and message in browser.observation()
    assert browser.actions[-1].valid  # the search itself was a valid action


def test_a_provider_that_does_not_answer_in_time_is_cut_off(fake_web):
    client = SearxngSearch(
        fake_web.searxng_url, pages=SafeFetcher(), api=api_fetcher(fake_web.url, total_timeout=1)
    )
    browser = Browser(client, BrowserSettings())
    browser.reset(AURORA)
    browser.step("Search sluggish")
    assert "The search failed: SearXNG: The page did not arrive within 1 seconds" in browser.observation()


def test_live_pages_render_like_corpus_pages_with_blocked_links_gone(fake_web):
    browser = browse("searxng", AURORA, "Search aurora", "Clicked on link 0")
    text = browser.observation()
    assert "♦Title\nAurora borealis (127.0.0.1)" in text
    assert "【0†the solar wind】" in text  # same host: no domain
    assert "a forum thread" in text and "reddit.com" not in text  # the link's text stays, the link goes


def test_a_link_to_a_refused_address_opens_an_error_page_and_is_counted(fake_web):
    before = refusal_counts().get("address_not_allowed", 0)
    browser = browse("searxng", AURORA, "Search aurora", "Clicked on link 0")
    metadata = next(i for i, link in enumerate(browser.page.links) if "169.254" in link.url)
    result = browser.step(f"Clicked on link {metadata}")
    assert result.valid and browser.page.kind == "error"
    assert "♦Title\nThis address is not allowed" in browser.observation()
    assert "cloud metadata address" in browser.observation()
    assert refusal_counts()["address_not_allowed"] == before + 1


def test_with_default_settings_a_result_on_a_loopback_address_is_refused(fake_web, settings):
    """The operator's SearXNG may live on 127.0.0.1 (its API is allowed), but the pages it points at are
    fetched under the full policy: loopback results are refused unless a test allows them."""
    settings.FETCH_ALLOW_LOOPBACK = False
    browser = browse("searxng", AURORA, "Search aurora", "Clicked on link 0")
    assert "This address is not allowed" in browser.observation()
    assert "loopback address" in browser.observation()
    assert fake_web.count("/wiki/") == 0  # refused before any connection


def test_a_live_page_quoting_the_question_is_censored(fake_web):
    question = "The aurora borealis is a natural light display seen in high-latitude regions: why?"
    browser = browse("searxng", question, "Search aurora", "Clicked on link 0")
    assert "♦Title\nCensored page" in browser.observation()


def test_the_cache_serves_a_query_once_a_day(fake_web, settings):
    browse("searxng", AURORA, "Search aurora", "Clicked on link 0")
    browse("searxng", AURORA, "Search aurora", "Clicked on link 0")
    assert fake_web.count("/searxng/search") == 1 and fake_web.count("/wiki/aurora") == 1
    assert WebCacheEntry.objects.filter(provider="searxng").count() == 2  # the results and the page
    WebCacheEntry.objects.update(day=timezone.now().date() - timedelta(days=1))
    browse("searxng", AURORA, "Search aurora")
    assert fake_web.count("/searxng/search") == 2  # yesterday's answer is not today's
    settings.WEB_CACHE = "forever"
    WebCacheEntry.objects.filter(day=timezone.now().date()).delete()
    WebCacheEntry.objects.update(day=timezone.now().date() - timedelta(days=30))
    browse("searxng", AURORA, "Search aurora", "Clicked on link 0")
    assert fake_web.count("/searxng/search") == 2 and fake_web.count("/wiki/aurora") == 1
    settings.WEB_CACHE = "off"
    browse("searxng", AURORA, "Search aurora")
    browse("searxng", AURORA, "Search aurora")
    assert fake_web.count("/searxng/search") == 4


def test_failures_are_not_cached(fake_web):
    browse("searxng", AURORA, "Search broken")
    browse("searxng", AURORA, "Search broken")
    assert fake_web.count("/searxng/search") == 2 and not WebCacheEntry.objects.exists()


def test_within_an_episode_a_request_made_again_shows_the_same_page(fake_web, settings):
    settings.WEB_CACHE = "off"
    browser = browse("searxng", AURORA, "Search aurora", "Clicked on link 0", "Back", "Clicked on link 0")
    browser.step("Search aurora")
    assert fake_web.count("/searxng/search") == 1 and fake_web.count("/wiki/aurora") == 1


def test_providers_are_offered_and_checked_only_when_configured(settings, fake_web):
    assert [name for name, _ in provider_choices()] == ["local", "searxng", "brave"]
    assert source_error("searxng") == "" and "leave it empty" in source_error("searxng", "freshwiki")
    settings.SEARXNG_URL = None
    settings.BRAVE_API_KEY = None
    assert [name for name, _ in provider_choices()] == ["local"]
    assert "set SEARXNG_URL" in source_error("searxng")
    assert "no search provider 'bing'" in source_error("bing")
    states = {row["name"]: row["state"] for row in provider_status()}
    assert states["local"] == "ready" and states["brave"].startswith("not configured: set BRAVE_API_KEY")
    # An episode begun on a provider since unconfigured shows an error page, not a server error.
    assert "not configured here" in browse("searxng", AURORA, "Search aurora").observation()


def test_the_console_checks_each_live_provider_with_a_test_query(client_for, alice, fake_web):
    client = client_for(alice)
    html = client.get("/console/").content.decode()
    assert "SearXNG (live web)" in html and "configured; not checked yet" in html
    html = client.post("/console/providers/check/", headers={"HX-Request": "true"}).content.decode()
    assert html.count("answers: ") == 2 and "results for &#x27;Wikipedia&#x27;" in html
    fake_web.stop()
    html = client.post("/console/providers/check/", headers={"HX-Request": "true"}).content.decode()
    assert html.count("failed: ") == 2


@pytest.fixture
def aurora_question(freshwiki):
    import_questions(f'{{"question": "{AURORA}"}}'.encode(), filename="q.jsonl", dataset="live")
    return Question.objects.filter(dataset="live")


def act(episode: Episode, user, command: str) -> None:
    episode.refresh_from_db()
    service.record_action(episode.pk, user, command, uuid.uuid4(), episode.version)


def test_a_live_episode_replays_byte_for_byte_with_the_network_gone(fake_web, aurora_question, dana):
    batch = create_demonstration_batch(None, "Live", aurora_question, search="searxng")
    episode = service.next_episode(dana)
    assert (episode.batch, episode.search, episode.corpus) == (batch, "searxng", "")
    assert describe_source(episode.search) == "Searching the live web with SearXNG"
    for command in (
        "Search aurora solar wind",
        "Clicked on link 0",
        "Find in page: charged",
        "Quote: charged",
    ):
        act(episode, dana, command)
    act(episode, dana, "Clicked on link 0")
    act(episode, dana, "Quote: stream of charged particles")
    act(episode, dana, "End: Answer")
    assert service.submit_answer(episode.pk, dana, "Charged particles from the solar wind [1][2].") == []
    fake_web.stop()
    episode.refresh_from_db()
    recorded = list(EpisodeAction.objects.filter(episode=episode).order_by("index"))
    examples = bc_examples(episode)
    assert [e["prompt"] for e in examples[: len(recorded)]] == [a.observation_before for a in recorded]
    assert examples[-1]["completion"] == "Charged particles from the solar wind [1][2]."
    assert "[2] Solar wind (127.0.0.1)" in examples[-1]["prompt"]


def test_batches_and_sampling_runs_refuse_an_unconfigured_provider(
    settings, aurora_question, client_for, alice
):
    settings.SEARXNG_URL = None
    with pytest.raises(ValueError, match=r"SearXNG \(live web\) is not configured here"):
        create_demonstration_batch(None, "Live", aurora_question, search="searxng")
    with pytest.raises(CommandError, match="not configured here"):
        call_command("create_demonstration_batch", "Live", "--dataset", "live", "--search", "searxng")
    client_settings = {"name": "Live", "dataset": "live", "limit": 5, "overlap": 1, "search": "searxng"}
    client = client_for(alice)
    response = client.post("/console/demonstrations/", client_settings)
    assert (
        response.status_code == 400
        and "searxng is not one of the available choices" in response.content.decode()
    )
    response = client.post(
        "/api/sampling-runs",
        {"search": "searxng", "questions": {"dataset": "live"}},
        content_type="application/json",
    )
    assert response.status_code == 400 and "not configured here" in response.content.decode()
    assert "search" in response.json()


def test_the_console_form_creates_a_batch_searched_on_the_live_web(
    client_for, alice, aurora_question, fake_web
):
    client = client_for(alice)
    assert "SearXNG (live web)" in client.get("/console/demonstrations/").content.decode()
    data = {"name": "Live", "dataset": "live", "limit": 5, "overlap": 1, "search": "searxng"}
    response = client.post("/console/demonstrations/", data | {"corpus": "freshwiki"})
    assert response.status_code == 400 and "leave it empty for a live provider" in response.content.decode()
    assert client.post("/console/demonstrations/", data).status_code == 302
    assert DemonstrationBatch.objects.get().search == "searxng"
    assert "searxng (live web)" in client.get("/console/demonstrations/").content.decode()


def test_a_page_fetch_refused_by_the_rate_limit_is_asked_again_later(fake_web, settings):
    settings.FETCH_MIN_INTERVAL = 1
    settings.WEB_CACHE = "off"
    browser = browse(
        "searxng", AURORA, "Search aurora solar wind", "Clicked on link 0", "Back", "Clicked on link 1"
    )
    assert "This page could not be loaded: Too many fetches from 127.0.0.1" in browser.observation()
    time.sleep(1.1)
    browser.step("Back")
    browser.step("Clicked on link 1")
    assert "♦Title\nSolar wind (127.0.0.1)" in browser.observation()


def test_the_browse_command_searches_a_live_provider(fake_web, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("Search tides\n"))
    call_command("browse", "--search", "brave", "--question", "Why are there tides?")
    assert "【0†Tides†127.0.0.1】" in capsys.readouterr().out
    with pytest.raises(CommandError, match="leave it empty"):
        call_command("browse", "--search", "brave", "--corpus", "freshwiki", "--question", "Q?")
