"""No input is a 500, and a refusal writes nothing: odd bodies and query strings to every route.

The routes come from walking the URL conf (tests/routes.py), so a new endpoint is fuzzed without anyone
listing it; only a new object route needs a line in OBJECT_OF (which object its id names), or this test
says so. The callers: anonymous, charlie (no role), alice (researcher), bob (labeler), dana
(demonstrator) and sam (staff, no group: the queues page is his). Requests name real objects (a task of
each template, a browsing and a finished episode, a flagged judgement for the flag decisions...), an id
nobody has, or 30 digits:

- what a route takes is read from the site: the forms on every page each caller can open (field names
  and the values the page fills in: hidden keys, versions, chosen options), and for the API the OpenAPI
  schema (request fields, a value of each field's type, query parameters);
- first the route's own request (the page's body as it is, the API's typed body, a GET without a query)
  goes to every caller: who is let through the door (not a 401, 403, 404 or sign-in redirect) is who the
  rest is for. Every route must let someone through, or nothing behind its door would be fuzzed;
- then a sweep puts each value that broke something once (NUL, "²", 19, 20, 30 and 5,000 digits, 1e999,
  NaN, JSON nested 5,000 deep, 20,001 characters) into every field and query parameter, and posts deep
  JSON as the body: each request to one caller let through, in turn, and every fourth to one of the
  refused callers too (their refusal comes before the body is read, but they see odd values as well);
- then hypothesis (a fixed seed per route and method, so a run is reproducible): the page's own body with
  a few fields changed or one odd value in all of them, as a urlencoded or multipart form (with files),
  JSON for the API, raw bytes, or a body over Django's size limit; query strings for GET. Values: the ones
  above, long texts, odd schemes, hypothesis's own text.

Asserted for every response: no 5xx (the test client raises a view's exception), and on a refusal (a 4xx
or a redirect to sign in) no row of any table inserted, updated or deleted (sessions and sign-in attempts
excepted: recording those is their job). PostgreSQL counts each table's inserted, updated and deleted rows
within the transaction (pg_stat_xact_user_tables), rolled-back savepoints included, so an UPDATE, or a
DELETE and an INSERT that leave a table's row count as it was, are caught. Each request runs in a savepoint
rolled back afterwards, so a submit or a delete that succeeds leaves the world as it was; the world and
the callers' sessions are made once for the module, in a transaction rolled back at its end. Runs on the
configured database (CI: PostgreSQL, which refuses NUL, long names and odd numbers); on the code before
issue 11's input fixes it failed on 11 routes.
"""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import subprocess
import sys
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.test import Client
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from django.test.utils import override_settings
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.routes import MISSING_ID, Route, all_routes, object_kind, route_named

pytestmark = pytest.mark.django_db

# No account, no role, researcher, labeler, demonstrator, staff.
CALLERS = ("anonymous", "charlie", "alice", "bob", "dana", "sam")
# Tables whose rows a refused request may still write, by design.
UNCOUNTED = {"django_session", "axes_accessattempt", "axes_accessfailurelog", "axes_accesslog"}

# Hypothesis examples per route and method, after the sweep: more where a body reaches a service, fewer
# for pages and lists. The whole module stays under a minute on two cores.
RICH = {
    "annotation:task_submit",
    "annotation:task_draft",
    "annotation:task_skip",
    "annotation:act",
    "annotation:answer",
    "annotation:draft",
    "api-task-submit",
    "api-task-draft",
    "api-task-skip",
    "api-batches",
    "api-exports",
    "api-question-import",
    "api-training-runs",
    "console:feedback_create",
    "console:feedback_bulk",
    "console:exports",
    "console:corpora",
    "api-corpus-imports",
    "console:demonstration_batches",
    "questions:import",
    "training:new",
    "training:rl_new",
    "training:sampling_new",
    "training:proxy_evaluations",
    "training:benchmark_new",
    "training:experiments",
    "api-proxy-evaluations",
    "api-benchmark-runs",
    "api-experiments",
    "api-judge-runs",
    "console:team_state",
    "api-team-state",
    "account:invite",
    "console:timesheet_correct",
    "api-timesheet-corrections",
}
EXAMPLES = {"rich": 8, "write": 3, "read": 2}
# Refusals that keep something by design: an incomplete submit through the API is a 400 that keeps the
# response as the task's draft (TaskSubmit's docs), renewing the lease (and taking a free slot back).
KEPT_ON_REFUSAL = {"api-task-submit": {"annotation_assignment", "annotation_feedbackitem"}}
# The decisions on a flagged judgement take the flagged one (a judgement that is not flagged: a 400).
FUZZ_KIND = {
    "console:feedback_flag_decision": "flagged",
    "api-assignment-flag-decision": "flagged",
    "annotation:task_step_page": "step_task",
}
REFUSED_EVERY = 4  # in a sweep, every fourth request also goes to a caller the door refused


# The world -------------------------------------------------------------------------------------------


@dataclass
class World:
    users: dict[str, Any]
    objects: dict[str, list[Any]]  # kind -> objects an id may name (tasks: one per template)
    fields: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (route, method) -> names
    defaults: dict[tuple[str, str], dict[str, list[str]]] = field(default_factory=dict)  # (url, method)
    typed: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # API: a value per field
    files: set[str] = field(default_factory=set)  # names of file fields
    callers: Callers | None = None  # a signed-in client per caller, made once for the module


