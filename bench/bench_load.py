r"""Load benchmark: labelers and demonstrators at a human pace (locust) beside an export and a training job.

    .venv/bin/python bench/bench_load.py --out var/bench/load.json        # about 12 minutes
    .venv/bin/python bench/bench_load.py --no-jobs --configs 4x1 --steps 200 300 400 \
        --out var/bench/load-alone.json --db postgres://postgres@127.0.0.1:5432/webgpt_bench_load_alone

(both in ``make bench``; the second, about 7 minutes, measures the web box without the Celery jobs).

What it builds (bench_http's and bench_tasks' helpers): a throw-away PostgreSQL database (``--db``,
dropped and recreated; its name must contain "bench") and a VAR_DIR next to --out, named as it
(``load/``), with the demo data (FreshWiki corpus), a rating pool of ``--items`` items (``build_pool``; the
demo's own feedback batches are deactivated so every labeler gets the same kind of task), a demonstration
batch on FreshWiki, and the load's people, each with a session already signed in (people sign in once a
day; a PBKDF2 sign-in per simulated person would measure the password hasher). gunicorn serves it in
production mode (DEBUG=0, BEHIND_TLS_PROXY=1; the clients send ``X-Forwarded-Proto: https`` as the TLS
proxy would). Two real Celery workers (``exports`` and ``training`` queues, concurrency 1, Redis
``--redis`` under the key prefix ``bench-load:``) run against the same database throughout: one export
(``comparisons-full``, asked again as soon as the previous one is done: the export worker is never idle)
and one reward-model training run (fast preset, ``TRAINING_THREADS=--training-threads``, many steps,
cancelled at the end). The first step starts once the run has trained a step. ``--no-jobs`` leaves the
workers and jobs out: the web box alone, as a deployment with the training queue on another machine has it.

Each step is a fresh ``locust`` process (``bench/load_users.py``; labelers through the task pages with
session + CSRF, drafts every few seconds, lease heartbeats, a task every ~30 s; demonstrators browsing with
a few seconds between actions) against a fresh gunicorn: the users start over ~10 s, locust's statistics
are reset ``--warmup`` seconds after the last one started, then ``--duration`` seconds are measured.
During a step pg_stat_activity is sampled every 0.5 s (connections of the database, by application name:
web, each worker, this script) and /proc every 2 s (CPU time of gunicorn, PostgreSQL, the workers and
locust). Steps:

1. the target (``--labelers`` 100 and ``--demonstrators`` 20) on each ``--configs`` (gunicorn workers x
   threads; the first, 4x1 as docs/deployment.md recommends, is the baseline of the ratios);
2. the knee: ``--steps`` labelers (demonstrators at the same 5:1 ratio) on the recommended shape (the
   baseline, unless another had no errors and a p95 more than 15% lower, about the difference between two
   identical runs here), stopping after the first step with errors or a p95 of 100 ms or more.

Afterwards, in the database: every judgement a labeler was told was stored (the submit's redirect to
/tasks/) is there once, with that labeler, that submit key and that response, never revised (a submit
applied twice would have made a revision); no item of the pool was leased to two labelers at overlapping
times and none holds more live assignments than its overlap. The script exits 1 if a check fails.
Everything runs on 127.0.0.1 and stops by itself. Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import platform
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_http import fresh_site, manage, serving  # noqa: E402
from bench.bench_search import FRESHWIKI, title_word_queries  # noqa: E402
from bench.bench_tasks import build_pool, start_django  # noqa: E402
from browser.corpus import read_freshwiki  # noqa: E402

TARGET_P95_MS = 100.0  # per request, all endpoints together, with zero errors
NOISE = 0.15  # p95 moved by up to this between identical runs here: a shape must beat the baseline by more
KEY_PREFIX = "bench-load:"  # Redis keys of this benchmark's broker (database --redis)
LABELERS_PER_DEMONSTRATOR = 5
TRAINING_SETTINGS = {
    "max_steps": 1_000_000,
    "eval_every": 1_000_000,
    "max_length": 128,
    "learning_rate": 1e-4,
}
PACE = {"task_s": 30.0, "draft_s": 5.0, "heartbeat_s": 15.0, "think_s": 4.0, "start_spread_s": 10.0}
SPAWN_RATE = 40  # users started per second


def with_app(env: dict[str, str], name: str) -> dict[str, str]:
    """``env`` whose database connections carry ``application_name`` (pg_stat_activity tells them apart)."""
    return env | {"DATABASE_URL": env["DATABASE_URL"].split("?")[0] + f"?application_name={name}"}


def setup(args: argparse.Namespace, var: Path) -> tuple[dict[str, str], dict]:
    """The database, the demo data, the pool, the people; the production env and what was built."""
    dev, prod = fresh_site(args.db, var)
    manage(dev, "load_demo", "--no-reward-model")
    broker = {"CELERY_BROKER_URL": args.redis, "CELERY_BROKER_KEY_PREFIX": KEY_PREFIX}
    prod |= broker | {"OMP_WAIT_POLICY": "PASSIVE", "TRAINING_THREADS": str(args.training_threads)}
    clear_broker(args.redis)
    start_django(with_app(prod, "bench-load-script"))
    began = time.perf_counter()
    pool = build_pool(args.items, args.seed)
    from annotation.demonstrations.batches import create_demonstration_batch
    from annotation.models import FeedbackBatch, Question

    batch = FeedbackBatch.objects.get(name__startswith="bench: ")
    FeedbackBatch.objects.exclude(pk=batch.pk).update(is_active=False)  # the demo's batches: other pages
    questions = Question.objects.exclude(dataset="bench").order_by("id")[: args.questions]
    create_demonstration_batch(None, "bench: load browsing", questions, corpus="freshwiki")
    most = max([args.labelers, *args.steps])
    people = make_people(most, max(args.demonstrators, most // LABELERS_PER_DEMONSTRATOR))
    return prod, {"pool": pool, "batch": batch.pk, "people": people, "setup_s": time.perf_counter() - began}


def clear_broker(url: str) -> None:
    """Drop this benchmark's messages left by an earlier run (only keys under KEY_PREFIX)."""
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{KEY_PREFIX}*"))
    if keys:
        client.delete(*keys)


