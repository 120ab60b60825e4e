r"""Where a request's time goes: the load benchmark's requests one at a time, in-process, with a profile.

    .venv/bin/python bench/profile_requests.py \
        --db postgres://postgres@127.0.0.1:5432/webgpt_bench_load_alone --var var/bench/load-alone \
        --out var/bench/profile.json

Runs against the database and VAR_DIR that ``bench_load.py`` built (``--db`` and the folder named as its
``--out``; run that first), in production mode (DEBUG=0), through Django's whole handler and middleware
(``django.test.Client``, with the ``X-Forwarded-Proto: https`` the TLS proxy sends). No network, no
gunicorn, no concurrency: what one request costs the web process, which is what a busy box multiplies.
``--people`` labelers each go through ``--rounds`` rounds of the load's flow (next task, the task page,
three drafts, a heartbeat, "Submit and next"; the landing page once a round) and ``--people`` demonstrators
through bench_http's browsing round. Per request kind: mean and median wall and CPU milliseconds, the SQL
statements and their time, and the inclusive time of the parts that matter (SQL compilation, the database
round trips, template rendering, the middleware, the session and user lookups), from a cProfile of all
requests of that kind; and the functions of this project that take the most, for reading. The profiler
makes everything slower (about 2x): compare kinds and parts within one run, and wall times without
``--no-profile`` only with each other. Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_http import _VERSION, Demonstrator  # noqa: E402
from bench.bench_search import FRESHWIKI, title_word_queries  # noqa: E402
from bench.bench_tasks import _SUBMIT_KEY, RESPONSE  # noqa: E402
from browser.corpus import read_freshwiki  # noqa: E402

_ID = re.compile(r"/\d+/")
_PAGE_VIEW = re.compile(r'data-page-view="([^"]+)"')
# Inclusive time of these parts (a function's cumulative time in the profile; parts may nest).
PARTS = {
    "SQL compilation": ("django/db/models/sql/compiler.py", "as_sql"),
    "database round trips": ("psycopg/cursor.py", "execute"),
    "template rendering": ("django/template/base.py", "_render"),  # Template._render, includes within
    "session load": ("django/contrib/sessions/backends/db.py", "load"),
    "user lookup": ("django/contrib/auth/__init__.py", "get_user"),
    "the view": ("django/core/handlers/base.py", "_get_response"),
    "the whole handler": ("django/core/handlers/base.py", "get_response"),
}


class Timer:
    """Counts and times SQL statements (``connection.execute_wrapper``)."""

    def __init__(self) -> None:
        self.statements, self.seconds = 0, 0.0

    def __call__(self, execute, sql, params, many, context):
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - began
            self.statements += 1


class Recorder:
    """Every request through one ``django.test.Client``, timed, counted and (unless off) profiled by kind."""

    def __init__(self, profile: bool) -> None:
        self.samples: dict[str, list[tuple[float, float, int, float]]] = defaultdict(list)
        self.profiles: dict[str, cProfile.Profile] = {}
        self.profile = profile

    def send(self, client, method: str, path: str, form: dict | None, htmx: bool, name: str):
        from django.db import connection

        headers = {"HX-Request": "true"} if htmx else {}
        timer = Timer()
        profiler = self.profiles.setdefault(name, cProfile.Profile()) if self.profile else None
        with connection.execute_wrapper(timer):
            wall, cpu = time.perf_counter(), time.process_time()
            if profiler:
                profiler.enable()
            if method == "POST":
                body = urlencode(form or {})
                response = client.post(path, body, "application/x-www-form-urlencoded", headers=headers)
            else:
                response = client.get(path, headers=headers)
            if profiler:
                profiler.disable()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        self.samples[name].append((wall * 1000, cpu * 1000, timer.statements, timer.seconds * 1000))
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path} -> {response.status_code}: {response.content[:300]!r}")
        return response

    def report(self, top: int) -> dict:
        kinds = {}
        for name, rows in sorted(self.samples.items()):
            wall, cpu, statements, db = (list(column) for column in zip(*rows, strict=True))
            kind = {
                "requests": len(rows),
                "wall_ms": {"mean": _r(statistics.fmean(wall)), "median": _r(statistics.median(wall))},
                "cpu_ms": {"mean": _r(statistics.fmean(cpu)), "median": _r(statistics.median(cpu))},
                "sql_statements": _r(statistics.fmean(statements)),
                "sql_ms": _r(statistics.fmean(db)),
            }
            if name in self.profiles:
                kind |= profile_parts(self.profiles[name], len(rows), top)
            kinds[name] = kind
        return kinds


def _r(value: float) -> float:
    return round(value, 2)


def profile_parts(profiler: cProfile.Profile, requests: int, top: int) -> dict:
    """Per request: the inclusive ms of PARTS and this project's ``top`` functions by cumulative time."""
    # (file, line, name) -> (calls, primitive calls, own time, cumulative time, callers)
    stats = pstats.Stats(profiler).stats
    parts = {}
    for part, (suffix, function) in PARTS.items():
        entries = {key for key in stats if key[2] == function and key[0].endswith(suffix)}
        # Less what one entry spent inside another (an UPDATE's compiler calling the base compiler).
        nested = sum(
            cumulative
            for key in entries
            for caller, (_, _, _, cumulative) in stats[key][4].items()
            if caller in entries and caller != key
        )
        parts[part] = _r(1000 * (sum(stats[key][3] for key in entries) - nested) / requests)
    packages: dict[str, float] = defaultdict(float)
    for (f, _, _), v in stats.items():
        packages[_package(f)] += v[2]
    ours = [
        (v[3], f"{Path(f).relative_to(ROOT)}:{line} {n}", v[1])
        for (f, line, n), v in stats.items()
        if f.startswith(str(ROOT)) and not f.startswith((str(ROOT / ".venv"), str(ROOT / "bench")))
    ]
    ours.sort(reverse=True)
    return {
        "parts_ms": parts,
        "own_time_by_package_ms": {
            name: _r(1000 * seconds / requests)
            for name, seconds in sorted(packages.items(), key=lambda item: -item[1])[:10]
        },
        "ours_cumulative_ms": [
            {"function": where, "ms": _r(1000 * seconds / requests), "calls": _r(calls / requests)}
            for seconds, where, calls in ours[:top]
        ],
    }