ANSWERS = [
    {
        "question": "Why is the sky blue?",
        "answer": f"Because of Rayleigh scattering, reason {n} [1].",
        "quotes": [{"title": "Sky", "url": "https://en.wikipedia.org/wiki/Sky", "extract": "blue light"}],
        "source": {"model": f"m{n}"},
    }
    for n in range(4)
]


def _build_world(tmp: Any) -> World:
    from django.contrib.auth.models import Group, User

    from annotation.demonstrations import service as demos
    from annotation.feedback.answers_import import import_answers
    from annotation.feedback.batches import (
        BatchSettings,
        create_batch_from_source,
        create_feedback_batch,
        group_answers,
    )
    from annotation.models import Assignment, Export, ExportStatus, FeedbackItem, JudgeRun, Question
    from annotation.questions.service import import_questions
    from annotation.workforce.invitations import invite
    from annotation.workforce.states import qualify_for_role
    from browser.models import Corpus, CorpusImport
    from core.permissions import Role
    from training.checkpoints import state_dir
    from training.models import (
        BenchmarkRun,
        Experiment,
        ModelCheckpoint,
        ProxyEvaluation,
        RLEpisode,
        Round,
        SamplingRun,
        TrainingRun,
    )

    users: dict[str, Any] = {"anonymous": None}
    for name, role in (
        ("charlie", None),
        ("alice", "researcher"),
        ("bob", "labeler"),
        ("dana", "demonstrator"),
        ("sam", None),
    ):
        users[name] = User.objects.create_user(name, is_staff=name == "sam")  # no password: nothing to hash
        if role:
            users[name].groups.add(Group.objects.get_or_create(name=role)[0])
            qualify_for_role(users[name], Role(role), by=None, reason="qualified by the test setup")
    corpus = Corpus.objects.create(name="freshwiki", document_count=100)
    report = import_questions(
        b'{"question": "Why is the sky blue?"}\n{"question": "Who won the 2022 AFL Grand Final?"}',
        filename="q.jsonl",
    )
    Question.objects.update(split="bc")
    answers = import_answers("\n".join(json.dumps(row) for row in ANSWERS).encode())
    tasks = []
    for template, preset in (("webgpt_comparison", ""), ("ranking", ""), ("rating", "gophercite")):
        config = BatchSettings(f"fuzz {template}", template, preset, required_probability=0.0)
        batch = create_feedback_batch(users["alice"], config, group_answers(answers, template)[:1])
        item = batch.items.get()
        order = list(item.answers.order_by("id").values_list("id", flat=True))
        tasks.append(
            Assignment.objects.create(
                item=item, labeler=users["bob"], order=order, leased_until=timezone.now() + timedelta(days=1)
            )
        )
        item.slots_taken, item.is_open = 1, False
        item.save()
    # A judgement flagged for review (its overall rating against its coherence one), last among the tasks:
    # the flag review page then shows its decision form, whose fields the decision routes are fuzzed with.
    # It is a gold item too, so the batch's gold page shows its explanation form (read for the fuzz).
    flagged = FeedbackItem.objects.create(
        batch=tasks[0].item.batch,
        question=answers[0].question,
        is_gold=True,
        gold_expected={"preference": 1.0},
    )
    flagged.answers.set(group_answers(answers, "webgpt_comparison")[1])
    tasks.append(
        Assignment.objects.create(
            item=flagged,
            labeler=User.objects.create_user("frank"),
            order=list(flagged.answers.order_by("id").values_list("id", flat=True)),
            status="submitted",
            response={"ratings": {"overall": "a_better", "coherence": "b_much_better"}},
            flags=["overall_contradicts_dimensions"],
            submitted_at=timezone.now(),
            leased_until=timezone.now(),
        )
    )
    # Dana's first episode goes through every step (its page's forms are read at each), the second browses.
    dana, forms = users["dana"], World(users, {})
    episode = demos.next_episode(dana)
    page = reverse("annotation:episode", args=[episode.pk])
    for command in ("Search AFL Grand Final", "Clicked on link 0", "Quote: won by Geelong", "End: Answer"):
        _read_forms(forms, _client(forms, "dana"), page)
        episode = demos.record_action(episode.pk, dana, command, uuid.uuid4(), episode.version).episode
    _read_forms(forms, _client(forms, "dana"), page)  # the answer step
    assert demos.return_to_browsing(episode.pk, dana) == ""
    episode.refresh_from_db()
    demos.record_action(episode.pk, dana, "End: Nonsense", uuid.uuid4(), episode.version)
    _read_forms(forms, _client(forms, "dana"), page)  # finished without an answer: the note form
    finished = episode
    episode = demos.next_episode(dana)
    demos.record_action(episode.pk, dana, "Search AFL Grand Final", uuid.uuid4(), episode.version)
    # Bob's step review of Dana's finished episode (the whole page of a step: a step that exists, one not).
    steps = create_batch_from_source(
        users["alice"], BatchSettings("fuzz steps", "step_review", required_probability=0.0), "demonstrations"
    )
    step_task = Assignment.objects.create(
        item=steps.items.get(),
        labeler=users["bob"],
        order=[],
        leased_until=timezone.now() + timedelta(days=1),
    )
    (tmp / "media" / "exports").mkdir(parents=True)
    (tmp / "media" / "exports" / "fuzz.jsonl").write_text('{"row": 1}\n')
    export = Export.objects.create(
        owner=users["alice"], export_format="rm-pairs", status=ExportStatus.DONE, file_name="fuzz.jsonl"
    )
    run = TrainingRun.objects.create(kind="rm", export=export, owner=users["alice"])
    rl_run = TrainingRun.objects.create(kind="rl", owner=users["alice"])
    failed_run = TrainingRun.objects.create(kind="rm", export=export, owner=users["alice"], status="failed")
    (state_dir(failed_run.pk) / "checkpoint-2").mkdir(parents=True)  # it can continue
    RLEpisode.objects.create(
        run=rl_run, step=1, index=0, question=answers[0].question, question_text=answers[0].question.text,
        kind="answer", quotes=answers[0].quotes, answered=True, answer=answers[0].text, reward=0.5, group=0,
        baseline=0.25, scale=1.0, advantage=0.25, tokens=7, kl=0.01, kl_penalty=0.0002, entropy=9.5,
    )  # fmt: skip
    (tmp / "models" / "tiny").mkdir(parents=True)
    checkpoint = ModelCheckpoint.objects.create(
        kind="rm", name="tiny", base_model="x", path=str(tmp / "models" / "tiny")
    )
    invitation = invite(users["alice"], [Role.LABELER], "fuzz")  # its page opens for a valid token
    objects = {
        "person": [users["bob"]],  # made without a password: a new invitation link for him is allowed
        "invitation": [{"token": invitation.token}],
        "pending_invitation": [invitation.invitation],  # withdrawn by a request that goes through
        "task": tasks,
        "flagged": [tasks[-1], tasks[0]],
        "step_task": [{"pk": step_task, "index": 1}, {"pk": step_task, "index": 99}],
        "guidelines": [{"template": name} for name in ("webgpt_comparison", "rating", "nope")],
        "guidelines_preset": [{"template": "rating", "preset": name} for name in ("gophercite", "nope")],
        "work_kind": [{"kind": name} for name in ("webgpt_comparison", "rating:gophercite", "nope")],
        "episode": [episode, finished],
        "batch": [tasks[0].item.batch],
        "export": [export],
        "corpus_import": [
            CorpusImport.objects.create(corpus=corpus, source="f.jsonl", source_format="jsonl")
        ],
        "question": [report.questions.first()],
        "import": [report],
        "run": [run, rl_run],  # an RL run's episodes: one
        "failed_run": [failed_run],
        "checkpoint": [checkpoint],
        "sampling_run": [
            SamplingRun.objects.create(owner=users["alice"], policy_name="tiny", n=1, episodes_total=1)
        ],
        "answer": answers[:1],
        "round": [Round.objects.create(number=1, name="fuzz round")],
        "proxy_evaluation": [
            ProxyEvaluation.objects.create(
                owner=users["alice"], reward_model=checkpoint, reward_model_name=checkpoint.name
            )
        ],
        "judge_run": [
            JudgeRun.objects.create(
                owner=users["alice"], batch=tasks[0].item.batch, judge_kind="reward_model", judge_name="tiny"
            )
        ],
        "benchmark_run": [
            BenchmarkRun.objects.create(
                owner=users["alice"],
                benchmark="triviaqa",
                sampling_run=SamplingRun.objects.create(
                    owner=users["alice"], policy_name="tiny", n=1, episodes_total=1
                ),
            )
        ],
        "experiment": [
            Experiment.objects.create(
                name="fuzz", policies=[{"policy_name": "tiny", "n": 1, "reward_model_name": ""}]
            )
        ],
    }
    return World(users, objects, forms.fields, forms.defaults, forms.typed, forms.files)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory, freshwiki_index_dir):
    """One of everything, built once inside a transaction that is rolled back when the module ends."""
    tmp = tmp_path_factory.mktemp("fuzz")
    with rolled_back_world(django_db_blocker, tmp, freshwiki_index_dir):
        built = _build_world(tmp)
        _read_fields(built)
        built.callers = Callers(built)
        yield built


