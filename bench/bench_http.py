"""Benchmark the HTTP round trip per browsing action of the demonstration UI, at 1 and 8 demonstrators.

    .venv/bin/python bench/bench_http.py --out var/bench/http.json

Builds a throw-away PostgreSQL database (``--db``, dropped and recreated; its name must contain "bench")
and a VAR_DIR/CORPUS_INDEX_DIR next to --out (``http/``), loads the demo data (FreshWiki corpus), adds
demonstrators ``bench01``.., collects static files and serves the app with gunicorn in production mode
(DEBUG=0, BEHIND_TLS_PROXY=1; the client sends ``X-Forwarded-Proto: https`` as a TLS proxy would).
Each simulated demonstrator (a thread, stdlib http.client) signs in, starts an episode and repeats:
Search <2-3 words of a FreshWiki title> -> Clicked on link 0 -> Scrolled down 1 (twice) -> Find in page:
<a word on the page> -> Quote: <3 words visible in the panel> -> Back -> Top, each an htmx POST timed with
perf_counter. An episode about to run out of actions is ended (End: Nonsense) and a new one started
(untimed). No pause between actions unless --think-ms (closed loop: 8 users measure saturation).
Not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import http.client
import json
import os
import platform
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from bench.bench_search import FRESHWIKI, summary, title_word_queries  # noqa: E402
from bench.serving import free_port  # noqa: E402
from browser.corpus import read_freshwiki  # noqa: E402

TARGET_P95_MS = 50.0  # p95 per browsing action at 8 concurrent demonstrators
PASSWORD = "bench-password-not-secret"  # noqa: S105 (throw-away users in a throw-away database)
ROUND = (
    "Search",
    "Clicked on link",
    "Scrolled down 1",
    "Scrolled down 1",
    "Find in page",
    "Quote",
    "Back",
    "Top",
)
_KEY = re.compile(r'name="key" value="([0-9a-f-]{36})"')
_VERSION = re.compile(r'name="version" value="(\d+)"')
_ACTIONS_LEFT = re.compile(r'id="actions-left">(\d+)<')
_LINK = re.compile(r'"kind": "click", "text": "(\d+)"')
_LINE = re.compile(r'<div class="line">(.*?)</div>', re.S)
_TAG = re.compile(r"<[^>]+>")
_WORD = re.compile(r"[^\W\d_]{5,}")
_CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class Client:
    """One signed-in person with a cookie jar and a keep-alive connection (reopened when gunicorn closes)."""

    def __init__(self, port: int, username: str) -> None:
        self.port, self.username = port, username
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.cookies: dict[str, str] = {}
        self.requests = 0

    def request(self, method: str, path: str, form: dict | None = None, htmx: bool = False) -> tuple:
        headers = {
            "X-Forwarded-Proto": "https",
            "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
        }
        if method == "POST":  # Django checks Origin on HTTPS requests; htmx sends the token as X-CSRFToken
            headers["Origin"], headers["X-CSRFToken"] = (
                f"https://127.0.0.1:{self.port}",
                self.cookies["csrftoken"],
            )
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if htmx:
            headers["HX-Request"] = "true"
        for attempt in (1, 2):  # gthread closes idle keep-alive connections: reconnect once (untimed)
            start = time.perf_counter()
            try:
                self.conn.request(method, path, body=urlencode(form or {}) or None, headers=headers)
                response = self.conn.getresponse()
                text = response.read().decode()
                break
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                self.conn.close()
                if attempt == 2:
                    raise
        elapsed_ms = (time.perf_counter() - start) * 1000
        self.requests += 1
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, value = header.split(";", 1)[0].partition("=")
            self.cookies[name.strip()] = value.strip()
        if response.status >= 400:
            raise RuntimeError(f"{self.username}: {method} {path} -> {response.status}: {text[:300]}")
        return response.status, response.headers, text, elapsed_ms

    def login(self) -> None:
        _, _, page, _ = self.request("GET", "/accounts/login/")
        token = _CSRF_INPUT.search(page).group(1)
        form = {"username": self.username, "password": PASSWORD, "csrfmiddlewaretoken": token}
        status, _, _, _ = self.request("POST", "/accounts/login/", form)
        if status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"{self.username}: login failed ({status})")


class Demonstrator(Client):
    """A demonstrator browsing: the episode, the key and version of its last panel, timings per action."""

    def __init__(self, port: int, username: str, seed: int, queries: list[str]) -> None:
        super().__init__(port, username)
        self.queries = queries
        self.rng = random.Random(seed)  # noqa: S311 (picks benchmark data, not secrets)
        self.episode, self.key, self.version, self.actions_left, self.page = "", "", "", 0, ""
        self.times: dict[str, list[float]] = {}
        self.invalid: dict[str, int] = {}
        self.think_s = 0.0

    def start_episode(self) -> None:
        status, headers, _, _ = self.request("POST", "/demonstrations/start/")
        location = headers.get("Location", "")
        if status != 302 or "/episodes/" not in location:
            raise RuntimeError(f"{self.username}: no episode started ({status} {location})")
        self.episode = urlsplit(location).path
        _, _, page, _ = self.request("GET", self.episode)
        self._read_panel(page)

    def _read_panel(self, page: str) -> None:
        self.key, self.version = _KEY.search(page).group(1), _VERSION.search(page).group(1)
        self.actions_left, self.page = int(_ACTIONS_LEFT.search(page).group(1)), page

    def act(self, kind: str, text: str, label: str, timed: bool = True) -> int:
        if self.think_s:
            time.sleep(self.rng.uniform(0.5, 1.5) * self.think_s)  # a person reading, on average think_s
        form = {"kind": kind, "text": text, "key": self.key, "version": self.version}
        status, _, page, elapsed_ms = self.request("POST", f"{self.episode}act/", form, htmx=True)
        if status == 200:
            self._read_panel(page)
            if 'class="notice error"' in page:
                self.invalid[label] = self.invalid.get(label, 0) + 1
        else:  # 204 + HX-Redirect: browsing ended (a limit was reached); the next round starts anew
            self.actions_left = 0
        if timed:
            self.times.setdefault(label, []).append(elapsed_ms)
        return status

    def visible_lines(self) -> list[str]:
        return [html.unescape(_TAG.sub("", line)) for line in _LINE.findall(self.page)]

    def one_round(self, timed: bool) -> None:
        if self.actions_left <= len(ROUND):  # end this episode before it runs out, start the next one
            self.act("command", "End: Nonsense", "End", timed=False)
            self.start_episode()
        self.act("search", self.rng.choice(self.queries), "Search", timed)
        links = _LINK.findall(self.page)
        self.act("click", links[0] if links else "0", "Clicked on link", timed)
        self.act("command", "Scrolled down 1", "Scrolled down 1", timed)
        self.act("command", "Scrolled down 1", "Scrolled down 1", timed)
        words = [w for line in self.visible_lines() for w in _WORD.findall(line)] or ["the"]
        self.act("find", self.rng.choice(words), "Find in page", timed)
        phrases = [p[:3] for line in self.visible_lines() if len(p := line.split()) >= 3 and "━" not in line]
        self.act("quote", " ".join(self.rng.choice(phrases)) if phrases else "the", "Quote", timed)
        self.act("command", "Back", "Back", timed)
        self.act("command", "Top", "Top", timed)


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(  # noqa: S603 (our own interpreter and manage.py)
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )


def fresh_site(db_url: str, var: Path) -> tuple[dict[str, str], dict[str, str]]:
    """A fresh, migrated database and an empty VAR_DIR (static files collected); the development
    environment (for management commands) and the production one (for the server)."""
    import psycopg

    name = urlsplit(db_url).path.lstrip("/")
    if "bench" not in name:
        raise SystemExit(f"--db: refusing to drop {name!r}; use a database whose name contains 'bench'")
    admin_url = db_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    shutil.rmtree(var, ignore_errors=True)
    base = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "SECRET_KEY_FILE"}}
    base |= {"DATABASE_URL": db_url, "VAR_DIR": str(var), "CORPUS_INDEX_DIR": str(var / "corpora")}
    dev = base | {"DEBUG": "1"}
    manage(dev, "migrate", "-v0")
    prod = base | {"DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "127.0.0.1"}
    prod |= {"BEHIND_TLS_PROXY": "1", "LOG_LEVEL": "WARNING"}  # production settings; TLS ends at a "proxy"
    manage(prod, "collectstatic", "--noinput", "-v0")
    return dev, prod


def add_users(env: dict[str, str], group: str, names: list[str]) -> None:
    """Users ``names`` (password PASSWORD) in the role group ``group``, qualified for its work."""
    snippet = (
        "from django.contrib.auth.models import Group, User\n"
        "from annotation.workforce.states import qualify_for_role\n"
        "from core.permissions import Role\n"
        f"group = Group.objects.get(name={group!r})\n"
        f"for name in {names!r}:\n"
        "    user = User.objects.create(username=name)\n"
        f"    user.set_password({PASSWORD!r}); user.save(); user.groups.add(group)\n"
        # Qualified for their role's work, as people already working are: the gate would hand an
        # applicant only screening tests.
        f"    qualify_for_role(user, Role({group!r}), by=None, reason='benchmark')\n"
    )
    manage(env, "shell", "-c", snippet)


def setup(db_url: str, var: Path, users: int) -> dict[str, str]:
    """A fresh database and VAR_DIR with the demo data and ``users`` bench demonstrators; the server env."""
    dev, prod = fresh_site(db_url, var)
    manage(dev, "load_demo")
    add_users(dev, "demonstrator", [f"bench{i:02d}" for i in range(1, users + 1)])
    return prod


def wait_until_up(port: int, server: subprocess.Popen) -> None:
    for _ in range(300):  # 60 s at most
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {server.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer in time")


@contextlib.contextmanager
def serving(env: dict[str, str], workers: int, threads: int) -> Iterator[int]:
    """gunicorn serving the app on a free port of 127.0.0.1 (yielded) until the block ends."""
    port = free_port()
    gunicorn = f"-m gunicorn webgpt_site.wsgi --bind 127.0.0.1:{port} --log-level warning"
    gunicorn += f" --workers {workers} --threads {threads}"  # threads > 1: the gthread worker
    server = subprocess.Popen([sys.executable, *gunicorn.split()], cwd=ROOT, env=env)  # noqa: S603
    try:
        wait_until_up(port, server)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def run_phase(people: list[Demonstrator], rounds: int, timed: bool) -> tuple[float, int, float]:
    """Every person runs ``rounds`` rounds at once; wall time, request count and the client's CPU time."""
    before = sum(p.requests for p in people)
    errors: list[BaseException] = []

    def work(person: Demonstrator) -> None:
        try:
            for _ in range(rounds):
                person.one_round(timed)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(p,)) for p in people]
    start, cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start, sum(p.requests for p in people) - before, time.process_time() - cpu