def make_people(labelers: int, demonstrators: int) -> dict[str, list[list[str]]]:
    """``load-labeler001``.. and ``load-demonstrator001``.. in their role groups, each with a signed-in
    session (what the session cookie of a person who signed in this morning holds)."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import Group, User

    from annotation.workforce.states import qualify_for_role
    from core.permissions import Role

    store = import_module(settings.SESSION_ENGINE).SessionStore
    password = make_password(secrets.token_urlsafe(24))  # one hash for all: nobody signs in with it
    people: dict[str, list[list[str]]] = {}
    for kind, group, count in (
        ("labelers", "labeler", labelers),
        ("demonstrators", "demonstrator", demonstrators),
    ):
        users = User.objects.bulk_create(
            [User(username=f"load-{group}{i:03d}", password=password) for i in range(1, count + 1)]
        )
        Group.objects.get(name=group).user_set.add(*users)
        for user in users:  # past the gate, as people already working are
            qualify_for_role(user, Role(group), by=None, reason="benchmark")
        people[kind] = []
        for user in users:
            session = store()
            session[SESSION_KEY] = str(user.pk)
            session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
            session[HASH_SESSION_KEY] = user.get_session_auth_hash()
            session.create()
            people[kind].append([user.username, session.session_key])
    return people


@contextlib.contextmanager
def celery_workers(
    env: dict[str, str], logs: Path, training_nice: int
) -> Iterator[dict[str, subprocess.Popen]]:
    """A worker on ``exports`` and one on ``training`` (concurrency 1 each), as in docs/deployment.md: the
    training worker under ``nice -n training_nice``."""
    workers: dict[str, subprocess.Popen] = {}
    try:
        for queue in ("exports", "training"):
            nice = ["nice", "-n", str(training_nice)] if queue == "training" and training_nice else []
            command = [*nice, sys.executable, "-m", "celery", "-A", "webgpt_site", "worker", "-Q", queue]
            command += ["--concurrency", "1", "-n", f"{queue}@bench-load", "--loglevel", "WARNING"]
            with open(logs / f"worker-{queue}.log", "ab") as log:
                workers[queue] = subprocess.Popen(  # noqa: S603 (our own interpreter and app)
                    command, cwd=ROOT, env=with_app(env, f"bench-load-{queue}-worker"), stdout=log, stderr=log
                )
        yield workers
    finally:
        for worker in workers.values():
            worker.terminate()
        for worker in workers.values():
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


class Jobs(threading.Thread):
    """Keeps one export and one training run going for as long as it runs: a new export as soon as the
    last one ended (its file deleted), a new run if the run ended. Samples (time, exports done, rows
    exported, training steps) every 2 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.halt = threading.Event()
        self.samples: list[tuple[float, int, int, int]] = []
        self.exports: list[dict] = []  # finished: status, rows, seconds
        self.runs: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        from django.contrib.auth.models import User
        from django.db import connection

        from annotation.exports.rules import clean_export_request
        from annotation.exports.service import export_now, request_export
        from annotation.models import ExportFormat, Split
        from core.storage import EXPORTS, get_storage
        from training.models import RunKind, RunStatus, TrainingRun
        from training.runs.jobs import cancel_run, request_run

        try:
            owner = User.objects.get(username="researcher")
            pairs = export_now(
                owner,
                ExportFormat.RM_PAIRS,
                clean_export_request(ExportFormat.RM_PAIRS, "jsonl", split=Split.RM),
            )
            full = clean_export_request(ExportFormat.COMPARISONS_FULL, "jsonl")
            export = run = None
            last_sample = 0.0
            while not self.halt.is_set():
                if export is not None:
                    export.refresh_from_db()
                    if export.status in ("done", "failed"):
                        seconds = (export.finished_at - export.started_at).total_seconds()
                        self.exports.append({"status": export.status, "rows": export.row_count, "s": seconds})
                        if export.file_name:  # downloaded, say: bounded disk over ~1,000 exports
                            get_storage(EXPORTS).delete(export.file_name)
                        export = None
                if export is None:
                    export = request_export(owner, ExportFormat.COMPARISONS_FULL, full, "jsonl")
                if run is None or TrainingRun.objects.get(pk=run.pk).status not in (
                    RunStatus.QUEUED,
                    RunStatus.RUNNING,
                ):
                    run = request_run(owner, RunKind.RM, pairs, TRAINING_SETTINGS, preset="fast")
                    self.runs.append(run.pk)
                if time.monotonic() - last_sample >= 2:
                    last_sample = time.monotonic()
                    steps = sum(TrainingRun.objects.filter(pk__in=self.runs).values_list("step", flat=True))
                    done = [e for e in self.exports if e["status"] == "done"]
                    self.samples.append((time.time(), len(done), sum(e["rows"] for e in done), steps))
                self.halt.wait(0.5)
            for pk in self.runs:  # a running one stops after its current step
                cancel_run(owner, TrainingRun.objects.get(pk=pk))
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            connection.close()

    def training_state(self) -> tuple[str, int]:
        from training.models import TrainingRun

        if not self.runs:
            return "none", 0
        run = TrainingRun.objects.get(pk=self.runs[-1])
        return run.status, run.step

    def window(self, start: float, end: float) -> dict:
        """What the jobs did between ``start`` and ``end`` (epoch seconds)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}
        first, last = inside[0], inside[-1]
        return {
            "exports_done": last[1] - first[1],
            "rows_exported": last[2] - first[2],
            "training_steps": last[3] - first[3],
            "seconds": round(last[0] - first[0], 1),
        }


def proc_cpu() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command name, CPU seconds of it and its reaped children), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), comm, sum(int(f) for f in fields[11:15]) / tick)
    return table


def cpu_groups(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds of each process tree in ``roots``, of every PostgreSQL process and of the whole machine
    (whatever else runs on it shows as "others": a shared machine's neighbours)."""
    table = proc_cpu()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    groups = {}
    for name, root in roots.items():
        todo, total = [root], 0.0
        while todo:
            pid = todo.pop()
            total += table.get(pid, (0, "", 0.0))[2]
            todo += children.get(pid, [])
        groups[name] = total
    groups["postgresql"] = sum(cpu for _, comm, cpu in table.values() if comm.startswith("postgres"))
    busy = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    groups["whole machine"] = (sum(busy) - busy[3] - busy[4]) / os.sysconf("SC_CLK_TCK")  # less idle, iowait
    return groups


