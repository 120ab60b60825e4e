"""Locust users for ``bench/bench_load.py``: labelers and demonstrators at a human pace, through the pages.

Not run on its own: ``bench_load.py`` starts ``locust -f bench/load_users.py --headless ...`` once per step
with ``LOAD_CONFIG`` naming a JSON file (written by it) that holds the people (user name and a session
already signed in: people sign in once a day, not once a task), how many of each kind to run, the pace, the
warm-up after which the statistics are reset, and the files to write.

* **Labelers** use the task pages, as real labelers do in the browser (the API is for scripts): a session
  cookie and Django's CSRF token, the same requests the page and its htmx form send. Each one repeats:
  ``POST /tasks/start/`` ("next task", 302) -> ``GET /tasks/<id>/`` (the page: submit key and version) ->
  for about ``task_s`` seconds (0.5x-1.5x), a draft every ~``draft_s`` seconds (the form's
  ``hx-post``, with the fields filled in so far) and the lease heartbeat every ``heartbeat_s`` seconds
  (tasks.js) -> ``POST /tasks/<id>/submit/``: "Submit and next" (302 to the next task's page, whose GET
  starts the next round) or, one submit in five, "Submit and back to the list" (302 to ``/tasks/``, then
  ``GET /tasks/`` and "next task" again). A submit is stored when it leads anywhere but back to its own
  page (which shows why it was refused); every one the server stored is appended to the record file (task,
  user, key, response) for the database checks afterwards.
* **Demonstrators** run ``bench_http.Demonstrator``'s round (Search, click, scroll x2, Find, Quote, Back,
  Top, each an htmx POST whose panel gives the next key and version) with ~``think_s`` seconds between
  actions (0.5x-1.5x), the episode heartbeat every ``heartbeat_s`` seconds (demonstrations.js), and a new
  episode when one runs out of actions.

Each request opens its own connection (``Connection: close``), as nginx's default proxying to gunicorn
does: no client races gunicorn's keep-alive timeout. Every request goes to locust's statistics under its
route (ids as ``[id]``; each browsing action by name), and fails there on a 4xx/5xx or a lost connection.
Locust's statistics are reset ``warmup_s`` seconds after the last user started; failures are also counted
over the whole run (``summary`` file), and so is every round of a user that raised (``user_errors``, with
examples), a failed request or not: ``bench_load.py`` fails on any.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import gevent
from locust import FastHttpUser, constant, events, task
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # locust imports this file by path
    sys.path.insert(0, str(ROOT))

from bench.bench_http import _VERSION, Client, Demonstrator  # noqa: E402
from bench.bench_tasks import _SUBMIT_KEY, _TASK, RESPONSE  # noqa: E402

CONFIG: dict[str, Any] = (
    json.loads(Path(os.environ["LOAD_CONFIG"]).read_text()) if "LOAD_CONFIG" in os.environ else {}
)
_ID = re.compile(r"/\d+/")
_PAGE_VIEW = re.compile(r'data-page-view="([^"]+)"')  # what the page's heartbeat sends (workforce.activity)
_FAILED: dict[str, int] = {}  # failures by request name over the whole run (warm-up included)
_STATE: dict[str, Any] = {"requests": 0, "measure_start": None, "stored": 0}
_USER_ERRORS: dict[str, list[str]] = {}  # a user's round that raised, by kind of user: the messages
_NEXT = {"labelers": itertools.count(), "demonstrators": itertools.count()}


class Transport:
    """``bench_http.Client.request``'s contract, (status, headers, text, ms) or RuntimeError on an error
    status, over locust's client, so bench_http's Demonstrator runs unchanged and every request is counted
    by locust."""

    session: FastHttpSession
    cookies: dict[str, str]
    origin: str
    action = ""  # the browsing action being sent (a name in the statistics)
    heartbeat_s = 15.0
    next_beat = 0.0
    requests = 0

    def attach(self, session: FastHttpSession, host: str, session_key: str, heartbeat_s: float) -> None:
        self.session, self.heartbeat_s = session, heartbeat_s
        session.client.cookiejar = None  # cookies as bench_http keeps them: Secure ones over plain HTTP too
        self.cookies = {"sessionid": session_key}
        self.origin = f"https://{urlsplit(host).netloc}"  # Django checks Origin on HTTPS requests

    def csrf_token(self) -> str:
        return self.cookies.get("csrftoken", "")

    def request(self, method: str, path: str, form: dict | None = None, htmx: bool = False) -> tuple:
        headers = {
            "X-Forwarded-Proto": "https",
            "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
            "Connection": "close",  # one connection per request, as nginx's default proxying to gunicorn
        }
        if method == "POST":  # as htmx and the pages' fetch() send it: the token from hx-headers
            headers |= {"Origin": self.origin, "X-CSRFToken": self.csrf_token()}
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if htmx:
            headers["HX-Request"] = "true"
        name = f"{method} {_ID.sub('/[id]/', path)}" + (f" ({self.action})" if self.action else "")
        body = urlencode(form or {}) or None
        with self.session.request(
            method, path, name=name, data=body, headers=headers, allow_redirects=False, catch_response=True
        ) as response:
            status, text = response.status_code, response.text or ""
            if not status or status >= 400:
                response.failure(f"{status}: {getattr(response, 'error', None)!r} {text[:200]}")
            else:
                response.success()
        self.requests += 1
        for header in (response.headers.get_all("Set-Cookie") if response.headers else None) or []:
            cookie, _, value = header.split(";", 1)[0].partition("=")
            self.cookies[cookie.strip()] = value.strip()
        if not status or status >= 400:
            raise RuntimeError(
                f"{method} {path} -> {status}: {getattr(response, 'error', None)!r} {text[:300]}"
            )
        return status, response.headers, text, response.request_meta["response_time"]

    def beat_if_due(self, url: str, page: str) -> None:
        """The page's heartbeat (a fetch() every heartbeat_s while it is in use, with the page view ``page``
        was served with): 204."""
        if time.monotonic() >= self.next_beat:
            self.next_beat = time.monotonic() + self.heartbeat_s
            action, self.action = self.action, ""
            try:
                self.request("POST", url, {"page_view": _PAGE_VIEW.search(page).group(1)})
            finally:
                self.action = action


class LoadLabeler(Transport, Client):
    """One labeler on the task pages."""

    def __init__(self, port: int, username: str, seed: int) -> None:
        super().__init__(port, username)
        self.rng = random.Random(seed)  # noqa: S311 (pauses and words, not secrets)
        self.next_task = ""  # the task page "Submit and next" led to

    def pause(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))  # gevent's sleep: locust patches time

    def one_task(self, task_s: float, draft_s: float) -> None:
        """One task: the one "Submit and next" led to, else "next task" from the list; then a submit that
        goes on to the next task or, now and then (``BACK_TO_LIST``), back to the list, as a person picks."""
        task_path, self.next_task = self.next_task, ""
        if not task_path:
            status, headers, _, _ = self.request("POST", "/tasks/start/")
            task_path = urlsplit(headers.get("Location") or "").path
            if status != 302 or not _TASK.match(task_path):
                raise RuntimeError(f"{self.username}: no task ({status} {headers.get('Location')})")
        _, _, page, _ = self.request("GET", task_path)
        key, version = _SUBMIT_KEY.search(page).group(1), _VERSION.search(page).group(1)
        form = {"csrfmiddlewaretoken": self.csrf_token(), "submit_key": key, "version": version}
        comment = f"load {self.username} {uuid.uuid4().hex[:12]}:"
        end = time.monotonic() + self.rng.uniform(0.5, 1.5) * task_s
        self.next_beat = time.monotonic() + self.heartbeat_s
        fields = list(RESPONSE.items())
        filled = 0
        while True:  # the person reads and fills the form; htmx saves the draft on each change
            wait = self.rng.uniform(0.5, 1.5) * draft_s
            if time.monotonic() + wait >= end:
                self.pause(end - time.monotonic())
                break
            self.pause(wait)
            self.beat_if_due(f"{task_path}heartbeat/", page)
            filled += 1
            if filled > len(fields):
                comment += f" {self.rng.choice(('clear', 'sourced', 'vague', 'accurate', 'short'))}"
            draft = {**form, **dict(fields[:filled]), "comment": comment if filled > len(fields) else ""}
            _, _, text, _ = self.request("POST", f"{task_path}draft/", draft, htmx=True)
            if not text.startswith("Draft saved"):
                raise RuntimeError(f"{self.username}: draft of {task_path} not saved: {text[:200]}")
        self.beat_if_due(f"{task_path}heartbeat/", page)
        to_list = self.rng.random() < BACK_TO_LIST
        then = {"then": "list"} if to_list else {}
        status, headers, _, _ = self.request(
            "POST", f"{task_path}submit/", {**form, **RESPONSE, "comment": comment, **then}
        )
        stored_to = stored_redirect(task_path, status, headers.get("Location") or "")
        if stored_to is None:
            raise RuntimeError(
                f"{self.username}: submit of {task_path} not accepted ({status} {headers.get('Location')})"
            )
        record(
            {
                "task": int(_TASK.match(task_path).group(1)),
                "user": self.username,
                "key": key,
                "comment": comment,
            }
        )
        if stored_to == "/tasks/":
            self.request("GET", "/tasks/")  # the redirect, followed as the browser does
        else:
            self.next_task = stored_to  # the next task's page is the next round's first request


BACK_TO_LIST = 0.2  # the share of submits made with "Submit and back to the list"


def stored_redirect(task_path: str, status: int, location: str) -> str | None:
    """Where a submit that the server stored leads: the list ("Submit and back to the list", or nothing
    left), or another task ("Submit and next"). None when it was not stored: a refused submit leads back
    to the same task's page, which shows why."""
    path = urlsplit(location).path
    if status != 302 or path == task_path:
        return None
    return path if path == "/tasks/" or _TASK.match(path) else None


