"""Playwright drives Debian's Chromium (/usr/bin/chromium) against pytest-django's live server."""

from __future__ import annotations

import os
import shutil

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

# An expectation waits up to 15 s for the page to get there (Playwright's default is 5 s): with two xdist
# workers on two cores, and other jobs on the machine, a submit and the page it leads to have taken more
# than 5 s. Only the wait is longer: every expectation still has to come true.
expect.set_options(timeout=15_000)
# Playwright's sync API runs an event loop in the test thread; the ORM calls around it are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
# Chromium's background services would try the (closed) network at every start.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser() -> Browser:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, live_server):
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    csp_errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            csp_errors.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    yield page
    context.close()
    assert not csp_errors, f"the page broke its Content-Security-Policy: {csp_errors}"