class Sampler(threading.Thread):
    """pg_stat_activity every 0.5 s (connections to the database by application and state) and CPU time
    by process group every 2 s, with timestamps, until stopped."""

    def __init__(self, db_url: str, roots: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.db_url, self.roots = db_url, roots
        self.halt = threading.Event()
        self.connections: list[tuple[float, dict[str, int], int]] = []  # time, open by application, active
        self.cpu: list[tuple[float, dict[str, float]]] = []

    def run(self) -> None:
        import psycopg

        name = urlsplit(self.db_url).path.lstrip("/")
        url = self.db_url.split("?")[0].replace("postgres://", "postgresql://", 1)
        with psycopg.connect(url, autocommit=True, application_name="bench-load-sampler") as conn:
            last_cpu = 0.0
            while not self.halt.is_set():
                rows = conn.execute(
                    "SELECT application_name, state, count(*) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid() GROUP BY 1, 2",
                    [name],
                ).fetchall()
                by_app: Counter[str] = Counter()
                for app, _, count in rows:
                    by_app[app or "?"] += count
                active = sum(count for _, state, count in rows if state == "active")
                self.connections.append((time.time(), dict(by_app), active))
                if time.monotonic() - last_cpu >= 2:
                    last_cpu = time.monotonic()
                    self.cpu.append((time.time(), cpu_groups(self.roots)))
                self.halt.wait(0.5)

    def window(self, start: float, end: float) -> dict:
        samples = [s for s in self.connections if start <= s[0] <= end]
        cpu = [s for s in self.cpu if start <= s[0] <= end]
        if not samples:
            return {}
        totals = [sum(by_app.values()) for _, by_app, _ in samples]
        actives = [active for _, _, active in samples]
        apps = sorted({app for _, by_app, _ in samples for app in by_app})
        result = {
            "samples": len(samples),
            "open_max": max(totals),
            "open_mean": round(sum(totals) / len(totals), 1),
            "active_max": max(actives),
            "active_mean": round(sum(actives) / len(actives), 2),
            "open_max_by_application": {app: max(s[1].get(app, 0) for s in samples) for app in apps},
        }
        if len(cpu) >= 2:
            seconds = cpu[-1][0] - cpu[0][0]
            cores = {group: (cpu[-1][1][group] - cpu[0][1].get(group, 0.0)) / seconds for group in cpu[-1][1]}
            cores["others"] = cores["whole machine"] - sum(
                v for k, v in cores.items() if k != "whole machine"
            )
            result["cpu_cores"] = {group: round(value, 2) for group, value in cores.items()}
        return result


def read_stats(prefix: Path) -> dict:
    """Locust's final statistics (``<prefix>_stats.csv``): per request name and aggregated."""
    endpoints, aggregated = [], {}
    with open(f"{prefix}_stats.csv", newline="") as stats:
        for row in csv.DictReader(stats):
            if not int(row["Request Count"]):  # only seen before the statistics were reset
                continue
            entry = {
                "method": row["Type"],
                "name": row["Name"],
                "requests": int(row["Request Count"]),
                "failures": int(row["Failure Count"]),
                "p50_ms": float(row["50%"]),
                "p95_ms": float(row["95%"]),
                "p99_ms": float(row["99%"]),
                "mean_ms": round(float(row["Average Response Time"]), 1),
                "max_ms": round(float(row["Max Response Time"]), 1),
                "requests_per_s": round(float(row["Requests/s"]), 2),
            }
            if row["Name"] == "Aggregated":
                aggregated = entry
            else:
                endpoints.append(entry)
    endpoints.sort(key=lambda e: -e["requests"])
    return {"endpoints": endpoints, "aggregated": aggregated}


def run_step(
    args: argparse.Namespace,
    prod: dict[str, str],
    built: dict,
    roots: dict[str, int],
    jobs: Jobs,
    step: dict,
    folder: Path,
) -> dict:
    """One locust run against a fresh gunicorn of ``step``'s shape; its statistics and samples."""
    tag = f"{step['phase']}-{step['workers']}x{step['threads']}-{step['labelers']}"
    users = step["labelers"] + step["demonstrators"]
    run_s = math.ceil(users / SPAWN_RATE) + args.warmup + args.duration + 2
    config = {
        **args.pace,
        "seed": args.seed,
        "warmup_s": args.warmup,
        "n_labelers": step["labelers"],
        "n_demonstrators": step["demonstrators"],
        "labelers": built["people"]["labelers"][: step["labelers"]],
        "demonstrators": built["people"]["demonstrators"][: step["demonstrators"]],
        "queries": built["queries"],
        "record": str(folder / "told-stored.jsonl"),
        "summary": str(folder / f"{tag}-summary.json"),
    }
    (folder / f"{tag}-config.json").write_text(json.dumps(config))
    status, _ = jobs.training_state()
    with serving(with_app(prod, "bench-load-web"), step["workers"], step["threads"]) as port:
        command = [sys.executable, "-m", "locust", "-f", str(ROOT / "bench" / "load_users.py"), "--headless"]
        command += ["--users", str(users), "--spawn-rate", str(SPAWN_RATE), "--run-time", f"{run_s}s"]
        command += ["--host", f"http://127.0.0.1:{port}", "--csv", str(folder / tag), "--only-summary"]
        command += ["--loglevel", "WARNING", "--exit-code-on-error", "0", "--stop-timeout", "0"]
        env = os.environ | {"LOAD_CONFIG": str(folder / f"{tag}-config.json")}
        sampler = Sampler(args.db, roots | {"gunicorn": 0, "locust": 0})
        with open(folder / f"{tag}-locust.log", "wb") as log:
            locust = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)  # noqa: S603
            sampler.roots["locust"] = locust.pid
            sampler.roots["gunicorn"] = gunicorn_pid(port)
            sampler.start()
            try:
                rc = locust.wait(timeout=run_s + 120)
            finally:
                if locust.poll() is None:  # past its time, or this script is stopping
                    locust.kill()
                rc = locust.wait()
                sampler.halt.set()
                sampler.join()
    summary = json.loads(Path(config["summary"]).read_text())
    start, end = summary["measure_start"] or 0.0, summary["measure_end"]
    training_status, _ = jobs.training_state()
    return {
        **step,
        "locust_rc": rc,
        "measured_s": round(end - start, 1),
        **read_stats(folder / tag),
        "failures_whole_run": summary["failures_whole_run"],
        "requests_whole_run": summary["requests_whole_run"],
        "judgements_told_stored": summary["judgements_told_stored"],
        "user_errors": summary.get("user_errors", {}),
        "user_error_examples": summary.get("user_error_examples", {}),
        "database": sampler.window(start, end),
        "jobs": jobs.window(start, end) | {"training_status": [status, training_status]},
    }


