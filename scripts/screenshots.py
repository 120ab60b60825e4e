"""The README's screenshots, taken from a running app (`make run`):
python scripts/screenshots.py [URL [STEP...]] (steps: demonstration, feedback, people, steps, training,
sampling, loop, rl, judges, operations, workforce, evaluation; all of them, in that order, by default)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from playwright.sync_api import Browser, Page, expect, sync_playwright

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def sign_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(username)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state("networkidle")


def start_reward_model_run(page: Page, base: str, steps: int) -> None:
    """Export rm-pairs of the rm split (TruthfulQA's own judgements) and start a fast-preset reward-model
    run of ``steps`` steps from the export's page; the page is then the run's."""
    page.goto(f"{base}/console/exports/")
    page.get_by_label("Format").select_option("rm-pairs")
    page.get_by_label("Split").select_option("rm")
    page.get_by_role("button", name="Export").click()
    page.get_by_role("link", name="Train a model on it").click(timeout=120_000)
    page.get_by_label("Max steps").fill(str(steps))
    page.get_by_label("Eval every").fill("10")
    page.get_by_role("button", name="Start run").click()


def training(page: Page, base: str, steps: int = 30) -> None:
    """The demo's reward-model journey: export rm-pairs of the rm split (TruthfulQA's own judgements),
    train the fast preset from the export's page, watch the run to the end."""
    sign_in(page, base, "researcher")
    start_reward_model_run(page, base, steps)
    expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=600_000)
    page.screenshot(path=OUT / "training-run.png", full_page=True)
    page.goto(f"{base}/console/training/")
    page.screenshot(path=OUT / "training-runs.png")


def sampling(page: Page, base: str) -> None:
    """The demo's sampling journey: the quick-start run (best-of-2 answers of the prompted SmolLM2 on 4
    FreshWiki questions, 10 actions each, scored by the newest reward model), watched to the end, then one
    chosen sample's trajectory. Prints how long the run took."""
    sign_in(page, base, "researcher")
    page.goto(f"{base}/console/training/sampling/")
    page.locator(".quick-start a").click()
    started = time.monotonic()
    page.get_by_role("button", name="Start sampling").click()
    expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=1_200_000)
    print(f"sampling run: {time.monotonic() - started:.0f} s from Start sampling to Done")
    page.screenshot(path=OUT / "sampling-run.png", full_page=True)
    chosen = page.locator("li[id^='sample-']", has=page.locator(".run-done", has_text="chosen")).first
    chosen.get_by_role("link", name="trajectory").click()
    page.wait_for_load_state("networkidle")
    page.screenshot(path=OUT / "sampling-trajectory.png", full_page=True)


