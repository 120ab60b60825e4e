"""Every route the site serves, found by walking the URL conf, so tests cover new endpoints by themselves.

Used by the permission matrix (``tests/test_permissions.py``) and the input fuzz test: both iterate
``all_routes()`` and fail when a route appears that their tables do not list.

API::

    from tests.routes import all_routes, route_named

    for route in all_routes():          # every route of webgpt_site.urls, includes followed recursively
        route.name                      # "console:feedback_batch" (namespaced; None for an unnamed route)
        route.pattern                   # "console/feedback/<int:pk>/" (the full pattern, includes joined)
        route.view                      # the callback Django calls (a function, or as_view()'s function)
        route.view_class                # the class for class-based and DRF views, else None
        route.is_api                    # True for DRF views (token auth, JSON errors, 401 for anonymous)
        route.methods                   # ("GET", "POST"): what the view accepts, HEAD/OPTIONS left out
        route.params                    # ("pk",): the URL kwargs the pattern needs
        route.url(pk=episode)           # "/demonstrations/episodes/12/": a model instance (its pk) or an id
        route.url()                     # kwargs left out are filled with MISSING_ID (an object nobody has)

    route_named("api-task-submit")      # one route by name (KeyError if there is none)
    object_kind(route)                  # "task", "episode", "batch"...: which object its id names

What is left out: the admin site (``admin:`` namespace; Django's own views, guarded by ``is_staff``) and
static/media serving. ``all_routes(include_admin=True)`` keeps the admin routes (e.g. to test its login).

``methods`` is read from the view, never guessed: ``require_http_methods`` (and ``require_GET`` /
``require_POST``) keep their method list in the wrapper's closure, class-based views list the handlers
they define. A function view without such a decorator accepts every method, reported as ``ALL_METHODS``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Model
from django.urls import URLPattern, URLResolver, get_resolver, reverse

# An id no test object has: for routes whose object does not matter (or must be missing).
MISSING_ID = 2_147_483_000
ALL_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_SKIPPED_NAMESPACES = {"admin"}
_SKIPPED_PREFIXES = ("static/", "media/", "__debug__/")


@dataclass(frozen=True)
class Route:
    """One URL pattern with the view behind it."""

    name: str | None
    pattern: str
    view: Callable[..., Any] = field(repr=False)
    params: tuple[str, ...]
    methods: tuple[str, ...]

    @property
    def view_class(self) -> type | None:
        # as_view() stores the class as view_class (Django) and cls (DRF).
        return getattr(self.view, "view_class", None) or getattr(self.view, "cls", None)

    @property
    def is_api(self) -> bool:
        from rest_framework.views import APIView

        return isinstance(self.view_class, type) and issubclass(self.view_class, APIView)

    def url(self, **kwargs: Model | int | str) -> str:
        """The route's path with its kwargs filled: a model instance stands for its pk; a kwarg not given
        is MISSING_ID."""
        if self.name is None:
            raise ValueError(f"route {self.pattern!r} has no name, so it cannot be reversed")
        unknown = set(kwargs) - set(self.params)
        if unknown:
            raise TypeError(f"{self.name}: no URL parameter {', '.join(sorted(unknown))}")
        values = {
            param: (value.pk if isinstance(value, Model) else value)
            for param, value in {**dict.fromkeys(self.params, MISSING_ID), **kwargs}.items()
        }
        return reverse(self.name, kwargs=values)


def all_routes(*, include_admin: bool = False) -> list[Route]:
    """Every route of the root URL conf, in URL-conf order."""
    return list(_walk(get_resolver().url_patterns, prefix="", namespace=None, include_admin=include_admin))


def route_named(name: str) -> Route:
    for route in all_routes(include_admin=True):
        if route.name == name:
            return route
    raise KeyError(name)


# Which object a route's id names (by route name; the other annotation: routes are demonstration pages,
# with the episode's id, and task pages, with the assignment's), for tests that open object routes on
# real objects. A new object route fails object_kind until it is added here.
OBJECT_OF = {
    "console:feedback_batch": "batch",
    "console:feedback_state": "batch",
    "console:feedback_priority": "batch",
    "console:feedback_results": "batch",
    "console:feedback_results_csv": "batch",
    "console:feedback_flags": "batch",
    "console:feedback_flag_decision": "task",  # the judgement (an assignment) decided on
    "console:feedback_gold": "batch",
    "console:feedback_reference": "batch",
    "api-batch": "batch",
    "api-batch-results": "batch",
    "api-batch-flags": "batch",
    "api-batch-agreement": "batch",
    "api-assignment-flag-decision": "task",
    "console:export": "export",
    "console:export_download": "export",
    "api-export": "export",
    "api-export-download": "export",
    "console:corpus_import": "corpus_import",
    "api-corpus-import": "corpus_import",
    "questions:detail": "question",
    "api-question": "question",
    "questions:import_detail": "import",
    "training:run": "run",
    "training:cancel": "run",
    "training:resume": "failed_run",
    "api-training-run": "run",
    "api-training-run-cancel": "run",
    "api-training-run-resume": "failed_run",
    "api-training-run-episodes": "run",
    "training:rl_episodes": "run",
    "training:delete_model": "checkpoint",
    "api-model": "checkpoint",
    "training:sampling_run": "sampling_run",
    "training:sampling_cancel": "sampling_run",
    "api-sampling-run": "sampling_run",
    "api-sampling-run-cancel": "sampling_run",
    "api-sampling-run-samples": "sampling_run",
    "training:judge_new": "batch",
    "training:judge_run": "judge_run",
    "training:judge_cancel": "judge_run",
    "api-judge-run": "judge_run",
    "api-judge-run-cancel": "judge_run",
    "api-judge-run-judgements": "judge_run",
    "training:benchmark": "benchmark_run",
    "api-benchmark-run": "benchmark_run",
    "api-benchmark-run-cancel": "benchmark_run",
    "api-experiment": "experiment",
    "training:benchmark_cancel": "benchmark_run",
    "training:experiment": "experiment",
    "training:experiment_json": "experiment",
    "training:experiment_csv": "experiment",
    "training:experiment_html": "experiment",
    "training:proxy_evaluation": "proxy_evaluation",
    "training:proxy_results_csv": "proxy_evaluation",
    "training:proxy_cancel": "proxy_evaluation",
    "api-proxy-evaluation": "proxy_evaluation",
    "api-proxy-evaluation-cancel": "proxy_evaluation",
    "training:round": "round",
    "training:round_add_runs": "round",
    "training:round_retrain": "round",
    "api-round": "round",
    "api-answer": "answer",
    "api-episode": "episode",
    "api-episode-review": "episode",
    "api-task": "task",
    "api-task-submit": "task",
    "api-task-draft": "task",
    "api-task-skip": "task",
    # The team's person routes name a user; the invitation's page names its token, not an id.
    "console:team_person": "person",
    "console:team_state": "person",
    "console:team_qualify_role": "person",
    "console:team_roles": "person",
    "console:team_link": "person",
    "api-team-state": "person",
    "account:invite": "invitation",
    "console:team_withdraw_invitation": "pending_invitation",
    "api-team-invitation": "pending_invitation",
    # The guidelines pages name a task template (and a rating preset), not an object: the tables give
    # these kinds the URL's keyword arguments instead.
    "annotation:template_guidelines": "guidelines",
    "annotation:preset_guidelines": "guidelines_preset",
    # The candidates page names a kind of work (a template, "rating:<preset>" or "demonstration").
    "console:candidates": "work_kind",
    "api-workforce-candidates": "work_kind",
    "console:workforce_kind": "work_kind",
    "api-workforce-kind": "work_kind",
}


def object_kind(route: Route) -> str:
    """The kind of object ("task", "episode", "batch", "export"...) the route's id names."""
    if route.name in OBJECT_OF:
        return OBJECT_OF[route.name]
    if route.name.startswith("annotation:task"):
        return "task"
    if route.name.startswith("annotation:"):
        return "episode"
    raise AssertionError(
        f"{route.name}: say in tests/routes.py OBJECT_OF which object its {route.params} names"
    )