def _package(filename: str) -> str:
    """Where a function's own time is spent: "django/db", "psycopg", "annotation", "(builtins)"..."""
    if filename.startswith("~") or filename.startswith("<"):
        return "(builtins)"
    parts = Path(filename).parts
    if "site-packages" in parts:
        rest = parts[parts.index("site-packages") + 1 :]
        return "/".join(rest[:2]) if rest[0] == "django" else rest[0]
    if filename.startswith(str(ROOT)):
        return Path(filename).relative_to(ROOT).parts[0]
    return "(stdlib)"


class InProcessDemonstrator(Demonstrator):
    """bench_http's demonstrator with requests through ``Recorder`` instead of a socket."""

    def __init__(self, recorder: Recorder, client, username: str, seed: int, queries: list[str]) -> None:
        super().__init__(0, username, seed, queries)
        self.conn.close()
        self.recorder, self.client, self.action = recorder, client, ""

    def act(self, kind: str, text: str, label: str, timed: bool = True) -> int:
        self.action = label
        return super().act(kind, text, label, timed)

    def request(self, method: str, path: str, form: dict | None = None, htmx: bool = False) -> tuple:
        name = f"{method} {_ID.sub('/[id]/', path)}" + (f" ({self.action})" if path.endswith("/act/") else "")
        response = self.recorder.send(self.client, method, path, form, htmx, name)
        return response.status_code, response.headers, response.content.decode(), 0.0