class LoadDemonstrator(Transport, Demonstrator):
    """One demonstrator browsing the FreshWiki corpus: bench_http's round, with heartbeats."""

    def act(self, kind: str, text: str, label: str, timed: bool = True) -> int:
        self.action = label
        try:
            return super().act(kind, text, label, timed)
        finally:
            self.action = ""

    def request(self, method: str, path: str, form: dict | None = None, htmx: bool = False) -> tuple:
        if self.action and self.episode:  # about to act: the heartbeat of the time spent reading
            self.beat_if_due(f"{self.episode}heartbeat/", self.page)
        return super().request(method, path, form, htmx)


def user_error(kind: str, exc: BaseException) -> None:
    """A user's round raised: not always a failed request (a submit not stored answers 302), so counted
    here too; the summary reports them and bench_load.py fails the run on any."""
    _USER_ERRORS.setdefault(kind, []).append(f"{type(exc).__name__}: {exc}"[:300])


def record(row: dict) -> None:
    """A judgement the server said it stored: one JSON line, written at once (a killed run keeps it)."""
    _STATE["stored"] += 1
    with open(CONFIG["record"], "a") as out:
        out.write(json.dumps(row) + "\n")


def person(kind: str) -> tuple[int, str, str]:
    """The next (index, user name, session key) of ``kind`` for a user that starts."""
    index = next(_NEXT[kind])
    username, session_key = CONFIG[kind][index]
    return index, username, session_key


