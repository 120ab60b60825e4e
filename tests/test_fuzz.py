"""No input is a 500, and a refusal writes nothing: odd bodies and query strings to every route.

The routes come from walking the URL conf (tests/routes.py), so a new endpoint is fuzzed without anyone
listing it; only a new object route needs a line in OBJECT_OF (which object its id names), or this test
says so. Each request goes to the route as every caller (anonymous, no role, researcher, labeler,
demonstrator), naming real objects (a task of each template, a browsing and a finished episode...), an id
nobody has, or 30 digits:

- what a route takes is read from the site: the forms on every page each caller can open (field names
  and the values the page fills in: hidden keys, versions, chosen options), and for the API the OpenAPI
  schema (request fields, a value of each field's type, query parameters);
- first, every time, a sweep puts each value that broke something once (NUL, "²", 30 and 5,000 digits,
  1e999, NaN, JSON nested 5,000 deep, 20,001 characters) into every field and query parameter, and
  posts deep JSON as the body;
- then hypothesis: the page's own body with a few fields changed or one odd value in all of them, as a
  urlencoded or multipart form (with files), JSON for the API, raw bytes, or a body over Django's size
  limit; query strings for GET. Values: the ones above, long texts, odd schemes, hypothesis's own text.

Asserted for every response: no 5xx (the test client raises a view's exception), and on a 4xx the row
count of every table is as before (sessions and sign-in attempts excepted: recording those is their job).
Each request runs in a savepoint rolled back afterwards, so a submit or a delete that succeeds leaves the
world as it was; the world is built once for the module, in a transaction rolled back at its end. Runs on
the configured database (CI: PostgreSQL, which refuses NUL, long names and odd numbers); on the code
before issue 11's input fixes it failed on 11 routes.
"""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
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
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.routes import MISSING_ID, Route, all_routes, object_kind

pytestmark = pytest.mark.django_db

CALLERS = ("anonymous", "charlie", "alice", "bob", "dana")  # none, no role, researcher, labeler, demonstrator
# Tables whose rows a refused request may still write, by design.
UNCOUNTED = {"django_session", "axes_accessattempt", "axes_accessfailurelog", "axes_accesslog"}

# Examples per route and method: more where a body reaches a service, fewer for pages and lists. The
# whole module stays at a few minutes on two cores.
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
    "training:sampling_new",
    "training:proxy_evaluations",
    "api-proxy-evaluations",
}
EXAMPLES = {"rich": 25, "write": 6, "read": 4}


# The world -------------------------------------------------------------------------------------------


@dataclass
class World:
    users: dict[str, Any]
    objects: dict[str, list[Any]]  # kind -> objects an id may name (tasks: one per template)
    fields: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (route, method) -> names
    defaults: dict[tuple[str, str], dict[str, list[str]]] = field(default_factory=dict)  # (url, method)
    typed: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # API: a value per field
    files: set[str] = field(default_factory=set)  # names of file fields


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
    from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
    from annotation.models import Assignment, Export, ExportStatus, FeedbackItem, Question
    from annotation.questions.service import import_questions
    from browser.models import Corpus, CorpusImport
    from training.models import ModelCheckpoint, ProxyEvaluation, Round, SamplingRun, TrainingRun

    users: dict[str, Any] = {"anonymous": None}
    for name, role in (
        ("charlie", None),
        ("alice", "researcher"),
        ("bob", "labeler"),
        ("dana", "demonstrator"),
    ):
        users[name] = User.objects.create_user(name)  # no password: nothing to hash
        if role:
            users[name].groups.add(Group.objects.get_or_create(name=role)[0])
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
    flagged = FeedbackItem.objects.create(batch=tasks[0].item.batch, question=answers[0].question)
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
    (tmp / "media" / "exports").mkdir(parents=True)
    (tmp / "media" / "exports" / "fuzz.jsonl").write_text('{"row": 1}\n')
    export = Export.objects.create(
        owner=users["alice"], export_format="rm-pairs", status=ExportStatus.DONE, file_name="fuzz.jsonl"
    )
    run = TrainingRun.objects.create(kind="rm", export=export, owner=users["alice"])
    (tmp / "models" / "tiny").mkdir(parents=True)
    checkpoint = ModelCheckpoint.objects.create(
        kind="rm", name="tiny", base_model="x", path=str(tmp / "models" / "tiny")
    )
    objects = {
        "task": tasks,
        "guidelines": [{"template": name} for name in ("webgpt_comparison", "rating", "nope")],
        "guidelines_preset": [{"template": "rating", "preset": name} for name in ("gophercite", "nope")],
        "episode": [episode, finished],
        "batch": [tasks[0].item.batch],
        "export": [export],
        "corpus_import": [
            CorpusImport.objects.create(corpus=corpus, source="f.jsonl", source_format="jsonl")
        ],
        "question": [report.questions.first()],
        "import": [report],
        "run": [run],
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
    }
    return World(users, objects, forms.fields, forms.defaults, forms.typed, forms.files)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory, freshwiki_index_dir):
    """One of everything, built once inside a transaction that is rolled back when the module ends."""
    tmp = tmp_path_factory.mktemp("fuzz")
    overrides = override_settings(
        CORPUS_INDEX_DIR=freshwiki_index_dir,
        DEFAULT_CORPUS="freshwiki",
        MEDIA_ROOT=tmp / "media",
        MODEL_STORE_DIR=tmp / "models",
    )
    with overrides, django_db_blocker.unblock(), transaction.atomic():
        built = _build_world(tmp)
        _read_fields(built)
        yield built
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
    return world


