"""axe-core in the e2e tests: run it on the page a test has reached and get back what would fail WCAG 2.2 AA.

The vendored build (tests/e2e/vendor/, see fetch-axe.sh) goes in through page.evaluate, which runs over the
DevTools protocol: a <script> tag (page.add_script_tag) would be an inline script, refused by our strict CSP,
and the `page` fixture fails a test on any CSP violation."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from playwright.sync_api import Page

AXE_JS = Path(__file__).parent / "vendor" / "axe-core-4.14.1.min.js"
# The rules axe tags for WCAG 2.0-2.2 A and AA, plus its best practices (landmarks, one h1, a skip
# link's target): the issue asks for 2.2 AA on the work pages.
RUN_ONLY = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
BLOCKING = ("serious", "critical")

RUN = """async ([context, tags]) => {
  const results = await axe.run(context || document, {runOnly: {type: "tag", values: tags}});
  return results.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    nodes: v.nodes.map((n) => ({target: n.target.join(" "), summary: n.failureSummary})),
  }));
}"""


@cache
def _source() -> str:
    return AXE_JS.read_text(encoding="utf-8")


def run_axe(page: Page, context: str | None = None) -> list[dict]:
    """The serious and critical violations on the page as it is now (or inside the CSS selector
    ``context``); each has id, impact, help, helpUrl and nodes (target, summary)."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(_source())  # a navigation drops it: inject again on each new document
    violations = page.evaluate(RUN, [context, RUN_ONLY])
    return [violation for violation in violations if violation["impact"] in BLOCKING]


def describe(violations: list[dict]) -> str:
    """One paragraph per violation: rule, impact, what it asks, its help page, and the elements."""
    lines = []
    for violation in violations:
        lines.append(
            f"{violation['id']} ({violation['impact']}): {violation['help']} - {violation['helpUrl']}"
        )
        for node in violation["nodes"]:
            summary = " ".join(node["summary"].split())
            lines.append(f"    {node['target']}: {summary}")
    return "\n".join(lines)


def assert_accessible(page: Page, context: str | None = None) -> None:
    """Fail with a readable list when axe finds a serious or critical violation."""
    violations = run_axe(page, context)
    assert not violations, f"axe-core on {page.url}:\n{describe(violations)}"