def labeler_round(recorder: Recorder, client, landing: bool) -> None:
    """Next task, its page, three drafts, the heartbeat, "Submit and next" (whose page starts the next)."""
    response = recorder.send(client, "POST", "/tasks/start/", None, False, "POST /tasks/start/")
    location = response.headers.get("Location", "")
    if "/tasks/" not in location or location.rstrip("/").endswith("tasks"):
        raise RuntimeError(f"no task handed out ({response.status_code} {location})")
    path = urlsplit(location).path
    page = recorder.send(client, "GET", path, None, False, "GET /tasks/[id]/").content.decode()
    key, version = _SUBMIT_KEY.search(page).group(1), _VERSION.search(page).group(1)
    view = _PAGE_VIEW.search(page).group(1)
    for _ in range(3):
        draft = RESPONSE | {"version": version}
        recorder.send(client, "POST", f"{path}draft/", draft, True, "POST /tasks/[id]/draft/")
    beat = {"page_view": view}
    recorder.send(client, "POST", f"{path}heartbeat/", beat, True, "POST /tasks/[id]/heartbeat/")
    form = RESPONSE | {"submit_key": key, "version": version}
    if landing:
        form["then"] = "list"
    recorder.send(client, "POST", f"{path}submit/", form, False, "POST /tasks/[id]/submit/")
    if landing:
        recorder.send(client, "GET", "/tasks/", None, False, "GET /tasks/")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/webgpt_bench_load_alone")
    parser.add_argument("--var", type=Path, default=ROOT / "var" / "bench" / "load-alone")
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "profile.json")
    parser.add_argument("--people", type=int, default=10, help="labelers, and as many demonstrators")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--top", type=int, default=12, help="this project's functions listed per kind")
    parser.add_argument("--no-profile", action="store_true", help="times and statements only")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (args.var / "corpora").is_dir():
        raise SystemExit(f"--var {args.var}: no corpus index; run bench_load.py with this --db first")
    os.environ.update(
        {
            "DATABASE_URL": args.db,
            "VAR_DIR": str(args.var),
            "CORPUS_INDEX_DIR": str(args.var / "corpora"),
            "DEBUG": "0",
            "SECRET_KEY": os.urandom(40).hex(),
            "ALLOWED_HOSTS": "testserver",
            "BEHIND_TLS_PROXY": "1",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "webgpt_site.settings",
        }
    )
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client

    def client_of(username: str) -> Client:
        client = Client(headers={"X-Forwarded-Proto": "https"})
        client.force_login(User.objects.get(username=username))
        client.get("/")  # a client's first request loads the middleware: not measured
        return client

    rng = random.Random(args.seed)  # noqa: S311 (benchmark data)
    queries = title_word_queries(read_freshwiki(FRESHWIKI), 200, rng)
    recorder = Recorder(profile=not args.no_profile)
    labelers = [client_of(f"load-labeler{i:03d}") for i in range(1, args.people + 1)]
    demonstrators = [
        InProcessDemonstrator(recorder, client_of(name), name, args.seed + i, queries)
        for i, name in enumerate(f"load-demonstrator{i:03d}" for i in range(1, args.people + 1))
    ]
    warm = Recorder(profile=False)  # the first round of each: imports, caches, the corpus index opened
    for client in labelers[:1]:
        labeler_round(warm, client, landing=True)
    for person in demonstrators:
        person.recorder = warm
        person.start_episode()
        person.one_round(timed=False)
        person.recorder = recorder
    began = time.perf_counter()
    for round_ in range(args.rounds):
        for client in labelers:
            labeler_round(recorder, client, landing=round_ % 5 == 4)
        for person in demonstrators:
            person.one_round(timed=True)
    results = {
        "what": "the load benchmark's requests one at a time, in-process (bench/profile_requests.py)",
        "profiled": not args.no_profile,
        "people": args.people,
        "rounds": args.rounds,
        "seconds": round(time.perf_counter() - began, 1),
        "kinds": recorder.report(args.top),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'request':<46} {'wall':>7} {'cpu':>7} {'sql':>5} {'sql ms':>7}")
    for name, kind in results["kinds"].items():
        wall, cpu = kind["wall_ms"]["mean"], kind["cpu_ms"]["mean"]
        print(f"{name:<46} {wall:7.1f} {cpu:7.1f} {kind['sql_statements']:5.1f} {kind['sql_ms']:7.1f}")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
