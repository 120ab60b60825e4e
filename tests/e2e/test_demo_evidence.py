"""A labeler sees the demo answers' evidence in the real browser: each reference with its title, domain and
the quoted extract, so "supported" and trust can be judged on what the answer cites."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Answer, Assignment, FeedbackBatch

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_demo_comparison_shows_each_quote_with_its_domain_and_extract(demo_site, page: Page):
    batch = FeedbackBatch.objects.get(name="FreshWiki demo: WebGPT comparison")
    FeedbackBatch.objects.exclude(pk=batch.pk).update(is_active=False)
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("labeler")
    page.get_by_label("Password").fill("labeler")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Start next task").click()
    expect(page.locator("#task-form")).to_be_visible()

    task = Assignment.objects.get(labeler__username="labeler")
    answers = Answer.objects.in_bulk(task.order)
    for slot, answer_id in zip("AB", task.order, strict=True):
        references = page.get_by_role("region", name=f"Answer {slot}").locator("ol.quotes > li")
        quotes = answers[answer_id].quotes
        expect(references).to_have_count(len(quotes))
        for reference, quote in zip(references.all(), quotes, strict=True):
            expect(reference.locator(".source")).to_contain_text(f"{quote['title']} ({quote['domain']})")
            expect(reference.locator("blockquote")).to_have_text(quote["extract"])
    expect(page.get_by_text("No quotes.")).to_have_count(0)