class LabelerUser(FastHttpUser):
    fixed_count = int(CONFIG.get("n_labelers", 0))
    wait_time = constant(0)  # the pace is inside the task (a person's pauses)

    def on_start(self) -> None:
        index, username, session_key = person("labelers")
        port = urlsplit(self.host).port or 80
        self.person = LoadLabeler(port, username, CONFIG["seed"] * 100_003 + index)
        self.person.attach(self.client, self.host, session_key, CONFIG["heartbeat_s"])
        self.person.pause(self.person.rng.uniform(0, CONFIG["start_spread_s"]))  # people do not start at once
        self.person.request("GET", "/tasks/")  # the landing page: the CSRF cookie

    @task
    def work(self) -> None:
        try:
            self.person.one_task(CONFIG["task_s"], CONFIG["draft_s"])
        except Exception as exc:
            user_error("labeler", exc)
            self.person.next_task = ""  # from the list again
            self.person.pause(CONFIG["draft_s"])  # start the next task after a pause
            raise


class DemonstratorUser(FastHttpUser):
    fixed_count = int(CONFIG.get("n_demonstrators", 0))
    wait_time = constant(0)

    def on_start(self) -> None:
        index, username, session_key = person("demonstrators")
        port = urlsplit(self.host).port or 80
        self.person = LoadDemonstrator(port, username, CONFIG["seed"] * 100_003 + index, CONFIG["queries"])
        self.person.attach(self.client, self.host, session_key, CONFIG["heartbeat_s"])
        self.person.think_s = CONFIG["think_s"]
        time.sleep(self.person.rng.uniform(0, CONFIG["start_spread_s"]))
        self.person.request("GET", "/demonstrations/")  # the landing page: the CSRF cookie

    @task
    def browse(self) -> None:
        try:
            if not self.person.episode:
                self.person.start_episode()  # the open one if there is one (a previous step's)
            self.person.one_round(timed=False)
        except Exception as exc:
            user_error("demonstrator", exc)
            self.person.episode = ""  # start again from "start" after a pause
            time.sleep(CONFIG["think_s"])
            raise


@events.request.add_listener
def _count(name: str, exception: BaseException | None = None, **_: Any) -> None:
    _STATE["requests"] += 1
    if exception is not None:
        _FAILED[name] = _FAILED.get(name, 0) + 1


@events.spawning_complete.add_listener
def _reset_after_warmup(user_count: int, **_: Any) -> None:
    environment: Environment | None = _STATE.get("environment")
    if environment is None or _STATE["measure_start"] is not None:
        return

    def reset() -> None:
        environment.stats.reset_all()
        _STATE["measure_start"] = time.time()

    _STATE["measure_start"] = 0.0  # scheduled
    gevent.spawn_later(CONFIG["warmup_s"], reset)


@events.init.add_listener
def _keep_environment(environment: Environment, **_: Any) -> None:
    _STATE["environment"] = environment


@events.quitting.add_listener
def _write_summary(**_: Any) -> None:
    summary = {
        "requests_whole_run": _STATE["requests"],
        "failures_whole_run": dict(sorted(_FAILED.items())),
        "measure_start": _STATE["measure_start"],
        "measure_end": time.time(),
        "judgements_told_stored": _STATE["stored"],
        "user_errors": {kind: len(messages) for kind, messages in sorted(_USER_ERRORS.items())},
        "user_error_examples": {kind: messages[:5] for kind, messages in sorted(_USER_ERRORS.items())},
    }
    Path(CONFIG["summary"]).write_text(json.dumps(summary, indent=2) + "\n")
