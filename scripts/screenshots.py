"""The README's screenshots, taken from a running app (`make run`): python scripts/screenshots.py [URL]."""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def sign_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(username)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state("networkidle")


def main(base: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(f"{base}/accounts/login/")
        page.screenshot(path=OUT / "login.png")
        sign_in(page, base, "researcher")
        page.get_by_role("button", name="Check workers").click()
        page.wait_for_function(
            "() => !document.querySelector('#worker-status').textContent.includes('waiting')", timeout=60_000
        )
        page.screenshot(path=OUT / "console.png", full_page=True)
        page.goto(f"{base}/console/questions/?dataset=truthfulqa&split=eval")
        page.screenshot(path=OUT / "questions.png")
        page.locator("tbody a").first.click()
        page.wait_for_load_state("networkidle")
        page.screenshot(path=OUT / "question.png", full_page=True)
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000")
