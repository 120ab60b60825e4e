"""A ranking page shows its answers in the order of the saved ranks (the draft, else the response), so a
reload keeps the order the labeler made; without JavaScript the rank selectors alone are the form."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.feedback.presenter import in_rank_order
from annotation.models import Assignment, FeedbackBatch

pytestmark = pytest.mark.django_db


def order_of(names: str, ranks: dict) -> str:
    """The slots named by the characters of ``names``, put in rank order, as one string."""
    return "".join(s["slot"] for s in in_rank_order([{"slot": name} for name in names], ranks))


def test_slots_go_by_rank_with_ties_by_number_and_the_unranked_last():
    ranks = {"4": "1", "2": "2", "3": "2"}
    assert order_of("12345", ranks) == "42315"
    assert order_of("12", {"2": 1}) == "21"  # a submitted response holds ints


@pytest.mark.parametrize("bad", ["", "x", "²", "-1", "1.5", True, None, [1]])
def test_a_malformed_rank_counts_as_unranked(bad):
    assert order_of("123", {"1": bad, "3": "1"}) == "312"


@pytest.fixture
def ranking_task(client_for, bob, freshwiki, demo_site):
    FeedbackBatch.objects.update(required_probability=0.0)
    batch = FeedbackBatch.objects.get(template="ranking")
    FeedbackBatch.objects.exclude(pk=batch.pk).update(is_active=False)
    client = client_for(bob)
    assert client.post(reverse("annotation:task_start")).status_code == 302
    return client, Assignment.objects.filter(labeler=bob).latest("id")


def cards(html: str) -> list[str]:
    return re.findall(r'<li class="rank-item"[^>]* data-slot="(\d)"', html)


def test_the_page_shows_the_answers_in_the_order_of_the_draft(ranking_task):
    client, task = ranking_task
    k = len(task.order)
    page = reverse("annotation:task", args=[task.pk])
    assert cards(client.get(page).content.decode()) == [str(n) for n in range(1, k + 1)]
    # What the rank selectors send, with or without JavaScript: the last answer first, 1 and 2 tied.
    draft = {f"rank-{k}": "1", "rank-1": "2", "rank-2": "2"}
    assert client.post(reverse("annotation:task_draft", args=[task.pk]), draft).status_code == 200
    expected = [str(k), "1", "2", *(str(n) for n in range(3, k))]
    assert cards(client.get(page).content.decode()) == expected