def gunicorn_pid(port: int) -> int:
    """The gunicorn master listening on ``port`` (its workers are its children): our serving()'s child."""
    for pid, (ppid, _, _) in proc_cpu().items():
        if ppid != os.getpid():
            continue
        with contextlib.suppress(OSError):
            if f"127.0.0.1:{port}" in (Path("/proc") / str(pid) / "cmdline").read_text():
                return pid
    return 0


def check_database(record: Path, batch: int) -> dict:
    """Told stored = stored once (and as sent); no item leased to two labelers at once."""
    from django.db import connection

    told = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    by_task = Counter(row["task"] for row in told)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.id, u.username, a.status, a.submit_key::text, a.response->>'comment',"
            " a.response->>'truthful', a.response->>'informative',"
            " (SELECT count(*) FROM annotation_assignmentrevision r WHERE r.assignment_id = a.id)"
            " FROM annotation_assignment a JOIN auth_user u ON u.id = a.labeler_id WHERE a.id = ANY(%s)",
            [list(by_task)],
        )
        stored = {row[0]: row[1:] for row in cursor.fetchall()}
        # Two labelers' leases on one item overlapping in time (a skipped or expired one ends at its
        # lease's end; a submitted one when it was submitted).
        cursor.execute(
            """
            WITH spans AS (
                SELECT a.id, a.item_id, a.labeler_id, tstzrange(a.started_at,
                       CASE WHEN a.status = 'submitted' THEN a.submitted_at ELSE a.leased_until END) AS span
                FROM annotation_assignment a JOIN annotation_feedbackitem i ON i.id = a.item_id
                WHERE i.batch_id = %s)
            SELECT count(*) FROM spans x JOIN spans y
              ON x.item_id = y.item_id AND x.id < y.id AND x.labeler_id <> y.labeler_id AND x.span && y.span
            """,
            [batch],
        )
        overlapping = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM (SELECT a.item_id FROM annotation_assignment a"
            " JOIN annotation_feedbackitem i ON i.id = a.item_id"
            " JOIN annotation_feedbackbatch b ON b.id = i.batch_id"
            " WHERE i.batch_id = %s AND a.status IN ('leased', 'submitted')"
            " GROUP BY a.item_id, b.overlap HAVING count(*) > b.overlap) over",
            [batch],
        )
        overfilled = cursor.fetchone()[0]
        cursor.execute(
            "SELECT a.status, count(*) FROM annotation_assignment a JOIN auth_user u ON u.id = a.labeler_id"
            " WHERE u.username LIKE %s GROUP BY 1",
            ["load-labeler%"],
        )
        statuses = dict(cursor.fetchall())
    wrong = []
    for row in told:
        found = stored.get(row["task"])
        expected = (row["user"], "submitted", row["key"], row["comment"], "yes", "no", 0)
        if found is None or found != expected:
            wrong.append({"told": row, "stored": found})
    checks = {
        "judgements_told_stored": len(told),
        "told_twice": sum(1 for n in by_task.values() if n > 1),
        "missing_or_different": len(wrong),
        "examples": wrong[:5],
        "leases_overlapping_on_an_item": overlapping,
        "items_over_their_overlap": overfilled,
        "load_labelers_assignments_by_status": statuses,
    }
    checks["ok"] = not (checks["told_twice"] or wrong or overlapping or overfilled) and bool(told)
    return checks