@contextmanager
def rolled_back_world(django_db_blocker: Any, tmp: Path, index_dir: Path) -> Iterator[None]:
    """For a module's world: its folders under ``tmp``, the shared FreshWiki index, and one transaction
    rolled back when the block ends (this module's and the permission matrix's)."""
    overrides = override_settings(
        CORPUS_INDEX_DIR=index_dir,
        DEFAULT_CORPUS="freshwiki",
        MEDIA_ROOT=tmp / "media",
        MODEL_STORE_DIR=tmp / "models",
    )
    with overrides, django_db_blocker.unblock(), transaction.atomic():
        yield
        transaction.set_rollback(True)


@pytest.fixture
def fuzz_settings(settings, freshwiki_index_dir, world):
    """Per test (the autouse fixtures move the index folder): the world's folders, and no API throttle
    (a fuzz test sends far more than a person; the throttles have their own tests)."""
    settings.CORPUS_INDEX_DIR = freshwiki_index_dir
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"user": None},
    }
    yield world
    world.callers.end_of_test()


def candidates(route: Route, world: World) -> list[Any]:
    """The objects an id in the route's URL may name."""
    return world.objects[FUZZ_KIND.get(route.name) or object_kind(route)]


def url_of(route: Route, world: World, pick: int = 0) -> str:
    if not route.params:
        return route.url()
    named = candidates(route, world)
    candidate = named[pick % len(named)]
    # The guidelines pages name a template (and a preset): their candidates are the URL's keyword arguments.
    return route.url(**candidate) if isinstance(candidate, dict) else route.url(pk=candidate)


