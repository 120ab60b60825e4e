"""The guidelines links in the real browser: from a task page the link opens that template's (and preset's)
guidelines in a new tab and leaves the task where it was; the contents jump to their sections; no page
breaks its Content-Security-Policy."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from annotation.feedback import scales
from annotation.models import FeedbackBatch
from tests.conftest import demo_production_batches

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def only(template: str, preset: str = "") -> None:
    """Leave one demo batch active, so "Start next task" hands out that template."""
    batch = demo_production_batches().get(template=template, preset=preset)
    FeedbackBatch.objects.exclude(pk=batch.pk).update(is_active=False)
    FeedbackBatch.objects.filter(pk=batch.pk).update(is_active=True)


def sign_in(page: Page) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("labeler")
    page.get_by_label("Password").fill("labeler")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Next task", exact=True)).to_be_visible()


def open_guidelines(page: Page) -> tuple[Page, list[str]]:
    """Follow the task page's Guidelines link: the new tab, and the CSP errors it logs."""
    with page.context.expect_page() as opened:
        page.get_by_role("link", name="Guidelines", exact=True).click()
    tab = opened.value
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    tab.wait_for_load_state("load")
    return tab, errors


@pytest.mark.parametrize(
    ("template", "preset", "url", "heading", "section"),
    [
        (
            "webgpt_comparison",
            "",
            "/tasks/guidelines/webgpt_comparison/",
            "Guidelines: WebGPT comparison",
            "The six comparison ratings",
        ),
        (
            "rating",
            "gophercite",
            "/tasks/guidelines/rating/gophercite/",
            "Guidelines: Single-answer rating · GopherCite: plausible and supported",
            "GopherCite: plausible and supported",
        ),
    ],
)
def test_a_task_pages_guidelines_open_in_a_new_tab_and_the_task_stays(
    page, demo_site, template, preset, url, heading, section
):
    only(template, preset)
    sign_in(page)
    page.get_by_role("button", name="Start next task").click()
    expect(page.locator("#task-form")).to_be_visible()
    task_url = page.url
    tab, errors = open_guidelines(page)
    expect(tab).to_have_url(re.compile(re.escape(url) + "$"))
    expect(tab.get_by_role("heading", name=heading, exact=True, level=1)).to_be_visible()
    tab.get_by_role("navigation", name="Contents").get_by_role("link", name=section, exact=True).click()
    expect(tab).to_have_url(re.compile("#"))
    expect(tab.get_by_role("heading", name=section, exact=True, level=2)).to_be_in_viewport()
    assert errors == []
    assert page.url == task_url
    expect(page.locator("#task-form")).to_be_visible()


def test_the_tasks_landing_page_lists_every_guidelines_page(page, demo_site):
    sign_in(page)
    links = page.locator(".guideline-links a")
    expect(links).to_have_count(len(scales.TEMPLATES) + len(scales.RATING_PRESETS))
    page.get_by_role("link", name="TruthfulQA: truthful and informative").click()
    expect(page).to_have_url(re.compile(r"/tasks/guidelines/rating/truthfulqa/$"))
    title = "Guidelines: Single-answer rating · TruthfulQA: truthful and informative"
    expect(page.get_by_role("heading", name=title, exact=True, level=1)).to_be_visible()
    expect(page.locator(".definitions dt", has_text="Is the answer informative?")).to_be_visible()
