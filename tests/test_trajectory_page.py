"""The trajectory page replays an episode (issue 24): each step, numbered from 1, with the observation seen
before it (escaped, as preformatted text), the action, whether it was valid and why not, the quotes as they
were added and removed, the answer prompt and the answer, and the pages one click away. The same for a
person's demonstration and a model's sample; alice reads every episode, dana her own, erin none of dana's."""

from __future__ import annotations

import html as html_lib
import json
import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.demonstrations import service
from annotation.models import Episode, EpisodeKind, Question
from annotation.questions.service import import_questions
from browser.engine.page import BLANK_PAGE
from tests.conftest import make_user
from tests.test_bc_examples import COMMANDS, QUESTION

pytestmark = pytest.mark.django_db


def demonstrate(user, commands, question=QUESTION, answer="Geelong, by 81 points [1].") -> Episode:
    import_questions(json.dumps({"question": question}).encode(), filename="q.jsonl")
    Question.objects.update(split="bc")
    episode = service.next_episode(user)
    for command in commands:
        episode.refresh_from_db()
        service.record_action(episode.pk, user, command, uuid.uuid4(), episode.version)
    if answer:
        assert service.submit_answer(episode.pk, user, answer) == []
    return Episode.objects.get(pk=episode.pk)


def trajectory_page(client, episode) -> str:
    response = client.get(reverse("annotation:episode", args=[episode.pk]))
    assert response.status_code == 200
    return response.content.decode()


def steps_of(page: str) -> list[str]:
    return re.findall(r'<li id="step-(\d+)" class="step', page)


def test_each_step_shows_what_was_seen_before_it_the_action_and_what_came_of_it(freshwiki, dana, client_for):
    episode = demonstrate(dana, COMMANDS)
    page = trajectory_page(client_for(dana), episode)
    assert steps_of(page) == [str(n) for n in range(1, len(COMMANDS) + 1)]  # from 1, for people
    for action in episode.actions.all():
        assert f'<pre class="observation">{html_lib.escape(action.observation_before)}</pre>' in page
    step5 = page.split('<li id="step-5"')[1].split('<li id="step-6"')[0]
    assert '<code>Quote: not on the page at all</code> <span class="step-flag">invalid</span>' in step5
    assert "Invalid: That text is not on this page, so it cannot be quoted." in step5
    step8 = page.split('<li id="step-8"')[1].split('<li id="step-9"')[0]
    assert "quote 1 added" in step8 and "<q>won by Geelong by a margin of 81 points</q>" in step8
    prompt = (
        f"{QUESTION}■[1] 2022 AFL Grand Final (en.wikipedia.org)\n\nwon by Geelong by a margin of 81 points■"
    )
    assert f'<pre class="observation">{html_lib.escape(prompt)}</pre>' in page.split('id="answer-prompt"')[1]
    assert "Geelong, by 81 points [1]." in page


def test_the_pages_before_and_after_each_step_are_one_click_away(freshwiki, dana, alice, client_for):
    episode = demonstrate(dana, COMMANDS)
    page = trajectory_page(client_for(alice), episode)
    assert "No page before" in page.split('<li id="step-2"')[0]  # the first step starts on a blank page
    click = episode.actions.get(index=1)
    link = f"?digest={click.page_after}&amp;step=2#line-0"
    assert link in page
    snapshot = client_for(alice).get(
        reverse("annotation:page_snapshot", args=[episode.pk]), {"digest": click.page_after, "step": 2}
    )
    text = snapshot.content.decode()
    assert snapshot.status_code == 200 and "<h1>2022 AFL Grand Final (en.wikipedia.org)</h1>" in text
    assert '<ol class="snapshot-lines" start="0"><li id="line-0">' in text
    assert f'href="{reverse("annotation:episode", args=[episode.pk])}#step-2"' in text
    # The Find moved the view: the link after it opens the page where the view then was.
    find = episode.actions.get(command="Find in page: margin of")
    following = episode.actions.get(index=find.index + 1).observation_before
    first = re.search(r"♦Scrollbar: (\d+) - ", following).group(1)
    assert f"?digest={find.page_before}&amp;step={find.index + 1}#line-{first}" not in page  # same page
    assert f"#line-{first}" in page.split(f'<li id="step-{find.index + 2}"')[1]