def errors_of(step: dict) -> int:
    """A step's failed requests and rounds of a user that raised (a submit not stored, a missing task),
    over the whole step: either makes it a failure."""
    return sum(step["failures_whole_run"].values()) + sum(step.get("user_errors", {}).values())


def recommend(steps: list[dict]) -> dict:
    """The baseline shape (the first), unless another had no errors and a p95 lower by over NOISE."""
    baseline, best = steps[0], min(steps, key=lambda s: s["aggregated"]["p95_ms"])
    clean = not errors_of(best)
    better = best["aggregated"]["p95_ms"] < (1 - NOISE) * baseline["aggregated"]["p95_ms"]
    return best if clean and better else baseline


def verdict(step: dict) -> bool:
    """Under the target: no failed request nor user round (whole step) and p95 of all requests under
    TARGET_P95_MS."""
    return not errors_of(step) and step["aggregated"]["p95_ms"] < TARGET_P95_MS


def shape(step: dict) -> str:
    """``4x1 100+20``: gunicorn workers x threads, labelers + demonstrators."""
    return f"{step['workers']}x{step['threads']} {step['labelers']}+{step['demonstrators']}"


def markdown(results: dict) -> str:
    lines = [
        "| step | gunicorn, people | req/s | p50 | p95 | p99 | errors | DB conn. open / active, max (mean) |"
    ]
    lines.append("|---|---|---|---|---|---|---|---|")
    for step in results["steps"]:
        agg, db = step["aggregated"], step["database"]
        errors = errors_of(step)
        ms = " | ".join(f"{agg[k]:.0f}" for k in ("p50_ms", "p95_ms", "p99_ms"))
        conn = (
            f"{db.get('open_max')} ({db.get('open_mean')}) / {db.get('active_max')} ({db.get('active_mean')})"
        )
        lines.append(
            f"| {step['phase']} | {shape(step)} | {agg['requests_per_s']} | {ms} | {errors} | {conn} |"
        )
    target = results["target_step"]
    lines += ["", f"Per request at {shape(target)}:", ""]
    lines += [
        "| request | n | failures | p50 ms | p95 ms | p99 ms | req/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in target["endpoints"]:
        ms = " | ".join(f"{e[k]:.0f}" for k in ("p50_ms", "p95_ms", "p99_ms"))
        lines.append(f"| {e['name']} | {e['requests']} | {e['failures']} | {ms} | {e['requests_per_s']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "load.json")
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/webgpt_bench_load")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/11")
    parser.add_argument(
        "--configs", nargs="+", default=["4x1", "2x4", "4x2"], help="gunicorn WORKERSxTHREADS"
    )
    parser.add_argument("--labelers", type=int, default=100)
    parser.add_argument("--demonstrators", type=int, default=20)
    parser.add_argument(
        "--steps", type=int, nargs="*", default=[50, 150, 200, 300, 400], help="labelers per knee step"
    )
    parser.add_argument("--duration", type=int, default=100, help="measured seconds per step")
    parser.add_argument("--warmup", type=int, default=20, help="seconds after the last user started")
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--questions", type=int, default=2_000, help="in the browsing batch")
    parser.add_argument("--task-s", type=float, default=PACE["task_s"], help="a labeler's time per task")
    parser.add_argument("--draft-s", type=float, default=PACE["draft_s"], help="between a labeler's drafts")
    parser.add_argument("--think-s", type=float, default=PACE["think_s"], help="between browsing actions")
    parser.add_argument("--training-threads", type=int, default=1)
    parser.add_argument(
        "--training-nice",
        type=int,
        default=10,
        help="the training worker's niceness, as docs/deployment.md runs it (0: the web's own priority)",
    )
    parser.add_argument(
        "--no-jobs", action="store_true", help="no Celery workers, export or training run (the web box alone)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.pace = PACE | {"task_s": args.task_s, "draft_s": args.draft_s, "think_s": args.think_s}
    configs = [tuple(int(n) for n in config.split("x")) for config in args.configs]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops gunicorn and workers
    began = time.perf_counter()
    folder = args.out.parent / args.out.stem  # load.json: var/bench/load/
    prod, built = setup(args, folder)
    runs = folder / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)  # noqa: S311 (benchmark data)
    built["queries"] = title_word_queries(read_freshwiki(FRESHWIKI), 200, rng)
    steps: list[dict] = []
    jobs = Jobs()
    no_workers: contextlib.AbstractContextManager = contextlib.nullcontext({})
    with no_workers if args.no_jobs else celery_workers(prod, folder, args.training_nice) as workers:
        roots = {f"{queue} worker": worker.pid for queue, worker in workers.items()}
        if not args.no_jobs:
            jobs.start()
        deadline = time.monotonic() + 600
        while not args.no_jobs and ((state := jobs.training_state())[0] != "running" or state[1] < 1):
            if time.monotonic() > deadline or jobs.error or not jobs.is_alive():  # a step done: model loaded
                raise SystemExit(f"the training run did not start: {state} {jobs.error!r}")
            time.sleep(1)
        training_ready_s = time.perf_counter() - began
        print(f"setup done in {training_ready_s:.0f} s (training runs {jobs.runs})", flush=True)
        try:
            for workers_n, threads_n in configs:
                step = {"phase": "gunicorn", "workers": workers_n, "threads": threads_n}
                step |= {"labelers": args.labelers, "demonstrators": args.demonstrators}
                steps.append(run_step(args, prod, built, roots, jobs, step, runs))
                print(markdown_row(steps[-1]), flush=True)
            chosen = recommend(steps)
            for labelers in sorted(args.steps):
                demonstrators = labelers // LABELERS_PER_DEMONSTRATOR
                step = {"phase": "knee", "workers": chosen["workers"], "threads": chosen["threads"]}
                steps.append(
                    run_step(
                        args,
                        prod,
                        built,
                        roots,
                        jobs,
                        step | {"labelers": labelers, "demonstrators": demonstrators},
                        runs,
                    )
                )
                print(markdown_row(steps[-1]), flush=True)
                if not verdict(steps[-1]):
                    break
        finally:
            jobs.halt.set()
            if jobs.is_alive():
                jobs.join(timeout=60)
    checks = check_database(runs / "told-stored.jsonl", built["batch"])
    if jobs.error:
        raise jobs.error
    baseline = steps[0]
    for step in steps:
        step["p95_vs_baseline"] = round(step["aggregated"]["p95_ms"] / baseline["aggregated"]["p95_ms"], 2)
        step["under_target"] = verdict(step)
    chosen_steps = [
        s for s in steps if (s["workers"], s["threads"]) == (chosen["workers"], chosen["threads"])
    ]
    passing = [s for s in chosen_steps if s["under_target"]]
    knee = max(passing, key=lambda s: s["labelers"], default=None)
    last = max(chosen_steps, key=lambda s: s["labelers"])
    results = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "os": platform.platform()},
        "settings": "DEBUG=0, BEHIND_TLS_PROXY=1 (X-Forwarded-Proto: https), PostgreSQL, Redis broker",
        "pace": args.pace | {"spawn_rate": SPAWN_RATE, "warmup_s": args.warmup, "duration_s": args.duration},
        "pool": built["pool"],
        "jobs_running": not args.no_jobs,
        "training": {
            "settings": TRAINING_SETTINGS,
            "preset": "fast",
            "threads": args.training_threads,
            "nice": args.training_nice,
            "runs": jobs.runs,
        },
        "exports": {
            "finished": len(jobs.exports),
            "failed": sum(1 for e in jobs.exports if e["status"] != "done"),
        },
        "baseline": shape(baseline),
        "steps": steps,
        "target_step": chosen,
        "recommended_gunicorn": f"--workers {chosen['workers']} --threads {chosen['threads']}",
        "knee": {
            "people": knee["labelers"] + knee["demonstrators"] if knee else 0,
            "labelers": knee["labelers"] if knee else 0,
            "demonstrators": knee["demonstrators"] if knee else 0,
            "beyond_last_step": bool(knee) and knee is last,  # the last step was still under the target
            "rule": f"largest step with no failed request and p95 < {TARGET_P95_MS:.0f} ms",
        },
        "checks": checks,
        "setup_s": round(training_ready_s, 1),
        "total_wall_s": round(time.perf_counter() - began, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    knee_text = f"{results['knee']['people']} people" + (
        " (the last step: more not tried)" if results["knee"]["beyond_last_step"] else ""
    )
    print(f"\nrecommended gunicorn: {results['recommended_gunicorn']}; knee: {knee_text}")
    print(f"checks: {json.dumps({k: v for k, v in checks.items() if k != 'examples'})}")
    print(f"total {results['total_wall_s']} s; JSON in {args.out}")
    raised = {step["phase"]: step["user_error_examples"] for step in steps if step.get("user_errors")}
    if raised:  # a user that raised may have checked nothing: never a quiet success
        print(f"USERS RAISED (each a round of work not done as a person does it): {json.dumps(raised)}")
    if not checks["ok"]:
        print(
            "CHECK FAILED: a judgement told stored is missing, different or doubled, or an item leased twice"
            f" (or none was told stored: {checks['judgements_told_stored']} checked)"
        )
    if raised or not checks["ok"]:
        sys.exit(1)


def markdown_row(step: dict) -> str:
    agg, db = step["aggregated"], step["database"]
    errors = errors_of(step)
    ms = " / ".join(f"{agg[k]:.0f}" for k in ("p50_ms", "p95_ms", "p99_ms"))
    return (
        f"{step['phase']} {shape(step)}: {agg['requests_per_s']} req/s, p50/95/99 {ms} ms, errors {errors}, "
        f"db {db.get('open_max')} open max, cpu cores {db.get('cpu_cores')}"
    )


if __name__ == "__main__":
    main()
