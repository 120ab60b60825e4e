"""Benchmark feedback-task assignment (next task, submit) with 100,000 items in the pool, 1 and 16 labelers.

    .venv/bin/python bench/bench_tasks.py --out var/bench/tasks.json

Builds a throw-away PostgreSQL database (``--db``, dropped and recreated; its name must contain "bench")
and a VAR_DIR next to --out (``tasks/``) with bench_http's helpers, adds labelers ``labeler01``.., and fills
the pool through the app's own services: ``import_questions`` (100,000 plain-JSONL questions),
``import_answers`` (one model answer with a quote per question), each fed files within its size limit
(``file_parts``), and ``create_feedback_batch`` (a rating batch, preset truthfulqa, overlap 1, required
probability 0: one item per answer, open, no slot taken), then ANALYZE, as autovacuum would after a load of
that size. Setup is timed apart from the measurements.

Two levels, both timed with perf_counter:

* HTTP (the number to compare with the target): gunicorn with 4 sync workers in production mode (DEBUG=0,
  BEHIND_TLS_PROXY=1), driven from 127.0.0.1 by stdlib clients in threads. Each labeler signs in and
  repeats: POST /tasks/start/ ("next task", the 302 not followed) -> GET /tasks/<id>/ ("task page", the
  submit_key comes from it) -> POST /tasks/<id>/submit/ with truthful=yes, informative=no ("submit", 302).
  Closed loop, no pause unless --think-ms: at 16 labelers firing back to back this measures saturation.
* Service (in this process, gunicorn stopped): ``next_assignment(labeler)`` then ``submit(...)``, to
  separate the HTTP/Django stack from the assignment code and its queries (1 labeler by default; more run
  as threads of this one process, sharing its GIL). Also recorded: the SQL statements of each call, and
  EXPLAIN (ANALYZE, BUFFERS) of the pick query (SELECT ... FOR UPDATE SKIP LOCKED) exactly as the app
  sends it for labeler01, rolled back, after setup and after each HTTP run: its plan can change as the
  assignment table grows, and with it the "next task" latency.

Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_http import Client, add_users, fresh_site, run_phase, serving  # noqa: E402
from bench.bench_search import summary  # noqa: E402

TARGET_P95_MS = 25.0  # p95 of next task and of submit, over HTTP, at 1 and at 16 labelers
OPERATIONS = ("next task", "task page", "submit")  # the target is on "next task" and "submit"
RESPONSE = {"field-truthful": "yes", "field-informative": "no"}  # a complete truthfulqa rating
_TASK = re.compile(r"^/tasks/(\d+)/$")
_PICK = re.compile(r'FROM "annotation_feedbackitem".*SKIP LOCKED', re.S)
_SUBMIT_KEY = re.compile(r'name="submit_key" value="([0-9a-f-]{36})"')
_VERSION = re.compile(r'name="version" value="(\d+)"')


class Labeler(Client):
    """A labeler doing rating tasks back to back (or with a pause, ``think_s`` on average)."""

    def __init__(self, port: int, username: str, seed: int) -> None:
        super().__init__(port, username)
        self.rng = random.Random(seed)  # noqa: S311 (pauses, not secrets)
        self.times: dict[str, list[float]] = {}
        self.think_s = 0.0

    def think(self) -> None:
        if self.think_s:
            time.sleep(self.rng.uniform(0.5, 1.5) * self.think_s)

    def one_round(self, timed: bool) -> None:
        self.think()
        status, headers, _, next_ms = self.request("POST", "/tasks/start/")
        task = urlsplit(headers.get("Location", "")).path
        if status != 302 or not _TASK.match(task):
            raise RuntimeError(f"{self.username}: no task ({status} {headers.get('Location')})")
        _, _, page, page_ms = self.request("GET", task)
        key, version = _SUBMIT_KEY.search(page).group(1), _VERSION.search(page).group(1)
        self.think()
        status, headers, _, submit_ms = self.request(
            # "Submit and back to the list": the default button would open the next task.
            "POST",
            f"{task}submit/",
            {"submit_key": key, "version": version, "then": "list", **RESPONSE},
        )
        if status != 302 or urlsplit(headers.get("Location", "")).path != "/tasks/":
            raise RuntimeError(f"{self.username}: submit of {task} not accepted ({status})")
        if timed:
            for label, ms in zip(OPERATIONS, (next_ms, page_ms, submit_ms), strict=True):
                self.times.setdefault(label, []).append(ms)


def start_django(env: dict[str, str]) -> None:
    """This process as the production server is configured (DEBUG=0: no query log)."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webgpt_site.settings")
    import django

    django.setup()