def report(people: list[Demonstrator], wall_s: float, requests: int, client_cpu_s: float) -> dict:
    labels = dict.fromkeys(ROUND)
    per = {label: [t for p in people for t in p.times.get(label, [])] for label in labels}
    everything = [t for times in per.values() for t in times]
    return {
        "users": len(people),
        "commands": {label: {"n": len(per[label]), **summary(per[label])} for label in labels},
        "overall": {"n": len(everything), **summary(everything)},
        "invalid_actions": {k: sum(p.invalid.get(k, 0) for p in people) for p in people for k in p.invalid},
        "wall_s": round(wall_s, 2),
        "requests": requests,
        "requests_per_s": round(requests / wall_s, 1),
        "client_cpu_s": round(client_cpu_s, 2),  # the client shares the machine's cores with the server
    }


def markdown(results: dict) -> str:
    rows = ["| concurrency | command | n | p50 ms | p95 ms | max ms |", "|---|---|---|---|---|---|"]
    for run in results["runs"]:
        for label, row in {**run["commands"], "**overall**": run["overall"]}.items():
            ms = " | ".join(f"{row[k]:.1f}" for k in ("p50_ms", "p95_ms", "max_ms"))
            rows.append(f"| {run['users']} | {label} | {row['n']} | {ms} |")
    lines = [f"| {r['users']} | {r['requests_per_s']} req/s over {r['wall_s']} s |" for r in results["runs"]]
    return "\n".join([*rows, "", "| concurrency | throughput |", "|---|---|", *lines])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "http.json")
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/webgpt_bench")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=25, help="timed rounds (8 actions) per person")
    parser.add_argument("--warmup-rounds", type=int, default=2)
    parser.add_argument("--think-ms", type=float, default=0, help="mean pause before each action (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops gunicorn
    began = time.perf_counter()
    users = max(args.concurrency)
    env = setup(args.db, args.out.parent / "http", users)
    setup_s = time.perf_counter() - began
    queries = title_word_queries(read_freshwiki(FRESHWIKI), 200, random.Random(args.seed))  # noqa: S311
    with serving(env, args.workers, args.threads) as port:
        people = [Demonstrator(port, f"bench{i:02d}", args.seed + i, queries) for i in range(1, users + 1)]
        for person in people:
            person.login()
            person.start_episode()
        run_phase(people, args.warmup_rounds, timed=False)  # every worker imports, opens the index...
        runs = []
        for concurrency in args.concurrency:
            group = people[:concurrency]
            for person in group:
                person.times, person.invalid, person.think_s = {}, {}, args.think_ms / 1000
            runs.append(report(group, *run_phase(group, args.rounds, timed=True)))
    last = runs[-1]["overall"]["p95_ms"]
    results = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "os": platform.platform()},
        "gunicorn": {"workers": args.workers, "threads": args.threads},
        "settings": "DEBUG=0, BEHIND_TLS_PROXY=1 (client sends X-Forwarded-Proto: https), PostgreSQL",
        **{"rounds": args.rounds, "warmup_rounds": args.warmup_rounds, "think_ms": args.think_ms},
        "runs": runs,
        "target": {"p95_ms": TARGET_P95_MS, "users": runs[-1]["users"], "met": last < TARGET_P95_MS},
        "setup_s": round(setup_s, 1),
        "total_wall_s": round(time.perf_counter() - began, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    met = "met" if results["target"]["met"] else "NOT met"
    print(f"\ntarget p95 < {TARGET_P95_MS:.0f} ms at {runs[-1]['users']} users: {met} ({last:.1f} ms)")
    print(f"total {results['total_wall_s']} s (setup {results['setup_s']} s); JSON in {args.out}")


if __name__ == "__main__":
    main()