# Fields, read from the site ------------------------------------------------------------------------------

_FORM = re.compile(r"<form\b([^>]*)>(.*?)</form>", re.S)
_ATTR = re.compile(r'\b(action|hx-post|method|name|value|type)="([^"]*)"')
_TAG = re.compile(r"<(textarea|select)\b([^>]*)>(.*?)</\1>|<(input|button)\b([^>]*)>", re.S)
_OPTION = re.compile(r"<option\b([^>]*)>")
# A task or browsing page's script posts the page view it was served with to its heartbeat URL (no form).
_HEARTBEAT = re.compile(r'data-heartbeat-url="([^"]+)"[^>]*?data-page-view="([^"]+)"')


def _read_fields(world: World) -> None:
    """What each route takes: the forms on every page a caller can open, and the OpenAPI schema."""
    routes = all_routes()
    for caller in CALLERS[1:]:
        client = _client(world, caller)
        for route in routes:
            if "GET" in route.methods and not route.is_api:
                for pick in range(len(candidates(route, world)) if route.params else 1):
                    _read_forms(world, client, url_of(route, world, pick))
    _read_schema(world, routes)


def _read_forms(world: World, client: Client, page_url: str) -> None:
    """The fields of the forms on one page, with the values the page fills in (hidden keys, versions,
    chosen options), for the routes they post to: their action (or the page), and htmx's hx-post; and the
    page view its script sends to its heartbeat."""
    response = client.get(page_url)
    if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
        return
    html = response.content.decode()
    for attrs, body in _FORM.findall(html):
        found = dict(_ATTR.findall(attrs))
        method = "GET" if found.get("method", "post").lower() == "get" else "POST"
        targets = {found.get("action") or page_url, found.get("hx-post", "")}
        for _, tag_attrs, _ in _tags(body):
            tag = dict(_ATTR.findall(tag_attrs))
            targets.add(tag.get("hx-post", ""))  # a field that saves itself (the answer's draft)
            if tag.get("type") == "file":
                world.files.add(tag.get("name", ""))
        values = _values(body)
        for target in targets - {""}:
            route = _route_at(target.split("?")[0])
            if route is not None:
                world.fields.setdefault((route.name, method), set()).update(values)
                world.defaults.setdefault((target, method), {}).update({k: v for k, v in values.items() if v})
    for target, view in _HEARTBEAT.findall(html):
        route = _route_at(target)
        if route is not None:
            world.fields.setdefault((route.name, "POST"), set()).add("page_view")
            world.defaults.setdefault((target, "POST"), {})["page_view"] = [view]


def _tags(body: str) -> list[tuple[str, str, str]]:
    """(kind, attributes, content) of each field of a form."""
    return [(m[1] or m[4], m[2] if m[1] else m[5], m[3] or "") for m in _TAG.finditer(body)]


def _values(body: str) -> dict[str, list[str]]:
    """Each field's name and the value(s) the page fills in (as a browser would submit them), with the
    first named submit button as the one clicked (the flag review's Keep sends decision=keep)."""
    values: dict[str, list[str]] = {}
    clicked = False
    for kind, tag_attrs, inner in _tags(body):
        tag = dict(_ATTR.findall(tag_attrs))
        name = tag.get("name")
        if name and not clicked and (tag.get("type") == "submit" or (kind == "button" and "type" not in tag)):
            values.setdefault(name, []).append(html_lib.unescape(tag.get("value", "")))
            clicked = True
        if not name or tag.get("type") in ("file", "submit") or kind == "button":
            continue
        chosen = values.setdefault(name, [])
        if kind == "textarea":
            chosen.append(html_lib.unescape(inner or ""))
        elif kind == "select":
            options = _OPTION.findall(inner or "")
            selected = [o for o in options if re.search(r"\bselected\b", o)] or options[:1]
            chosen += [html_lib.unescape(dict(_ATTR.findall(o)).get("value", "")) for o in selected]
        elif tag.get("type") in ("checkbox", "radio"):
            if "checked" in tag_attrs:
                chosen.append(html_lib.unescape(tag.get("value", "on")))
        else:
            chosen.append(html_lib.unescape(tag.get("value", "")))
    return values


def _route_at(path: str) -> Route | None:
    try:
        match = resolve(path)
    except Resolver404:
        return None
    return next((route for route in all_routes() if route.name == match.view_name), None)