def file_parts(lines: Iterable[str], max_bytes: int) -> Iterator[bytes]:
    """JSONL files of whole lines, each within ``max_bytes``: the import services refuse a larger file (at
    100,000 items the answers alone are about 73 MB), so a large pool is imported as several files."""
    part: list[bytes] = []
    size = 0
    for line in lines:
        row = line.encode() + b"\n"
        if part and size + len(row) > max_bytes:
            yield b"".join(part)
            part, size = [], 0
        part.append(row)
        size += len(row)
    if part:
        yield b"".join(part)


def build_pool(items: int, seed: int) -> dict:
    """``items`` questions, one answer each, and a rating batch with one open item per answer."""
    from django.conf import settings
    from django.db import connection

    from annotation.feedback.answers_import import import_answers
    from annotation.feedback.batches import BatchSettings, create_feedback_batch
    from annotation.models import FeedbackItem, Question
    from annotation.questions.service import import_questions

    rng = random.Random(seed)  # noqa: S311 (benchmark data)
    words = ["river", "bridge", "castle", "winter", "harbour", "signal", "market", "garden", "tower", "orbit"]
    began = time.perf_counter()
    rows = (
        json.dumps(
            {"question": f"Bench question {i}: why is the {' '.join(rng.sample(words, 3))} {i}?", "id": i}
        )
        for i in range(1, items + 1)
    )
    ids = []
    for number, part in enumerate(file_parts(rows, settings.QUESTION_IMPORT_MAX_BYTES), start=1):
        report = import_questions(part, filename=f"bench-questions-{number}.jsonl", dataset="bench")
        ids += Question.objects.filter(source_import=report).order_by("id").values_list("id", flat=True)
    questions_s = time.perf_counter() - began
    lines = []
    for qid in ids:
        text = " ".join(rng.choices(words, k=60)).capitalize() + "."
        quote = {"title": f"Page {qid}", "url": f"https://example.org/{qid}", "extract": text[:200]}
        lines.append(json.dumps({"question_id": qid, "answer": text, "quotes": [quote]}))
    answers = []
    for part in file_parts(lines, settings.ANSWERS_IMPORT_MAX_BYTES):
        answers += import_answers(part)
    answers_s = time.perf_counter() - began - questions_s
    config = BatchSettings(
        name=f"bench: {items:,} ratings", template="rating", preset="truthfulqa", required_probability=0.0
    )
    batch = create_feedback_batch(None, config, [[answer] for answer in answers])
    batch_s = time.perf_counter() - began - questions_s - answers_s
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {
        "items": FeedbackItem.objects.filter(batch=batch, is_open=True, slots_taken=0).count(),
        "import_questions_s": round(questions_s, 1),
        "import_answers_s": round(answers_s, 1),
        "create_feedback_batch_s": round(batch_s, 1),
        "total_s": round(time.perf_counter() - began, 1),
    }


def http_report(people: list[Labeler], wall_s: float, requests: int, client_cpu_s: float) -> dict:
    per = {label: [t for p in people for t in p.times.get(label, [])] for label in OPERATIONS}
    tasks = len(per["submit"])
    return {
        "level": "http",
        "users": len(people),
        "operations": {label: {"n": len(times), **summary(times)} for label, times in per.items()},
        "wall_s": round(wall_s, 2),
        "tasks_per_s": round(tasks / wall_s, 1),
        "requests_per_s": round(requests / wall_s, 1),
        "client_cpu_s": round(client_cpu_s, 2),  # the client shares the machine's cores with the server
    }