def url_of(route: Route, world: World, pick: int = 0) -> str:
    if not route.params:
        return route.url()
    candidates = world.objects[object_kind(route)]
    candidate = candidates[pick % len(candidates)]
    # The guidelines pages name a template (and a preset): their candidates are the URL's keyword arguments.
    return route.url(**candidate) if isinstance(candidate, dict) else route.url(pk=candidate)


# Fields, read from the site ------------------------------------------------------------------------------

_FORM = re.compile(r"<form\b([^>]*)>(.*?)</form>", re.S)
_ATTR = re.compile(r'\b(action|hx-post|method|name|value|type)="([^"]*)"')
_TAG = re.compile(r"<(textarea|select)\b([^>]*)>(.*?)</\1>|<(input|button)\b([^>]*)>", re.S)
_OPTION = re.compile(r"<option\b([^>]*)>")


def _read_fields(world: World) -> None:
    """What each route takes: the forms on every page a caller can open, and the OpenAPI schema."""
    routes = all_routes()
    for caller in CALLERS[1:]:
        client = _client(world, caller)
        for route in routes:
            if "GET" in route.methods and not route.is_api:
                for pick in range(len(world.objects[object_kind(route)]) if route.params else 1):
                    _read_forms(world, client, url_of(route, world, pick))
    _read_schema(world, routes)


def _read_forms(world: World, client: Client, page_url: str) -> None:
    """The fields of the forms on one page, with the values the page fills in (hidden keys, versions,
    chosen options), for the routes they post to: their action (or the page), and htmx's hx-post."""
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


def _tags(body: str) -> list[tuple[str, str, str]]:
    """(kind, attributes, content) of each field of a form."""
    return [(m[1] or m[4], m[2] if m[1] else m[5], m[3] or "") for m in _TAG.finditer(body)]


def _values(body: str) -> dict[str, list[str]]:
    """Each field's name and the value(s) the page fills in (as a browser would submit them)."""
    values: dict[str, list[str]] = {}
    for kind, tag_attrs, inner in _tags(body):
        tag = dict(_ATTR.findall(tag_attrs))
        name = tag.get("name")
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
def requests(draw: Any, world: World, route: Route, method: str) -> dict[str, Any]:
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


class Callers:
    """One signed-in client per caller for a test. Sessions are made outside the examples' savepoints
    (one made inside would be rolled back with them), and again when a request ended one (a logout)."""

    def __init__(self, world: World) -> None:
        self.world, self.clients = world, {}
        self.baseline = _row_counts()  # every example starts from it: each one is rolled back

    def client(self, caller: str) -> Client:
        client = self.clients.get(caller)
        cookie = client and client.cookies.get(django_settings.SESSION_COOKIE_NAME)
        if client is None or (self.world.users[caller] is not None and not (cookie and cookie.value)):
            client = self.clients[caller] = _client(self.world, caller)
        return client


def _check(callers: Callers, method: str, request: dict[str, Any]) -> None:
    for caller in CALLERS:
        client = callers.client(caller)
        with transaction.atomic():
            response = _send(client, method, request)
            where = f"{method} {request['url'][:200]} as {caller} ({request['kind']})"
            assert response.status_code < 500, where
            if 400 <= response.status_code < 500:
                after = _row_counts()
                changed = {t: (n, after[t]) for t, n in callers.baseline.items() if n != after[t]}
                assert not changed, f"{where}: {response.status_code} but rows written: {changed}"
            transaction.set_rollback(True)


ROUTES = [route.name for route in all_routes()]


@pytest.mark.parametrize("name", ROUTES)
def test_no_input_to_any_route_is_a_500_and_a_refusal_writes_nothing(fuzz_settings, name):
    route = next(route for route in all_routes() if route.name == name)
    if connection.vendor == "sqlite":  # test_ids_on_sqlite: the values SQLite alone refuses
        callers = Callers(fuzz_settings)
        for method in route.methods:
            for request in sweep(fuzz_settings, route, method, IDS):
                _check(callers, method, request)
        return
    for method in route.methods:
        size = "rich" if name in RICH and method != "GET" else "read" if method == "GET" else "write"
        _fuzz(fuzz_settings, route, method, EXAMPLES[size])


def _fuzz(world: World, route: Route, method: str, examples: int) -> None:
    callers = Callers(world)

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(request=requests(world, route, method))
    def fuzz(request: dict[str, Any]) -> None:
        _check(callers, method, request)

    for request in sweep(world, route, method):  # run first, every time, before the random examples
        fuzz = example(request=request)(fuzz)
    fuzz()


# Each of these, alone in every field the route takes: the values that broke something once.
# Ids SQLite cannot hold (19-20 digits overflow its integers, where PostgreSQL just finds nothing).
IDS = ["²", "9" * 19, "9" * 20, "9" * 30, "9" * 5000]
SWEEP = ["\x00", *IDS, "1e999", "NaN", DEEP, "x" * 20_001]


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


def test_ids_on_sqlite(tmp_path):
    """The id sweep on SQLite (``make run``'s database), in a process of its own: 20 nines overflow SQLite's
    integers where PostgreSQL finds nothing, so a form taking ids without ``ModelIdsField`` was a 500 there
    and passed here (issue 23: rounds and proxy evaluations)."""
    if connection.vendor == "sqlite":
        pytest.skip("this run is on SQLite already")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'fuzz.sqlite3'}"}
    command = [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"]
    command += ["-k", "not on_sqlite"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-6000:]