def loop(browser: Browser, base: str) -> None:
    """The demo's loop after sampling(): the newest run's answers as a WebGPT-comparison batch (pairs of its
    samples: the demo has no demonstrations; against them when there are), a round, the labeler judging every
    pair, the results, then the judgements exported from the round and the reward model retrained from it.
    Prints how long each step took."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    sign_in(page, base, "researcher")
    page.goto(f"{base}/console/training/sampling/")
    page.locator("tbody td a").first.click()
    run_url = page.url
    started = time.monotonic()
    page.get_by_role("link", name="Make a feedback batch from this run").click()
    page.get_by_label("Name").fill("Round 1: pairs of best-of-2 samples")
    page.get_by_label("Required probability").fill("0")
    page.get_by_role("button", name="Create batch").click()
    page.wait_for_load_state("networkidle")
    batch_path = page.url.removeprefix(base)
    page.screenshot(path=OUT / "loop-batch.png", full_page=True)
    # The new batch competes with the demo's for the labeler's next tasks: pause the others in one step.
    page.goto(f"{base}/console/feedback/")
    for row in page.locator("tbody tr").all():
        if row.locator("th a").get_attribute("href") != batch_path:
            row.get_by_role("checkbox").check()
    page.get_by_role("button", name="Pause", exact=True).click()
    page.wait_for_load_state("networkidle")
    page.goto(run_url)
    page.get_by_role("link", name="Start a round with this run").click()
    page.get_by_label("Name").fill("first round")
    page.get_by_role("button", name="Start the round").click()
    page.wait_for_load_state("networkidle")
    round_url = page.url
    print(f"batch and round: {time.monotonic() - started:.0f} s")

    labeler = browser.new_page(viewport={"width": 1280, "height": 1000})
    sign_in(labeler, base, "labeler")
    started, judged = time.monotonic(), 0
    for choice in ("A better", "Equally good", "A much better", "B better", "A better", "A better"):
        labeler.goto(f"{base}/tasks/")
        if not labeler.get_by_role("button", name="Start next task").count():
            break  # nothing waits: the page offers no next task
        labeler.get_by_role("button", name="Start next task").click()
        if not labeler.locator("#task-form").count():
            break
        labeler.wait_for_load_state("load")
        labeler.get_by_role("radiogroup", name="Overall usefulness").get_by_label(choice, exact=True).check()
        if judged == 0:
            labeler.screenshot(path=OUT / "loop-task.png", full_page=True)
        labeler.get_by_role("button", name="Submit and back to the list").click()
        labeler.wait_for_load_state("networkidle")
        judged += 1
    print(f"judging: {judged} pairs in {time.monotonic() - started:.0f} s")

    page.goto(round_url)
    page.get_by_role("link", name="results").first.click()
    page.wait_for_load_state("networkidle")
    page.screenshot(path=OUT / "loop-results.png", full_page=True)
    started = time.monotonic()
    page.goto(round_url)
    page.get_by_role("button", name="Export this data").click()  # the default: everything up to the round
    retrain = page.get_by_role("link", name=re.compile(r"^Retrain the reward model on export"))
    expect(retrain.first).to_be_visible(timeout=120_000)
    print(f"export: {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    retrain.first.click()
    page.get_by_label("Max steps").fill("20")
    page.get_by_label("Eval every").fill("20")
    page.get_by_role("button", name="Start run").click()
    expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=900_000)
    print(f"retraining the reward model: {time.monotonic() - started:.0f} s")
    page.goto(round_url)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=OUT / "loop-round.png", full_page=True)
    page.goto(f"{base}/console/training/rounds/")
    page.screenshot(path=OUT / "loop-rounds.png", full_page=True)


def rl(page: Page, base: str) -> None:
    """The quick-start RL run (answer-only episodes of the prompted SmolLM2 against the newest reward model,
    on the FreshWiki demo questions of the rl split), watched to the end. Prints how long it took."""
    sign_in(page, base, "researcher")
    page.goto(f"{base}/console/training/rl/new/")
    page.get_by_role("link", name="the quick start").click()
    started = time.monotonic()
    page.get_by_role("button", name="Start RL run").click()
    expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=1_500_000)
    print(f"RL run: {time.monotonic() - started:.0f} s from Start RL run to Done")
    # The top of the page: lineage, the curves and the first of the latest step's 32 episodes.
    page.screenshot(
        path=OUT / "rl-run.png", full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": 2400}
    )


def judges(page: Page, base: str) -> None:
    """A model judge beside the labelers: the labeler judges some of the demo's minimal comparisons, the demo
    reward model judges the whole batch in both orders, the results put the two side by side; then a routed
    run on the WebGPT-comparison batch leaves labelers only the items the judge is unsure of."""
    sign_in(page, base, "researcher")
    minimal = "FreshWiki demo: Minimal comparison"
    page.goto(f"{base}/console/feedback/")
    for row in page.locator("tbody tr").all():  # the labeler's next tasks come from this batch only
        if row.locator("th a").inner_text() != minimal:
            row.get_by_role("checkbox").check()
    page.get_by_role("button", name="Pause", exact=True).click()
    page.wait_for_load_state("networkidle")
    labeler = page.context.browser.new_page(viewport={"width": 1280, "height": 1000})
    sign_in(labeler, base, "labeler")
    choices = (
        "A better",
        "B better",
        "A much better",
        "Equally good",
        "B better",
        "A better",
        "B much better",
    )
    for choice in choices:
        labeler.goto(f"{base}/tasks/")
        resume = labeler.get_by_role("link", name="Continue your task")
        (resume if resume.count() else labeler.get_by_role("button", name="Start next task")).click()
        labeler.wait_for_load_state("load")
        labeler.get_by_role("radiogroup", name="Overall usefulness").get_by_label(choice, exact=True).check()
        for group in labeler.get_by_role("radiogroup").all():  # a task drawn with every part required
            if not group.locator("input:checked").count():
                group.get_by_role("radio").last.check()
        labeler.get_by_role("button", name="Submit and back to the list").click()
        labeler.wait_for_load_state("networkidle")
    page.goto(f"{base}/console/feedback/")
    page.get_by_role("link", name=minimal, exact=True).click()
    batch_url = page.url
    page.get_by_role("link", name="Judge this batch").click()
    page.get_by_label("Judge").select_option(index=0)
    page.get_by_label("Tie margin").fill("0")  # the demo reward model spreads answers by ~0.01 logits
    started = time.monotonic()
    page.get_by_role("button", name="Start judging").click()
    expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=600_000)
    print(f"judge run: {time.monotonic() - started:.0f} s")
    page.screenshot(
        path=OUT / "judge-run.png", full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": 1600}
    )
    page.goto(batch_url.rstrip("/") + "/results/#judges")
    page.wait_for_load_state("networkidle")
    page.locator("#judges").scroll_into_view_if_needed()
    page.screenshot(path=OUT / "judge-results.png", full_page=False)
    page.goto(f"{base}/console/feedback/")
    page.get_by_role("link", name="FreshWiki demo: WebGPT comparison", exact=True).click()
    page.get_by_role("link", name="Judge this batch").click()
    page.get_by_label("Judge").select_option(index=0)
    page.get_by_label("Tie margin").fill("0")
    page.get_by_label("Route").check()
    page.get_by_label("Confidence threshold").fill("0.502")
    page.get_by_label("Audit share").fill("0.25")
    page.get_by_role("button", name="Start judging").click()
    expect(page.get_by_text("Done", exact=True).first).to_be_visible(timeout=600_000)
    page.screenshot(
        path=OUT / "judge-routed.png", full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": 1400}
    )


def main(base: str, steps: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        if steps:  # only these journeys, e.g. "sampling loop" (each after the ones it needs)
            for step in steps:
                if step == "loop":
                    loop(browser, base)
                else:
                    JOURNEYS[step](browser.new_page(viewport={"width": 1280, "height": 1000}), base)
            browser.close()
            return
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
        demonstration(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        feedback(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        people(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        step_tasks(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        training(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        sampling(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        loop(browser, base)
        rl(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        operations(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        workforce(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        evaluation(browser.new_page(viewport={"width": 1280, "height": 1000}), base)
        browser.close()


SELECT = """(text) => {
  const walker = document.createTreeWalker(document.getElementById("page-text"), NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const start = walker.currentNode.textContent.indexOf(text);
    if (start >= 0) {
      const range = document.createRange();
      range.setStart(walker.currentNode, start);
      range.setEnd(walker.currentNode, start + text.length);
      window.getSelection().removeAllRanges();
      window.getSelection().addRange(range);
      return true;
    }
  }
  return false;
}"""


def demonstration(page: Page, base: str) -> None:
    """The browsing page after a search, a click, a find and a quote; then the answer step."""
    sign_in(page, base, "demonstrator")
    page.get_by_role("button", name="Start next question").click()
    # The first demo question asks about the 2022 Champions League final.
    page.get_by_label("Search query").fill("2022 UEFA Champions League final")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#page-title")).to_have_text("Search results for: 2022 UEFA Champions League final")
    page.get_by_role("link", name="2022 UEFA Champions League final", exact=True).click()
    expect(page.locator("#page-title")).to_contain_text("(en.wikipedia.org)")
    page.evaluate(SELECT, "Real Madrid won the match")
    page.get_by_role("button", name="Quote").click()
    expect(page.locator(".quotes blockquote")).to_have_count(1)
    page.get_by_label("Find text").fill("kickoff being delayed")
    page.get_by_role("button", name="Find in page").click()
    expect(page.locator(".scrollbar")).not_to_contain_text("Scrollbar: 0 -")
    page.evaluate(SELECT, "issues with crowd control")
    page.screenshot(path=OUT / "browsing.png")
    page.get_by_role("button", name="End: Answer").click()
    page.get_by_label("Answer").fill(
        "Real Madrid won the final [1]. The quote says the kick-off was delayed but not why, "
        "so I would go back to browsing for that."
    )
    page.wait_for_timeout(1500)  # the draft autosaves
    page.screenshot(path=OUT / "answer.png")


# Where to press and release the mouse to select characters start..end of an answer's text.
SPAN = """([slot, start, end]) => {
  const box = document.querySelector(`.answer-text[data-slot='${slot}']`);
  box.scrollIntoView({block: "center"});
  const range = document.createRange();
  range.setStart(box.firstChild, start);
  range.setEnd(box.firstChild, start + 1);
  const first = range.getBoundingClientRect();
  range.setStart(box.firstChild, end - 1);
  range.setEnd(box.firstChild, end);
  const last = range.getBoundingClientRect();
  return [first.left + 1, first.top + first.height / 2, last.right - 1, last.top + last.height / 2];
}"""


def feedback(page: Page, base: str) -> None:
    """A WebGPT comparison (the first demo task) with a claim on answer A, a trust level and some ratings."""
    sign_in(page, base, "labeler")
    page.get_by_role("button", name="Start next task").click()
    page.wait_for_load_state("load")  # tasks.js has drawn the answers
    text = page.locator(".answer-text[data-slot='A']").get_attribute("data-text")
    start = text.index(" ") + 1 if " " in text else 0
    end = min(len(text), start + 16)
    while end < len(text) and text[end].isalnum():  # end on a word boundary
        end += 1
    x0, y0, x1, y1 = page.evaluate(SPAN, ["A", start, end])
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x1, y1, steps=8)
    page.mouse.up()
    editor = page.locator(".claim-editor[data-slot='A']")
    editor.get_by_label("Support").select_option(label="Weakly supported")
    if editor.get_by_label("[1]").count():
        editor.get_by_label("[1]").check()
        page.get_by_role("radiogroup", name="Trust in reference 1 of answer A").get_by_label(
            "Somewhat trustworthy"
        ).check()
    editor.get_by_role("button", name="Add claim").click()
    expect(page.locator("[data-claims-list='A'] li")).to_have_count(1)
    for scale, choice in (
        ("Unsupported information", "B better"),
        ("Coherence", "Equally good"),
        ("Overall usefulness", "B better"),
    ):
        page.get_by_role("radiogroup", name=scale).get_by_label(choice, exact=True).check()
    expect(page.locator("#draft-status")).to_contain_text("Draft saved")
    page.wait_for_timeout(1000)  # the last change autosaves too
    page.mouse.move(0, 0)
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=OUT / "comparison.png", full_page=True)


def _flagged_comparison(page: Page) -> bool:
    """Judge a WebGPT comparison with an overall rating the other dimensions contradict (it is flagged)."""
    choices = {"Unsupported information": "B much better", "Overall usefulness": "A better"}
    for scale in ("Irrelevant information", "Usefulness of supported information", "Coherence"):
        choices[scale] = "Equally good"
    for scale, choice in choices.items():
        page.get_by_role("radiogroup", name=scale).get_by_label(choice, exact=True).check()
    page.get_by_role("button", name="Submit and back to the list").click()
    page.wait_for_load_state("networkidle")
    return "submitted" in page.content().lower()


def people(page: Page, base: str) -> None:
    """The labeler's tasks page, guidelines and a K-way ranking moved by keyboard; a flagged comparison as the
    researcher reviews it; the corpora page. Other tasks met on the way are skipped."""
    sign_in(page, base, "labeler")
    page.goto(f"{base}/tasks/")
    page.screenshot(path=OUT / "tasks.png", full_page=True)
    ranked = flagged = False
    for _ in range(16):
        page.goto(f"{base}/tasks/")
        start = re.compile("Start next task|Continue your task")
        page.get_by_role("button", name=start).or_(page.get_by_role("link", name=start)).first.click()
        page.wait_for_load_state("networkidle")
        if not ranked and page.locator(".rank-item").count():
            page.locator(".rank-item").nth(1).focus()
            page.keyboard.press("Alt+ArrowUp")
            expect(page.locator("#rank-status, [role=status]").first).to_contain_text("moved")
            page.wait_for_timeout(1000)  # the draft autosaves
            page.screenshot(path=OUT / "ranking.png")
            ranked = True
        elif not flagged and page.get_by_role("radiogroup", name="Unsupported information").count():
            flagged = _flagged_comparison(page)
            continue
        page.locator("details.skip summary").click()
        page.get_by_label("Why?").fill("screenshot run")
        page.get_by_role("button", name="Skip task").click()
        if ranked and flagged:
            break
    page.goto(f"{base}/tasks/guidelines/webgpt_comparison/")
    page.screenshot(path=OUT / "guidelines.png")
    page.context.clear_cookies()
    sign_in(page, base, "researcher")
    page.goto(f"{base}/console/feedback/")
    page.get_by_role("link", name="FreshWiki demo: WebGPT comparison", exact=True).click()
    if flagged:
        page.get_by_role("link", name="not reviewed").click()
        page.wait_for_load_state("networkidle")
        page.screenshot(path=OUT / "flag-review.png", full_page=True)
    page.goto(f"{base}/console/corpora/")
    page.screenshot(path=OUT / "corpora.png", full_page=True)


def operations(page: Page, base: str) -> None:
    """The staff's Queues and jobs page while a reward-model run trains (the admin starts it from the
    console) and the workers have answered a check."""
    sign_in(page, base, "admin")
    start_reward_model_run(page, base, steps=400)
    page.wait_for_load_state("networkidle")
    page.goto(f"{base}/console/")
    page.get_by_role("button", name="Check workers").click()
    page.goto(f"{base}/console/queues/")
    expect(page.get_by_text("alive", exact=True).first).to_be_visible(timeout=60_000)
    # The page refreshes itself every 5 s: until the workers' answers to the check are on it.
    page.wait_for_function(
        "() => !document.querySelector('#queues').textContent.includes('waiting,')", timeout=60_000
    )
    page.screenshot(path=OUT / "queues.png", full_page=True)


def workforce(page: Page, base: str) -> None:
    """The workforce journey on the demo: the applicant meets the screening test and takes it, the researcher
    reads the candidates page and qualifies them, the drifter (paused by their gold checks) reads why on My
    quality, and the researcher reinstates them; the team, quality and time-sheet pages."""
    sign_in(page, base, "applicant")
    page.goto(f"{base}/tasks/")
    page.screenshot(path=OUT / "workforce-gate.png", full_page=True)
    for _ in range(6):  # the screening test: six WebGPT comparisons, only the overall rating required
        page.goto(f"{base}/tasks/")
        page.get_by_role("button", name=re.compile("Start next task|Continue")).first.click()
        page.wait_for_load_state("load")
        page.get_by_role("radiogroup", name="Overall usefulness").get_by_label("A better", exact=True).check()
        page.get_by_role("button", name="Submit and back to the list").click()
        page.wait_for_load_state("load")
    page.context.clear_cookies()
    sign_in(page, base, "researcher")
    page.goto(f"{base}/console/workforce/")
    page.screenshot(path=OUT / "workforce.png", full_page=True)
    page.goto(f"{base}/console/workforce/candidates/webgpt_comparison/")
    page.screenshot(path=OUT / "workforce-candidates.png", full_page=True)
    page.get_by_role("button", name="Qualify").first.click()
    page.wait_for_load_state("load")
    page.context.clear_cookies()
    sign_in(page, base, "drifter")
    page.goto(f"{base}/quality/")
    page.screenshot(path=OUT / "my-quality.png", full_page=True)
    page.context.clear_cookies()
    sign_in(page, base, "researcher")
    page.goto(f"{base}/console/workforce/kinds/minimal_comparison/")
    page.screenshot(path=OUT / "workforce-kind.png", full_page=True)
    page.goto(f"{base}/console/workforce/")
    page.get_by_label("Reason to reinstate drifter").fill("Talked it through: read the guidelines again")
    page.get_by_role("button", name="Reinstate").click()
    page.wait_for_load_state("load")
    page.goto(f"{base}/console/team/")
    page.screenshot(path=OUT / "team.png", full_page=True)
    page.goto(f"{base}/console/workforce/timesheets/")
    page.screenshot(path=OUT / "timesheets.png", full_page=True)


def step_tasks(page: Page, base: str) -> None:
    """The labeler's step review (one step at a time, a bad step with its reason) and step preference, from
    the demo's scripted episodes; other tasks met on the way are skipped."""
    sign_in(page, base, "labeler")
    reviewed = preferred = False
    for _ in range(24):
        page.goto(f"{base}/tasks/")
        start = re.compile("Start next task|Continue your task")
        page.get_by_role("button", name=start).or_(page.get_by_role("link", name=start)).first.click()
        page.wait_for_load_state("networkidle")
        if not reviewed and page.locator("[data-step-review]").count():
            page.locator("#step-0").get_by_role("radio", name="Good").check()
            page.keyboard.press("n")
            page.keyboard.press("3")
            page.locator("#step-1-reason").select_option("wrong_link")
            page.wait_for_timeout(1000)  # the draft autosaves
            page.screenshot(path=OUT / "step-review.png", full_page=True)
            reviewed = True
        elif not preferred and page.get_by_text("Two possible next actions").count():
            page.get_by_role("radio", name="A better").check()
            page.wait_for_timeout(1000)
            page.screenshot(path=OUT / "step-preference.png", full_page=True)
            preferred = True
        page.locator("details.skip summary").click()
        page.get_by_label("Why?").fill("screenshot run")
        page.get_by_role("button", name="Skip task").click()
        if reviewed and preferred:
            break


def evaluation(page: Page, base: str) -> None:
    """The demo report: Make the demo report, watched until every policy's TriviaQA run has ended, then the
    report and one benchmark run's page. Prints how long it took."""
    sign_in(page, base, "researcher")
    page.goto(f"{base}/console/training/experiments/")
    started = time.monotonic()
    page.get_by_role("button", name="Make the demo report").click()
    report = page.url
    for _ in range(180):  # the report reads the runs when shown: reload until none is still working
        if "Still working" not in page.content():
            break
        time.sleep(10)
        page.goto(report)
    print(f"demo report: {time.monotonic() - started:.0f} s from the button to every figure")
    page.screenshot(path=OUT / "experiment-report.png", full_page=True)
    page.get_by_role("link", name="TriviaQA exact match").first.click()
    page.screenshot(path=OUT / "benchmark-run.png", full_page=True)


JOURNEYS = {
    "evaluation": evaluation,
    "steps": step_tasks,
    "judges": judges,
    "operations": operations,
    "demonstration": demonstration,
    "feedback": feedback,
    "people": people,
    "training": training,
    "sampling": sampling,
    "rl": rl,
    "workforce": workforce,
}

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000", sys.argv[2:])
