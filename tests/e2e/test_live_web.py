"""A demonstration on the live web, in Chromium: a batch searched with SearXNG (a SearXNG-compatible server
on 127.0.0.1, tests/fake_web.py), results and pages through the safe fetcher, a refused link shown as an
error page, a quote from a live page, and the answer stored with its source."""

import pytest
from playwright.sync_api import Page, expect

from annotation.demonstrations.batches import create_demonstration_batch
from annotation.models import Episode, EpisodeStatus, Question
from annotation.questions.service import import_questions
from tests.conftest import make_user
from tests.e2e.test_demonstration import SELECT_SENTENCE

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_demonstrator_answers_from_the_live_web(page: Page, fake_web, freshwiki, django_user_model):
    import_questions(b'{"question": "What causes the aurora borealis?"}', filename="q.jsonl", dataset="live")
    create_demonstration_batch(None, "Live web", Question.objects.filter(dataset="live"), search="searxng")
    make_user(django_user_model, "dana", "demonstrator")

    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("dana")
    page.get_by_label("Password").fill("dana-pw")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Start next question").click()
    expect(page.locator("#corpus-line")).to_have_text("Searching the live web with SearXNG")

    page.get_by_label("Search query").fill("aurora solar wind")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#page-title")).to_have_text("Search results for: aurora solar wind")
    expect(page.locator("#page-text")).not_to_contain_text("A thread")  # a blocklisted result
    page.get_by_role("link", name="Aurora borealis", exact=True).click()
    expect(page.locator("#page-title")).to_have_text("Aurora borealis (127.0.0.1)")

    page.get_by_role("link", name="instance metadata", exact=True).click()
    expect(page.locator("#page-title")).to_have_text("This address is not allowed (169.254.169.254)")
    expect(page.locator("#page-text")).to_contain_text("cloud metadata address")
    page.get_by_role("button", name="Back").click()
    expect(page.locator("#page-title")).to_have_text("Aurora borealis (127.0.0.1)")

    assert page.evaluate(SELECT_SENTENCE, "charged particles from the solar wind")
    page.get_by_role("button", name="Quote").click()
    expect(page.locator(".quotes blockquote")).to_have_text("charged particles from the solar wind")
    page.get_by_role("button", name="End: Answer").click()
    expect(page.get_by_text("[1] Aurora borealis (127.0.0.1)")).to_be_visible()
    page.get_by_label("Answer").fill("Charged particles from the solar wind [1].")
    page.get_by_role("button", name="Submit answer").click()
    expect(page.get_by_role("status")).to_contain_text("Answer submitted")

    episode = Episode.objects.get()
    assert (episode.status, episode.search) == (EpisodeStatus.FINISHED, "searxng")
    assert episode.state["quotes"][0]["url"] == f"{fake_web.url}/wiki/aurora"
    assert fake_web.count("/searxng/search") == 1