def service_run(usernames: list[str], rounds: int) -> dict:
    """next_assignment() then submit(), ``rounds`` times per labeler, one thread (connection) each."""
    from django.contrib.auth.models import User
    from django.db import connection

    from annotation.feedback.assignment import next_assignment, submit

    response = {key.removeprefix("field-"): value for key, value in RESPONSE.items()}
    times: dict[str, list[float]] = {"next_assignment()": [], "submit()": []}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(username: str) -> None:
        try:
            user = User.objects.get(username=username)
            mine: dict[str, list[float]] = {"next_assignment()": [], "submit()": []}
            for _ in range(rounds):
                start = time.perf_counter()
                task = next_assignment(user)
                middle = time.perf_counter()
                result = submit(task.pk, user, response, uuid.uuid4())
                end = time.perf_counter()
                if not result.validation.complete:
                    raise RuntimeError(f"{username}: {result.validation.errors}")
                mine["next_assignment()"].append((middle - start) * 1000)
                mine["submit()"].append((end - middle) * 1000)
            with lock:
                for label, values in mine.items():
                    times[label].extend(values)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(name,)) for name in usernames]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall_s = time.perf_counter() - start
    if errors:
        raise errors[0]
    return {
        "level": "service",
        "users": len(usernames),
        "operations": {label: {"n": len(values), **summary(values)} for label, values in times.items()},
        "wall_s": round(wall_s, 2),
        "tasks_per_s": round(rounds * len(usernames) / wall_s, 1),
    }


def statements(username: str) -> dict[str, int]:
    """How many SQL statements one next_assignment() and one submit() send (one more task is done)."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation.feedback.assignment import next_assignment, submit

    user = User.objects.get(username=username)
    with CaptureQueriesContext(connection) as picked:
        task = next_assignment(user)
    with CaptureQueriesContext(connection) as submitted:
        submit(task.pk, user, {"truthful": "yes", "informative": "no"}, uuid.uuid4())
    return {"next_assignment": len(picked.captured_queries), "submit": len(submitted.captured_queries)}


def pick_plan(username: str, when: str) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) of the pick query exactly as next_assignment() sends it for ``username``
    (who must hold no live lease); all of it rolled back, so no lease is taken."""
    from django.contrib.auth.models import User
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from annotation.feedback.assignment import next_assignment

    user = User.objects.get(username=username)
    with transaction.atomic():
        with CaptureQueriesContext(connection) as captured:
            next_assignment(user)
        pick = next((q["sql"] for q in captured.captured_queries if _PICK.search(q["sql"])), None)
        if pick is None:
            raise RuntimeError(f"{username} holds a lease: no pick query to explain")
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {pick}")
            plan = [row[0] for row in cursor.fetchall()]
            cursor.execute("SELECT count(*) FROM annotation_assignment WHERE labeler_id = %s", [user.pk])
            done = cursor.fetchone()[0]
        transaction.set_rollback(True)
    execution = next(line for line in plan if line.startswith("Execution Time"))
    return {
        "when": when,
        "labeler": username,
        "labeler_assignments": done - 1,  # without the one rolled back
        "execution_ms": float(execution.split(":")[1].split()[0]),
        "sorts_all_open_items": any("Sort Method" in line for line in plan),  # instead of the index order
        "plan": plan,
        "sql": pick,
    }