def test_only_who_may_read_the_episode_reads_its_pages(freshwiki, dana, alice, client_for, django_user_model):
    episode = demonstrate(dana, COMMANDS)
    digest = episode.actions.get(index=1).page_after
    url = reverse("annotation:page_snapshot", args=[episode.pk])
    erin = make_user(django_user_model, "erin", "demonstrator")
    assert client_for(dana).get(url, {"digest": digest}).status_code == 200
    assert client_for(erin).get(url, {"digest": digest}).status_code == 404
    assert client_for(alice).get(url, {"digest": "0" * 64}).status_code == 404  # not a page it showed
    assert client_for(alice).get(url, {"digest": "../etc"}).status_code == 400
    assert client_for(None).get(url, {"digest": digest}).status_code == 302


def test_observations_are_shown_as_text_never_as_html(freshwiki, dana, client_for):
    episode = demonstrate(
        dana, ["Search <script>alert(1)</script>"], question="Is <b>this</b> bold?", answer=""
    )
    page = trajectory_page(client_for(dana), episode)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Is &lt;b&gt;this&lt;/b&gt; bold?" in page


def test_a_removed_quote_shows_where_it_was_removed_and_leaves_the_later_observations(
    freshwiki, dana, alice, client_for
):
    commands = [
        "Search AFL Grand Final 2022",
        "Clicked on link 0",
        "Quote: won by Geelong",
        "Quote: 81 points",
    ]
    episode = demonstrate(dana, commands, answer="")
    episode.refresh_from_db()
    service.remove_quote(episode.pk, dana, 1, uuid.uuid4(), episode.version)
    episode.refresh_from_db()
    service.record_action(episode.pk, dana, "Top", uuid.uuid4(), episode.version)
    page = trajectory_page(client_for(alice), Episode.objects.get())  # (dana's own: still browsing)
    step4 = page.split('<li id="step-4"')[1].split('<li id="step-5"')[0]
    assert "quote 2 added" in step4 and "Quote 1 removed by the demonstrator" in step4
    observation = Episode.objects.get().actions.get(index=4).observation_before
    assert "won by Geelong" not in observation.split("♦Title")[0]


def test_a_long_episode_costs_no_more_queries_than_a_short_one(freshwiki, dana, alice, client_for):
    client = client_for(alice)
    episode = demonstrate(dana, COMMANDS[:2], answer="")
    with CaptureQueriesContext(connection) as short:
        trajectory_page(client, episode)
    Episode.objects.filter(pk=episode.pk).update(status="skipped")
    commands = ["Search AFL", "Clicked on link 0", *["Scrolled down 1", "Scrolled up 1"] * 30]
    long = demonstrate(dana, commands, question="Who won the 2022 AFL Grand Final?", answer="")
    with CaptureQueriesContext(connection) as many:
        page = trajectory_page(client, long)
    assert len(steps_of(page)) == 62
    assert len(many.captured_queries) <= len(short.captured_queries)


def test_a_model_sample_replays_the_same_way(
    freshwiki, dana, alice, client_for, tiny_llama_dir, settings, tmp_path
):
    from tests.test_exports_samples import sampling_run
    from training.models import ModelCheckpoint, RunKind

    settings.MEDIA_ROOT = tmp_path / "media"
    Question.objects.create(
        text="What happened to the Crimean Bridge?", key="crimea", dataset="demo", split="rl"
    )
    policy = ModelCheckpoint.objects.create(
        kind=RunKind.BC, name="tiny-bc", base_model="random", path=str(tiny_llama_dir)
    )
    sampling_run(alice, policy, n=1, max_actions=3)
    sample = Episode.objects.get(kind=EpisodeKind.MODEL)
    page = trajectory_page(client_for(alice), sample)
    assert "the text the model read" in page
    actions = list(sample.actions.order_by("index"))
    assert steps_of(page) == [str(n) for n in range(1, len(actions) + 1)]
    for action in actions:
        assert f'<pre class="observation">{html_lib.escape(action.observation_before)}</pre>' in page
    assert BLANK_PAGE.digest not in page  # the blank page before the first step is no link
