"""Benchmark exports of 100,000 submitted comparisons (JSONL, rm-pairs, Parquet if offered) against a plain
PostgreSQL COPY of the same rows, and the API's task submission over HTTP.

    .venv/bin/python bench/bench_exports.py --out var/bench/exports.json

Builds a throw-away PostgreSQL database (``--db``, dropped and recreated) and a VAR_DIR next to --out
(``exports/``) with bench_http's helpers, then bulk-creates (ORM) what labeling leaves behind: questions,
two answers each (one or two quotes), one "webgpt_comparison" batch, an item per answer pair and a
submitted assignment per item (``order`` shuffled, ``response.ratings.overall`` drawn from the scale).
Each export runs in its own subprocess (clean peaks): wall time, rows/s, peak RSS growth over the
process after Django setup (at 10,000 rows also, in another run, the tracemalloc peak and a cProfile).
The JSONL export runs at 10,000 rows (before the other 90,000 are added) and at 100,000: constant memory
means equal peaks. The baseline
is ``COPY (SELECT <the assignment rows joined with both answers' texts and quotes>) TO STDOUT`` through
psycopg's copy API into a file: the physical limit. Then gunicorn (4 sync workers, production mode) and
one client: POST /api/tasks/next, then POST /api/tasks/<id>/submit (only the submit is timed).
Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import inspect
import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_http import fresh_site, serving  # noqa: E402
from bench.bench_search import summary  # noqa: E402

TARGET_ROWS_PER_S = 20_000  # JSONL webgpt-comparisons
TARGET_COPY_RATIO = 3.0  # COPY rows/s over ours, at most
SCALE = ("a_much_better", "a_better", "equal", "b_better", "b_much_better")
WORDS = ["river", "bridge", "castle", "winter", "harbour", "signal", "market", "garden", "tower", "orbit"]
COPY_SQL = """COPY (SELECT t.id, q.dataset, q.text, q.external_id, t."order", t.response,
  a0.id, a0.text, a0.quotes, a1.id, a1.text, a1.quotes
FROM annotation_assignment t JOIN annotation_feedbackitem i ON i.id = t.item_id
JOIN annotation_feedbackbatch b ON b.id = i.batch_id JOIN annotation_question q ON q.id = i.question_id
JOIN annotation_answer a0 ON a0.id = LEAST((t."order"->>0)::int, (t."order"->>1)::int)
JOIN annotation_answer a1 ON a1.id = GREATEST((t."order"->>0)::int, (t."order"->>1)::int)
WHERE t.status = 'submitted' AND b.template IN ('webgpt_comparison', 'minimal_comparison')
ORDER BY t.id) TO STDOUT"""


def start_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webgpt_site.settings")
    import django

    django.setup()


def build(first: int, count: int, batch, labeler_ids: list[int], rng: random.Random) -> None:
    """``count`` questions (numbered from ``first``), 2 answers each, an item and a submitted assignment."""
    from django.db import connection
    from django.utils import timezone

    from annotation.models import Answer, Assignment, FeedbackItem, Question

    texts = [" ".join(rng.choices(WORDS, k=80)).capitalize() + "." for _ in range(500)]
    extracts = [" ".join(rng.choices(WORDS, k=50)) for _ in range(500)]
    questions = []
    for n in range(first, first + count):
        text = f"Bench question {n}: why is the {' '.join(rng.sample(WORDS, 3))}?"
        key = hashlib.sha256(text.encode()).hexdigest()
        questions.append(Question(text=text, key=key, dataset="bench", external_id=f"b{n}", split="rm"))
    Question.objects.bulk_create(questions, batch_size=5000)
    answers = []
    for question in questions:
        for _ in range(2):
            quotes = [
                {"title": f"Page {n}", "url": f"https://en.example.org/wiki/{n}", "domain": "en.example.org"}
                | {"extract": rng.choice(extracts)}
                for n in rng.sample(range(10**6), rng.choice((1, 2)))
            ]
            text = f"{rng.choice(texts)} [{question.external_id}]"
            answers.append(Answer(question=question, text=text, quotes=quotes, source_kind="model"))
    Answer.objects.bulk_create(answers, batch_size=5000)
    items = [FeedbackItem(batch=batch, question=q, slots_taken=1, is_open=False) for q in questions]
    FeedbackItem.objects.bulk_create(items, batch_size=5000)
    through = FeedbackItem.answers.through
    links = [
        through(feedbackitem_id=item.pk, answer_id=answer.pk)
        for i, item in enumerate(items)
        for answer in answers[2 * i : 2 * i + 2]
    ]
    through.objects.bulk_create(links, batch_size=10000)
    now, tasks = timezone.now(), []
    for i, item in enumerate(items):
        order = [answers[2 * i].pk, answers[2 * i + 1].pk]
        rng.shuffle(order)
        response = {
            "ratings": {"overall": rng.choice(SCALE), "unsupported": rng.choice(SCALE)},
            "answers": {},
        }
        task = Assignment(item=item, labeler_id=labeler_ids[i % len(labeler_ids)], status="submitted")
        task.order, task.response, task.leased_until, task.submitted_at = order, response, now, now
        task.first_response, task.first_submitted_at = response, now  # bulk_create skips the model's save
        task.active_seconds = round(rng.uniform(30, 300), 1)
        tasks.append(task)
    Assignment.objects.bulk_create(tasks, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _vm_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field)) / 1024


def child(kind: str, path: Path, trace: bool, profile: bool) -> None:
    """One measurement in this (fresh) process; prints its result as JSON. Peak RSS from VmHWM, reset
    after setup (ru_maxrss would carry over the parent's peak across fork and exec)."""
    import cProfile
    import io
    import pstats
    import tracemalloc

    start_django({})
    from django.db import connection

    from annotation.exports import service

    connection.ensure_connection()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    base_mb = _vm_mb("VmRSS:")
    if trace:
        tracemalloc.start()
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    began, cpu = time.perf_counter(), time.process_time()
    with path.open("wb") as out:
        if kind == "copy":
            rows = 0
            with connection.cursor() as cursor, cursor.cursor.copy(COPY_SQL) as copy:
                for data in copy:
                    out.write(data)
                    rows += bytes(data).count(b"\n")
        elif kind.startswith("parquet:"):  # the Parquet output, where write_rows offers it
            rows = service.write_rows(kind.removeprefix("parquet:"), {}, out, file_type="parquet")
        else:
            rows = service.write_rows(kind, {}, out)
    wall = time.perf_counter() - began
    result = {
        "kind": kind,
        "rows": rows,
        "wall_s": round(wall, 2),
        "cpu_s": round(time.process_time() - cpu, 2),
    }
    result |= {"rows_per_s": round(rows / wall), "file_mb": round(path.stat().st_size / 2**20, 1)}
    result["rss_growth_mb"] = round(_vm_mb("VmHWM:") - base_mb, 1)
    if trace:
        result["tracemalloc_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    if profiler:
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
        result["profile"] = text.getvalue().splitlines()
    print(json.dumps(result))


def measure(env: dict[str, str], kind: str, path: Path, *flags: str) -> dict:
    args = [sys.executable, __file__, "--child", kind, "--file", str(path), *flags]
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode:
        return {"kind": kind, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def api_run(prod: dict[str, str], answers: list, rounds: int, warmup: int) -> dict:
    """One client: next task (untimed) then submit (timed) on a truthfulqa rating batch, over gunicorn."""
    from django.contrib.auth.models import Group, User

    from annotation.feedback.batches import BatchSettings, create_feedback_batch
    from annotation.workforce.states import qualify_for_role
    from core.api_tokens import issue
    from core.permissions import Role

    config = BatchSettings(name="bench api", template="rating", preset="truthfulqa", required_probability=0.0)
    create_feedback_batch(None, config, [[answer] for answer in answers[: rounds + warmup]])
    user = User.objects.create(username="apilabeler")
    user.groups.add(Group.objects.get(name="labeler"))
    qualify_for_role(user, Role.LABELER, by=None, reason="benchmark")  # past the gate, as a worker
    headers = {"Authorization": f"Token {issue(user)}", "X-Forwarded-Proto": "https"}
    headers["Content-Type"] = "application/json"
    times: list[float] = []
    with serving(prod, 4, 1) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def post(path: str, body: dict | None = None) -> tuple[int, dict, float]:
            began = time.perf_counter()
            conn.request("POST", path, body=json.dumps(body or {}), headers=headers)
            response = conn.getresponse()
            data = response.read()
            return response.status, json.loads(data or b"{}"), (time.perf_counter() - began) * 1000

        began = time.perf_counter()
        for n in range(warmup + rounds):
            if n == warmup:
                began = time.perf_counter()
            status, task, _ = post("/api/tasks/next")
            if status != 201:
                raise RuntimeError(f"next task: {status} {task}")
            body = {"response": {"truthful": "yes", "informative": "no"}, "key": str(uuid.uuid4())}
            status, result, ms = post(f"/api/tasks/{task['id']}/submit", body)
            if status != 200 or not result.get("complete"):
                raise RuntimeError(f"submit: {status} {result}")
            if n >= warmup:
                times.append(ms)
        wall = time.perf_counter() - began
    return {
        "submissions": len(times),
        "submit": summary(times),
        "submits_per_s_submit_only": round(len(times) / (sum(times) / 1000), 1),
        "tasks_per_s_next_plus_submit": round(len(times) / wall, 1),
    }


def markdown(results: dict) -> str:
    lines = ["| export | rows | wall s | rows/s | file MB | peak RSS growth MB | tracemalloc peak MB |"]
    lines.append("|---|---|---|---|---|---|---|")
    for name, run in results["exports"].items():
        if "error" in run:
            lines.append(f"| {name} | error: {run['error']} | | | | | |")
            continue
        cells = [run.get(k, "") for k in ("rows", "wall_s", "rows_per_s", "file_mb", "rss_growth_mb")]
        lines.append(
            f"| {name} | " + " | ".join(map(str, cells)) + f" | {run.get('tracemalloc_peak_mb', '')} |"
        )
    api = results.get("api")
    if api:
        s = api["submit"]
        lines += [
            "",
            "| API (1 client, gunicorn 4 sync) | n | p50 ms | p95 ms | submits/s (submit only) | tasks/s |",
        ]
        lines += ["|---|---|---|---|---|---|"]
        lines.append(
            f"| POST /api/tasks/<id>/submit | {api['submissions']} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} "
            f"| {api['submits_per_s_submit_only']} | {api['tasks_per_s_next_plus_submit']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "exports.json")
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/webgpt_bench_exports")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000, help="rows of the first memory measurement")
    parser.add_argument("--api-rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.file, args.trace, args.profile)
    began = time.perf_counter()
    var = args.out.parent / "exports"
    _, prod = fresh_site(args.db, var)
    start_django(prod)
    from django.contrib.auth.models import Group, User

    from annotation.exports import service
    from annotation.models import Answer, FeedbackBatch

    group = Group.objects.get(name="labeler")
    labelers = User.objects.bulk_create([User(username=f"labeler{i:02d}") for i in range(1, 11)])
    group.user_set.add(*labelers)
    batch = FeedbackBatch.objects.create(name="bench comparisons", template="webgpt_comparison")
    rng = random.Random(args.seed)  # noqa: S311 (benchmark data)
    ids = [user.pk for user in labelers]
    files, exports, setup_s = var / "files", {}, 0.0
    files.mkdir(parents=True, exist_ok=True)
    for rows, first in ((args.small, 1), (args.rows - args.small, args.small + 1)):
        start = time.perf_counter()
        build(first, rows, batch, ids, rng)
        setup_s += time.perf_counter() - start
        total = first + rows - 1
        print(f"{total:,} comparisons in the database ({time.perf_counter() - began:.0f} s)", flush=True)
        kinds = [("webgpt-comparisons", ())] if total < args.rows else []
        if total == args.rows:
            kinds = [("webgpt-comparisons", ()), ("copy", ()), ("rm-pairs", ())]
            if "file_type" in inspect.signature(service.write_rows).parameters:
                kinds.append(("parquet:webgpt-comparisons", ()))  # rm-pairs: same rows, ~1 min more
        else:  # tracemalloc slows the export ~3x: at the small size only (peak RSS is taken everywhere)
            kinds += [("webgpt-comparisons", ("--trace",)), ("webgpt-comparisons", ("--profile",))]
        for kind, flags in kinds:
            name = f"{kind} @{total:,}" + "".join(f" {f.lstrip('-')}" for f in flags)
            exports[name] = measure(prod, kind, files / f"{kind}-{total}.out", *flags)
            print(f"  {name}: {json.dumps({k: v for k, v in exports[name].items() if k != 'profile'})}")
    answers = list(Answer.objects.order_by("id")[: args.api_rounds + 5])
    results = {"rows": args.rows, "setup_s": round(setup_s, 1), "exports": exports}
    results["api"] = api_run(prod, answers, args.api_rounds, 5)
    ours = exports[f"webgpt-comparisons @{args.rows:,}"]
    copy = exports[f"copy @{args.rows:,}"]
    small, big = (exports[f"webgpt-comparisons @{n:,}"] for n in (args.small, args.rows))
    results["target"] = {
        "rows_per_s": ours.get("rows_per_s"),
        "rows_per_s_met": ours.get("rows_per_s", 0) >= TARGET_ROWS_PER_S,
        "copy_over_ours": round(copy["rows_per_s"] / ours["rows_per_s"], 1),
        "copy_ratio_met": copy["rows_per_s"] / ours["rows_per_s"] <= TARGET_COPY_RATIO,
        "rss_growth_mb_small_big": [small.get("rss_growth_mb"), big.get("rss_growth_mb")],
    }
    results["total_wall_s"] = round(time.perf_counter() - began, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    print(json.dumps(results["target"]))
    profile = exports[f"webgpt-comparisons @{args.small:,} profile"].get("profile", [])
    print("\n".join(profile[:45]))
    print(f"total {results['total_wall_s']} s (setup {results['setup_s']} s); JSON in {args.out}")


if __name__ == "__main__":
    main()
