"""The house's import rules, checked on every import of the project's modules (also those inside functions
and those under ``if TYPE_CHECKING:``: an import for a type is still an arrow between two modules, and one
that dodges a cycle only hides it):

- no import cycle between modules (a lazy import that only dodges a cycle is still a cycle);
- imports run down the floors: ``core`` (jobs, permissions, storage, charts, the audit log...: it imports
  no other package of the project) < ``browser`` < ``annotation`` < ``training`` < ``webgpt_site``, the
  project package on the top floor (URL confs, the API's route table, the console, settings, the Celery app,
  health and metrics, admin, commands), which no app imports; none runs up a floor (a lower floor that
  needs something of a higher one is handed it when the apps are ready: docs/architecture.md);
- the Django-free engines (``browser/engine``, the sampling engine) import nothing of Django or of the
  project's Django side.

``python scripts/check_imports.py`` prints what breaks a rule and exits 1, or prints a summary; ``make test``
runs it. ``--graph`` prints every edge (for a drawing).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "webgpt_site", "browser", "annotation", "training")
# The floors, bottom up: core (the platform), the three apps, and the project package on top, which wires
# them together (settings, URL confs, the console, the Celery app, commands) and which nothing imports.
FLOORS = {"core": 0, "browser": 1, "annotation": 2, "training": 3, "webgpt_site": 4}
# Plain Python engines: no Django, nothing of the project's Django side.
DJANGO_FREE = ("browser.engine",)
DJANGO_FREE_MODULES = (
    "annotation.feedback.agreement",
    "annotation.feedback.alpha",
    "annotation.feedback.steps",
    "annotation.workforce.judgements",
    "training.errors",
    "training.evaluation.benchmarks",
    "training.evaluation.proxy",
    "training.runs.bc",
    "training.runs.config",
    "training.runs.data",
    "training.runs.hooks",
    "training.runs.metrics",
    "training.runs.prm",
    "training.runs.reward",
    "training.runs.runtime",
    "training.runs.store",
    "training.sampling.backend",
    "training.sampling.best_of_n",
    "training.sampling.candidates",
    "training.sampling.constraints",
    "training.sampling.endpoint",
    "training.sampling.endpoints",
    "training.sampling.episode",
    "training.sampling.local",
    "training.sampling.policy",
    "training.sampling.prompts",
    "training.sampling.types",
)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: Path
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def _resolve(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = source.split(".") if is_package else source.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[Edge]:
    text = path.read_text()
    tree = ast.parse(text, str(path))

    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _resolve(name, path.name == "__init__.py", node)
            # ``from pkg import sub`` imports the module pkg.sub; ``from mod import name`` the module mod.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in dict.fromkeys(targets):
            if target.split(".")[0] in PACKAGES or target.split(".")[0] == "django":
                yield Edge(name, target, path, node.lineno)


def floor(module: str) -> int:
    return FLOORS[module.split(".")[0]]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _django_free(module: str) -> bool:
    return module in DJANGO_FREE_MODULES or any(
        module.startswith(p + ".") or module == p for p in DJANGO_FREE
    )


def _path_to(start: str, goals: set[str], graph: dict[str, set[str]]) -> list[str]:
    """The modules from ``start`` to one of ``goals`` along imports (breadth first), or [] if none."""
    came_from: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            if module in goals:
                path = [module]
                while (before := came_from[path[-1]]) is not None:
                    path.append(before)
                return path[::-1]
            for target in sorted(graph.get(module, ())):
                if target not in came_from:
                    came_from[target] = module
                    following.append(target)
        frontier = following
    return []


def check(show_graph: bool = False) -> int:
    modules = project_modules()
    edges = [edge for name, path in modules.items() for edge in imports_of(name, path, modules)]
    graph: dict[str, set[str]] = {name: set() for name in modules}
    problems: list[str] = []
    uses_django: set[str] = set()
    for edge in edges:
        where = f"{edge.path.relative_to(ROOT)}:{edge.line}"
        if edge.target.split(".")[0] == "django":
            uses_django.add(edge.source)
            continue
        if edge.target not in modules or edge.target == edge.source:
            continue
        graph[edge.source].add(edge.target)
        if show_graph:
            print(f"{edge.source} -> {edge.target}")
        if floor(edge.target) > floor(edge.source):
            problems.append(f"{where}: {edge.source} imports {edge.target}, a floor up")
    for module in filter(_django_free, modules):
        if path := _path_to(module, uses_django, graph):
            problems.append(f"{module} must not use Django, but imports it: {' -> '.join(path)} -> django")
    for component in cycles(graph):
        problems.append("import cycle: " + " <-> ".join(component))
    for problem in problems:
        print(problem)
    if problems:
        return 1
    imports = sum(map(len, graph.values()))
    print(f"imports: {len(modules)} modules, {imports} imports between them, no cycle, none up a floor")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", action="store_true", help="print every import between modules")
    sys.exit(check(parser.parse_args().graph))