def markdown(results: dict) -> str:
    rows = ["| concurrency | operation | n | p50 ms | p95 ms | max ms |", "|---|---|---|---|---|---|"]
    for run in results["runs"]:
        for label, row in run["operations"].items():
            ms = " | ".join(f"{row[k]:.1f}" for k in ("p50_ms", "p95_ms", "max_ms"))
            name = f"{label} (HTTP)" if run["level"] == "http" else f"{label} (in-process)"
            rows.append(f"| {run['users']} | {name} | {row['n']} | {ms} |")
    throughput = ["| concurrency | level | tasks/s | requests/s | wall s |", "|---|---|---|---|---|"]
    for run in results["runs"]:
        per_s = run.get("requests_per_s", "")
        throughput.append(
            f"| {run['users']} | {run['level']} | {run['tasks_per_s']} | {per_s} | {run['wall_s']} |"
        )
    return "\n".join([*rows, "", *throughput])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "tasks.json")
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/webgpt_bench_tasks")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument(
        "--rounds", type=int, nargs="+", default=[200, 40], help="tasks per labeler, one per --concurrency"
    )
    parser.add_argument(
        "--service-concurrency",
        type=int,
        nargs="*",
        default=[1],
        help="in-process runs (threads share the GIL)",
    )
    parser.add_argument("--warmup-rounds", type=int, default=2)
    parser.add_argument("--think-ms", type=float, default=0, help="mean pause before each request (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if len(args.rounds) != len(args.concurrency):
        parser.error("give one --rounds per --concurrency")
    rounds = dict(zip(args.concurrency, args.rounds, strict=True))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops gunicorn
    began = time.perf_counter()
    users = max([*args.concurrency, *args.service_concurrency])
    names = [f"labeler{i:02d}" for i in range(1, users + 1)]
    dev, prod = fresh_site(args.db, args.out.parent / "tasks")
    add_users(dev, "labeler", names)
    start_django(prod)
    pool = build_pool(args.items, args.seed)
    setup_s = time.perf_counter() - began

    plans = [pick_plan(names[0], "after setup")]
    runs = []
    with serving(prod, args.workers, args.threads) as port:
        people = [Labeler(port, name, args.seed + i) for i, name in enumerate(names)]
        for person in people:
            person.login()
        run_phase(people, args.warmup_rounds, timed=False)  # every worker imports, connects, fills caches
        for concurrency in args.concurrency:
            group = people[:concurrency]
            for person in group:
                person.times, person.think_s = {}, args.think_ms / 1000
            runs.append(http_report(group, *run_phase(group, rounds[concurrency], timed=True)))
            plans.append(pick_plan(names[0], f"after HTTP at {concurrency}"))
    for concurrency in args.service_concurrency:
        runs.append(service_run(names[:concurrency], rounds.get(concurrency, 40)))
    queries = statements(names[0])

    http_runs = [run for run in runs if run["level"] == "http"]
    worst = {op: max(run["operations"][op]["p95_ms"] for run in http_runs) for op in ("next task", "submit")}
    results = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "os": platform.platform()},
        "gunicorn": {"workers": args.workers, "threads": args.threads},
        "settings": "DEBUG=0, BEHIND_TLS_PROXY=1 (client sends X-Forwarded-Proto: https), PostgreSQL",
        "pool": pool,
        **{"rounds": rounds, "warmup_rounds": args.warmup_rounds, "think_ms": args.think_ms},
        "runs": runs,
        "sql_statements": queries,
        "pick_plans": plans,
        "target": {
            "p95_ms": TARGET_P95_MS,
            "worst_http_p95_ms": worst,
            "met": all(p95 < TARGET_P95_MS for p95 in worst.values()),
        },
        "setup_s": round(setup_s, 1),
        "total_wall_s": round(time.perf_counter() - began, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    print(f"\nSQL statements: next_assignment() {queries['next_assignment']}, submit() {queries['submit']}")
    for plan in plans:
        shape = "Sort of every open item" if plan["sorts_all_open_items"] else "index order"
        print(f"pick query {plan['when']}: {plan['execution_ms']:.2f} ms, {shape}", end="")
        print(f" ({plan['labeler']}, {plan['labeler_assignments']} assignments before)")
    print("plan after setup:\n  " + "\n  ".join(plans[0]["plan"]))
    met = "met" if results["target"]["met"] else "NOT met"
    shown = ", ".join(f"{op} {p95:.1f} ms" for op, p95 in worst.items())
    print(
        f"\ntarget p95 < {TARGET_P95_MS:.0f} ms (next task and submit over HTTP, 1 and 16): {met} ({shown})"
    )
    print(f"total {results['total_wall_s']} s (setup {results['setup_s']} s); JSON in {args.out}")


if __name__ == "__main__":
    main()