def _read_schema(world: World, routes: list[Route]) -> None:
    """Request fields and query parameters of the API, with a value of each field's type."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema.get("components", {}).get("schemas", {})
    paths = {re.sub(r"\{[^}]+\}", "{}", key): value for key, value in schema["paths"].items()}
    for route in routes:
        if not route.is_api:
            continue
        path = "/" + re.sub(r"<[^>]+>", "{}", route.pattern)  # the schema may call <int:pk> {id}
        for method, operation in paths.get(path, {}).items():
            names = world.fields.setdefault((route.name, method.upper()), set())
            names.update(p["name"] for p in operation.get("parameters", ()) if p.get("in") == "query")
            for content in operation.get("requestBody", {}).get("content", {}).values():
                ref = content.get("schema", {}).get("$ref", "")
                properties = components.get(ref.rsplit("/", 1)[-1], {}).get("properties", {})
                names.update(properties)
                world.files.update(n for n, p in properties.items() if p.get("format") == "binary")
                typed = world.typed.setdefault((route.name, method.upper()), {})
                typed.update(
                    {n: _typed(p, components) for n, p in properties.items() if not p.get("readOnly")}
                )
                typed.update(SCHEMA_GAPS.get(route.name, {}))


# Values the schema cannot tell: fields it types as plain strings whose rule is checked later (so that
# the error says what is wrong).
SCHEMA_GAPS = {"api-assignment-flag-decision": {"decision": "keep"}}


def _typed(prop: dict[str, Any], components: dict[str, Any]) -> Any:
    """A plausible value for a schema property: the first choice, a fresh UUID, 0, "x", {}..."""
    ref = prop.get("$ref") or next((p.get("$ref") for p in prop.get("allOf", []) if "$ref" in p), None)
    if ref:
        prop = components.get(ref.rsplit("/", 1)[-1], {})
    if prop.get("enum"):
        return next((choice for choice in prop["enum"] if choice), prop["enum"][0])
    if prop.get("format") == "uuid":
        return str(uuid.uuid4())
    return {"integer": 1, "number": 0.5, "boolean": True, "array": [], "object": {}}.get(
        prop.get("type"), "x"
    )


# Values -------------------------------------------------------------------------------------------------

DEEP = "[" * 5000 + "]" * 5000
# The values that broke something once, by kind; each kind is drawn as often as hypothesis's own text.
NUL = ["\x00", "a\x00b", "\x00" * 3]
NUMBERS = [
    "²",
    "٣",
    "9" * 30,
    "9" * 5000,
    "-1",
    "0",
    "1",
    "2",
    "1.5",
    "1e999",
    "NaN",
    "-Infinity",
    "2024-13-45",
]
JSONISH = [
    DEEP,
    '{"a": ' * 60 + "1" + "}" * 60,
    "[]",
    "{}",
    "null",
    '[{"start": 0, "end": 5, "support": "supported", "relevance": "relevant", "quotes": [0]}]',
    '[{"start": "\\u0000", "end": 1e999, "quotes": [99999999999999999999]}]',
]
LONG = ["x" * 1001, "x" * 20_001, "y " * 40_000]
WORDS = [
    "",
    " ",
    "javascript:alert(1)",
    "../../../etc/passwd",
    "<script>alert(1)</script>",
    "'; DROP TABLE annotation_question; --",
    "a_better",
    "webgpt_comparison",
    "rating",
    "file",
    "bc",
    "rm-pairs",
    "parquet",
    "End: Answer",
    "search",
    "quote",
    "yes",
]
TEXT = (
    st.sampled_from(NUL)
    | st.sampled_from(NUMBERS)
    | st.sampled_from(JSONISH)
    | st.sampled_from(LONG)
    | st.sampled_from(WORDS)
    | st.text(max_size=40)
)
# Fields a spray leaves as the page set them: without them most requests stop at the first check.
KEPT = {"csrfmiddlewaretoken", "submit_key", "version", "key", "kind"}
# Keys inside JSON objects (a task response's parts, a run's settings), with the site's field names.
INNER_KEYS = ["comment", "ratings", "overall", "answers", "A", "B", "claims", "trust", "0", "flags", "ranks"]
INNER_KEYS += ["likert", "tags", "1", "plausible", "justification", "max_length", "threads", "epochs"]
JSON_LEAF = (
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40) | st.floats() | TEXT
)


def json_values(keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        JSON_LEAF,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
        max_leaves=20,
    )


def _keys(world: World, route: Route, method: str) -> st.SearchStrategy[str]:
    names = sorted(world.fields.get((route.name, method), set()))
    known = st.sampled_from(names) if names else st.sampled_from(INNER_KEYS)
    return (
        known | known | known | st.sampled_from(["pk", "id", "page", "format", "key"]) | st.text(max_size=8)
    )


@st.composite
def requests(
    draw: Any, world: World, route: Route, method: str, through: list[str], refused: list[str]
) -> dict[str, Any]:
    """One request (``_draw_request``) and who sends it ("to"): a caller let through the door, and one
    time in four a refused caller too."""
    to = [draw(st.sampled_from(through or refused))]
    if through and refused and draw(st.integers(0, 3)) == 0:
        to.append(draw(st.sampled_from(refused)))
    return {**_draw_request(draw, world, route, method), "to": to}


def _draw_request(draw: Any, world: World, route: Route, method: str) -> dict[str, Any]:
    """One request: the URL (the object it names, the query string) and, but for GET, a body encoded
    once (a multipart file is read when encoded) with its content type. Bodies start from what the page
    would send (or, for the API, a value of each field's type) and change a few fields."""
    keys = _keys(world, route, method)
    url = url_of(route, world, draw(st.integers(0, 2)))
    # An id nobody has (the guidelines pages name a template: their candidates include an unknown one).
    if "pk" in route.params and draw(st.integers(0, 9)) == 0:
        url = route.url(pk=draw(st.sampled_from([MISSING_ID, int("9" * 30)])))
    if method == "GET":
        query = draw(st.dictionaries(keys, st.lists(TEXT, min_size=1, max_size=2), max_size=4))
        return {"url": url + "?" + urlencode(query, doseq=True), "kind": "query"}
    kinds = ["form", "multipart", "raw", "form", "multipart"] + (["json"] * 5 if route.is_api else [])
    kind = draw(st.sampled_from([*kinds, "huge"] if draw(st.integers(0, 19)) == 0 else kinds))
    if kind == "raw":
        raw = draw(st.binary(max_size=200) | st.sampled_from([DEEP.encode(), b'{"a": NaN}', b"{" * 100]))
        types = ["application/json", "application/x-www-form-urlencoded", "text/plain"]
        return _body(url, kind, raw, draw(st.sampled_from(types)))
    if kind == "huge":  # over DATA_UPLOAD_MAX_MEMORY_SIZE
        return _body(url, kind, b"comment=" + b"x" * (6 * 1024 * 1024), "application/x-www-form-urlencoded")
    changes = draw(st.lists(st.tuples(keys, st.booleans()), min_size=1, max_size=5))
    spray = draw(st.booleans())  # then one odd value in every field the page fills in, not a few
    if kind == "json":
        body = dict(world.typed.get((route.name, method), {}))
        for key, keep in changes:
            if keep or key not in body:
                body[key] = draw(json_values(st.sampled_from(INNER_KEYS) | keys))
            else:
                del body[key]
        return _body(url, kind, json.dumps(body).encode(), "application/json")
    fields = {k: list(v) for k, v in world.defaults.get((url, method), {}).items()}
    if spray:
        value = draw(TEXT)
        fields = {k: v if k in KEPT else [value] for k, v in fields.items()}
    for key, keep in changes:
        if keep or key not in fields:
            fields[key] = draw(st.lists(TEXT, min_size=1, max_size=2))
        else:
            del fields[key]
    if kind == "form":
        return _body(url, kind, urlencode(fields, doseq=True).encode(), "application/x-www-form-urlencoded")
    for name in sorted(world.files):
        if draw(st.booleans()):
            content = draw(st.binary(max_size=300) | st.lists(json_values(keys), max_size=4).map(_jsonl))
            filename = draw(st.sampled_from(["a.jsonl", "q.csv", "x\x00.jsonl", "x" * 300 + ".jsonl"]))
            fields[name] = SimpleUploadedFile(filename, content)
    return _body(url, kind, encode_multipart(BOUNDARY, fields), MULTIPART_CONTENT)


def _body(url: str, kind: str, body: bytes, content_type: str) -> dict[str, Any]:
    return {"url": url, "kind": kind, "body": body, "content_type": content_type}


def _jsonl(rows: list[Any]) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode()


# Sending and checking -------------------------------------------------------------------------------------


def _client(world: World, caller: str) -> Client:
    client = Client()
    if world.users[caller] is not None:
        client.force_login(world.users[caller])
    return client


def _send(client: Client, method: str, request: dict[str, Any]):
    if request["kind"] == "query":
        return client.generic(method, request["url"])
    return client.generic(method, request["url"], request["body"], content_type=request["content_type"])


def _row_counts() -> dict[str, int]:
    tables = [t for t in connection.introspection.table_names() if t not in UNCOUNTED]
    quote = connection.ops.quote_name
    # Table names from the database's own catalogue, quoted: one round trip for every count.
    sql = "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {quote(t)})" for t in tables)  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return dict(zip(tables, cursor.fetchone(), strict=True))