def _walk(patterns: list, *, prefix: str, namespace: str | None, include_admin: bool) -> Iterator[Route]:
    for entry in patterns:
        pattern = prefix + str(entry.pattern)
        if pattern.startswith(_SKIPPED_PREFIXES):
            continue
        if isinstance(entry, URLResolver):
            inner = ":".join(filter(None, [namespace, entry.namespace])) or None
            if not include_admin and entry.namespace in _SKIPPED_NAMESPACES:
                continue
            yield from _walk(entry.url_patterns, prefix=pattern, namespace=inner, include_admin=include_admin)
        elif isinstance(entry, URLPattern):
            name = entry.name and ":".join(filter(None, [namespace, entry.name]))
            yield Route(
                name=name or None,
                pattern=pattern,
                view=entry.callback,
                params=tuple(entry.pattern.converters),
                methods=_methods(entry.callback),
            )


def _methods(view: Callable[..., Any]) -> tuple[str, ...]:
    view_class = getattr(view, "view_class", None) or getattr(view, "cls", None)
    if view_class is not None:
        return tuple(
            method.upper()
            for method in view_class.http_method_names
            if method not in {"head", "options"} and hasattr(view_class, method)
        )
    # Function views: the innermost require_http_methods wins (the decorators nest through __wrapped__).
    allowed: tuple[str, ...] = ALL_METHODS
    current: Any = view
    while current is not None:
        closure = inspect.getclosurevars(current).nonlocals if hasattr(current, "__code__") else {}
        methods = closure.get("request_method_list")
        if methods is not None:
            allowed = tuple(m for m in allowed if m in methods)
        current = getattr(current, "__wrapped__", None)
    return allowed