def _writes() -> dict[str, Any]:
    """What this transaction has written so far, per table (sessions and sign-in attempts left out).
    PostgreSQL: the rows inserted, updated and deleted (pg_stat_xact_user_tables). These counts only
    grow, rolled-back savepoints included, so any write between two readings shows, whatever it did to the
    row count. SQLite keeps no such counts: there, each table's row count (an UPDATE goes unseen)."""
    if connection.vendor != "postgresql":
        return _row_counts()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables"
            " WHERE schemaname = current_schema()"
        )
        return {name: counts for name, *counts in cursor.fetchall() if name not in UNCOUNTED}


def _written(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {table: (before.get(table), now) for table, now in after.items() if before.get(table) != now}


def _session_key(client: Client) -> str | None:
    cookie = client.cookies.get(django_settings.SESSION_COOKIE_NAME)
    return cookie.value if cookie else None


class Callers:
    """A client per caller, signed in once for the module (the sessions are made in the module's
    transaction). A request that ended or changed a caller's session (a logout) has the caller signed in
    again; such a session is made inside the test's transaction, so its client is dropped when the test
    ends (``end_of_test``) and made again by the next test that needs it."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.clients: dict[str, Client] = {}
        self.keys: dict[str, str | None] = {}
        self.renewed: set[str] = set()
        # The write counts after the last request: the next one's "before" (PostgreSQL's counts only grow,
        # and nothing but a request or a sign-in writes between two requests). None: read them again.
        self.last: dict[str, Any] | None = None
        for caller in CALLERS:
            self._sign_in(caller)
        self.renewed.clear()

    def _sign_in(self, caller: str) -> Client:
        client = self.clients[caller] = _client(self.world, caller)
        self.last = None  # signing in writes (the session, the user's last login)
        self.keys[caller] = _session_key(client)
        self.renewed.add(caller)
        return client

    def client(self, caller: str) -> Client:
        client = self.clients.get(caller)
        if client is None or _session_key(client) != self.keys[caller]:
            client = self._sign_in(caller)
        return client

    def end_of_test(self) -> None:
        self.last = None
        for caller in self.renewed:
            del self.clients[caller]
        self.renewed.clear()


def _refused(response: Any) -> bool:
    """A refusal at the door: not signed in, not the caller's role, not an object the caller may see."""
    if response.status_code == 302 and response.url.startswith(reverse("login") + "?next="):
        return True
    return response.status_code in (401, 403, 404)


def _check(callers: Callers, method: str, request: dict[str, Any], to: list[str] | tuple[str, ...]) -> dict:
    """Send ``request`` as each caller in ``to``, each in a savepoint rolled back after it: no answer is
    a 5xx, and a refusal writes nothing. The answers, by caller."""
    answers = {}
    for caller in to:
        client = callers.client(caller)
        monotonic = connection.vendor == "postgresql"  # SQLite: row counts, which a rollback takes back
        before = callers.last if callers.last is not None and monotonic else _writes()
        callers.last = None
        with transaction.atomic():
            response = _send(client, method, request)
            after = _writes()
            callers.last = after
            where = f"{method} {request['url'][:200]} as {caller} ({request['kind']})"
            assert response.status_code < 500, where
            if 400 <= response.status_code < 500 or _refused(response):
                changed = _written(before, after)
                kept = KEPT_ON_REFUSAL.get(resolve(request["url"].split("?")[0]).view_name)
                if kept and response.status_code == 400 and _kept_as_draft(response):
                    changed = _beyond_a_draft(changed, kept)
                assert not changed, f"{where}: {response.status_code} but rows written: {changed}"
            transaction.set_rollback(True)
        answers[caller] = response
    return answers


def _kept_as_draft(response: Any) -> bool:
    """An incomplete submit: the API said what is missing and keeps the response as the draft."""
    is_json = response.get("Content-Type", "").startswith("application/json")
    return is_json and response.json().get("complete") is False and "errors" in response.json()


def _beyond_a_draft(changed: dict[str, tuple[Any, Any]], tables: set[str]) -> dict[str, tuple[Any, Any]]:
    """The writes left when ``tables`` may have rows updated (none inserted or deleted)."""
    return {
        table: (before, after)
        for table, (before, after) in changed.items()
        if table not in tables or before[0] != after[0] or before[2] != after[2]
    }


def own_request(world: World, route: Route, method: str) -> dict[str, Any]:
    """The route's own request: the page's form as the page fills it in, the API's typed body, or for GET
    the URL alone."""
    url = url_of(route, world)
    if method == "GET":
        return {"url": url, "kind": "query"}
    if route.is_api:
        body = json.dumps(world.typed.get((route.name, method), {})).encode()
        return _body(url, "json", body, "application/json")
    form = urlencode(world.defaults.get((url, method), {}), doseq=True).encode()
    return _body(url, "form", form, "application/x-www-form-urlencoded")


def _share(index: int, through: list[str], refused: list[str]) -> list[str]:
    """Who sends a sweep's ``index``-th request: one caller let through the door, in turn, and every
    REFUSED_EVERY-th request one of the refused callers too, in turn."""
    if not through:
        return [refused[index % len(refused)]]
    to = [through[index % len(through)]]
    if refused and index % REFUSED_EVERY == 0:
        to.append(refused[index // REFUSED_EVERY % len(refused)])
    return to


ROUTES = [route.name for route in all_routes()]


@pytest.mark.parametrize("name", ROUTES)
def test_no_input_to_any_route_is_a_500_and_a_refusal_writes_nothing(fuzz_settings, name):
    world = fuzz_settings
    route = route_named(name)
    sqlite = connection.vendor == "sqlite"  # test_ids_on_sqlite: the values SQLite alone refuses
    for method in route.methods:
        if sqlite and not world.fields.get((name, method)):
            continue  # no field or parameter to put an id in
        answers = _check(world.callers, method, own_request(world, route, method), CALLERS)
        through = [caller for caller, response in answers.items() if not _refused(response)]
        refused = [caller for caller in CALLERS if caller not in through]
        assert through, f"{method} {name}: every caller is refused, so nothing behind its door is fuzzed"
        for index, request in enumerate(sweep(world, route, method, IDS if sqlite else SWEEP)):
            _check(world.callers, method, request, _share(index, through, refused))
        if not sqlite:
            size = "rich" if name in RICH and method != "GET" else "read" if method == "GET" else "write"
            _fuzz(world, route, method, EXAMPLES[size], through, refused)


def _fuzz(world: World, route: Route, method: str, examples: int, through: list[str], refused: list[str]):
    @seed(zlib.crc32(f"{route.name} {method}".encode()))  # reproducible, and not the same draws everywhere
    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(request=requests(world, route, method, through, refused))
    def fuzz(request: dict[str, Any]) -> None:
        _check(world.callers, method, request, request["to"])

    fuzz()


@pytest.mark.parametrize("write", ["an UPDATE", "a DELETE and an INSERT"])
def test_the_refusal_check_catches_a_write_that_leaves_every_row_count_as_it_was(
    fuzz_settings, monkeypatch, write
):
    """Bob's heartbeat made to write (``write``) before it refuses (a 409): the check says so, though
    every table's row count is as it was (what this test compared before)."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite keeps no per-transaction write counts: there the check compares row counts")
    from annotation.feedback import assignment as work
    from annotation.models import Assignment
    from training.models import Round

    world = fuzz_settings
    rows = _row_counts()
    seen = []

    def write_then_refuse(assignment_id: int, labeler: Any, **kwargs: Any) -> None:
        if write == "an UPDATE":
            Assignment.objects.filter(pk=assignment_id).update(draft={"touched": True})
        else:
            Round.objects.all().delete()
            Round.objects.create(number=1, name="fuzz round, again")
        seen.append(_row_counts())
        raise work.TaskClosed(work.SLOT_GONE)

    monkeypatch.setattr(work, "keep_alive", write_then_refuse)
    heartbeat = own_request(world, route_named("annotation:task_heartbeat"), "POST")
    table = "annotation_assignment" if write == "an UPDATE" else "training_round"
    with pytest.raises(AssertionError, match=f"409 but rows written: {{'{table}'"):
        _check(world.callers, "POST", heartbeat, ["bob"])
    assert seen == [rows]  # the write left every row count as it was


def test_the_flag_decisions_are_fuzzed_on_a_flagged_judgement(fuzz_settings):
    """The decision routes name the flagged judgement, and their own request (the review page's form, the
    API's typed body) is a decision that is stored: the write path is behind the door the fuzz opens."""
    from annotation.models import Assignment, FlagReview

    world = fuzz_settings
    flagged = world.objects["flagged"][0]
    for name in ("console:feedback_flag_decision", "api-assignment-flag-decision"):
        alice = world.callers.client("alice")  # signed in, if need be, outside the rolled-back savepoint
        with transaction.atomic():
            response = _send(alice, "POST", own_request(world, route_named(name), "POST"))
            assert response.status_code in (200, 201, 302), (name, response.content[:500])
            assert FlagReview.objects.filter(assignment=flagged).count() == 1, name
            assert Assignment.objects.get(pk=flagged.pk).flag_decision != "", name
            transaction.set_rollback(True)


# Each of these, alone in every field the route takes: the values that broke something once.
# Ids SQLite cannot hold (19-20 digits overflow its integers, where PostgreSQL just finds nothing, as it does
# for 30: so on PostgreSQL 30 digits stand for all three).
IDS = ["²", "9" * 19, "9" * 20, "9" * 30, "9" * 5000]
SWEEP = ["\x00", "²", "9" * 30, "9" * 5000, "1e999", "NaN", DEEP, "x" * 20_001]


def sweep(world: World, route: Route, method: str, values: list[str] = SWEEP) -> list[dict[str, Any]]:
    """Requests that put one of ``values`` in every field (query parameter, form field, JSON field)."""
    url = url_of(route, world)
    names = sorted(world.fields.get((route.name, method), set()) - KEPT)
    requests: list[dict[str, Any]] = []
    for value in values:
        if method == "GET":  # one parameter at a time: a bad ?page= would answer before ?split= is read
            queries = [{name: value} for name in names] or [dict.fromkeys(["q", "page", "id"], value)]
            requests += [{"url": f"{url}?{urlencode(query)}", "kind": "query"} for query in queries]
            continue
        names = names or ["comment", "name", "id"]
        fields = {k: v for k, v in world.defaults.get((url, method), {}).items() if k in KEPT}
        form = urlencode({**fields, **dict.fromkeys(names, value)}, doseq=True).encode()
        requests.append(_body(url, "form", form, "application/x-www-form-urlencoded"))
        if route.is_api:
            typed = world.typed.get((route.name, method), {})
            body = {k: {"comment": value} if isinstance(v, dict) else value for k, v in typed.items()}
            requests.append(_body(url, "json", json.dumps(body).encode(), "application/json"))
    if method != "GET":
        requests.append(_body(url, "raw", DEEP.encode(), "application/json"))
    return requests


@pytest.fixture(scope="module", autouse=True)
def sqlite_run(request, tmp_path_factory):
    """test_ids_on_sqlite's process, started with the module's first test so that it runs beside the rest
    (under pytest-xdist, where another worker may hold that test, the test starts it itself)."""
    wanted = any(item.name == "test_ids_on_sqlite" for item in request.session.items)
    if connection.vendor == "sqlite" or not wanted or os.environ.get("PYTEST_XDIST_WORKER"):
        yield None
        return
    run = SqliteRun(tmp_path_factory.mktemp("fuzz-sqlite"))
    yield run
    run.stop()  # already done, unless the module ended before the test waited for it


class SqliteRun:
    """This module's tests but test_ids_on_sqlite, in a pytest process on a SQLite database of its own."""

    def __init__(self, folder: Path) -> None:
        self.output = folder / "output.txt"
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{folder / 'fuzz.sqlite3'}"}
        command = [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"]
        with self.output.open("w") as output:
            self.process = subprocess.Popen(
                [*command, "-k", "not on_sqlite"], env=env, stdout=output, stderr=subprocess.STDOUT
            )

    def wait(self) -> tuple[int, str]:
        try:
            returncode = self.process.wait(timeout=600)
        finally:
            self.stop()
        return returncode, self.output.read_text()[-6000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def test_ids_on_sqlite(sqlite_run, tmp_path):
    """The id sweep on SQLite (``make run``'s database), in a process of its own: 20 nines overflow SQLite's
    integers where PostgreSQL finds nothing, so a form taking ids without ``ModelIdsField`` was a 500 there
    and passed here (issue 23: rounds and proxy evaluations). There, the routes that take a field or a
    parameter get the id values alone, from the callers let through; the process started with the module
    (``sqlite_run``), so it ran beside the other tests."""
    if connection.vendor == "sqlite":
        pytest.skip("this run is on SQLite already")
    returncode, output = (sqlite_run or SqliteRun(tmp_path)).wait()
    assert returncode == 0, output
