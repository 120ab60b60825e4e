"""PostgreSQL restarted during a burst of labelers' submits and drafts, against a real web server.

A private PostgreSQL cluster (initdb in a temporary folder, its own port) serves gunicorn; eight labelers
take tasks and send drafts and submits over the API, each write with its idempotency key, and retry the
same request whenever the answer is a 503 or the connection fails. Midway the cluster is restarted
(``pg_ctl restart -m fast``: every connection is cut). Every answer during the outage is a clear 503 with
Retry-After, never a 500; afterwards every judgement a labeler was told was stored is there, exactly once,
and nothing else is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import requests

from tests.conftest import ROOT, free_port, start_gunicorn

pytestmark = pytest.mark.worker

LABELERS = 8
TASKS_EACH = 15
SETUP = """
import json
from django.contrib.auth.models import Group, User
from core.api_tokens import issue
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.questions.service import import_questions
from annotation.workforce.states import qualify_for_role
from core.permissions import Role
questions = [{"question": f"Is claim {i} true?"} for i in range(%(items)d)]
import_questions("\\n".join(json.dumps(q) for q in questions).encode(), filename="q.jsonl")
rows = [{"question": f"Is claim {i} true?", "answer": f"Answer {i}.", "quotes": []} for i in range(%(items)d)]
answers = import_answers("\\n".join(json.dumps(r) for r in rows).encode())
create_feedback_batch(None, BatchSettings("rated", "rating", "truthfulqa"), group_answers(answers, "rating"))
labelers = Group.objects.get_or_create(name="labeler")[0]
for n in range(%(labelers)d):
    user = User.objects.create_user(f"labeler{n}", password="x")
    user.groups.add(labelers)
    qualify_for_role(user, Role.LABELER, by=None, reason="already working")
    print("token", issue(user))
"""


def pg_bin(name: str) -> str:
    bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout
    return str(Path(bindir.strip()) / name)


def as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: CI runs as root, so the cluster runs as the postgres user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def private_postgres() -> Iterator[tuple[str, Path]]:
    folder = Path(tempfile.mkdtemp(prefix="webgpt-pg-"))
    data = folder / "data"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    run = lambda command: subprocess.run(as_postgres(command), check=True, capture_output=True)  # noqa: E731
    run([pg_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync"])
    # PostgreSQL takes no socket from us: it binds a port chosen free a moment before, and if another
    # process took it in between, the start fails saying so, and another free port is tried.
    for _ in range(5):
        port = free_port()
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        start = [pg_bin("pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"]
        if subprocess.run(as_postgres(start), capture_output=True).returncode == 0:
            break
        log = (folder / "log").read_text(errors="replace")
        if "could not bind" not in log and "already in use" not in log:
            raise AssertionError(f"the private PostgreSQL did not start:\n{log[-3000:]}")
    else:
        raise AssertionError("the private PostgreSQL found no free port in 5 tries")
    try:
        yield f"postgres://postgres@127.0.0.1:{port}/postgres", data
    finally:
        subprocess.run(
            as_postgres([pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]), check=False
        )
        shutil.rmtree(folder, ignore_errors=True)


class Labeler:
    """One person's client: every write is sent again, unchanged, until it gets a definite answer."""

    def __init__(self, base: str, token: str, log: list[tuple[int, str]]) -> None:
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"
        self.log = log  # (status, path) of every answer
        self.stored: list[int] = []  # tasks the server said were stored

    def send(self, method: str, path: str, body: dict | None = None) -> requests.Response:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = self.session.request(method, self.base + path, json=body, timeout=10)
            except requests.ConnectionError:
                response = None
            if response is not None:
                self.log.append((response.status_code, path))
                if response.status_code != 503:
                    return response
                assert response.headers["Retry-After"] and response.json()["retryable"] is True
            if time.monotonic() > deadline:
                raise AssertionError(f"{path}: no answer but 503s for a minute")
            time.sleep(0.2)

    def work(self, tasks: int) -> None:
        for _ in range(tasks):
            task = self.send("POST", "/api/tasks/next")
            if task.status_code == 204:
                return
            assert task.status_code in (200, 201), task.text
            task = task.json()
            self.send("POST", f"/api/tasks/{task['id']}/draft", {"draft": {"truthful": "yes"}})
            body = {"response": {"truthful": "yes", "informative": "no"}, "key": str(uuid.uuid4())}
            answer = self.send("POST", f"/api/tasks/{task['id']}/submit", body | {"version": task["version"]})
            assert answer.status_code == 200 and answer.json()["complete"], answer.text
            self.stored.append(task["id"])


def test_a_database_restart_in_a_burst_loses_and_duplicates_nothing(tmp_path):
    with private_postgres() as (database, data):
        env = {
            "DEBUG": "1",
            "DATABASE_URL": database,
            "VAR_DIR": str(tmp_path),
            "CELERY_BROKER_URL": "",
            "PATH": os.environ["PATH"],
        }
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300)
        setup = SETUP % {"items": LABELERS * TASKS_EACH, "labelers": LABELERS}
        done = subprocess.run(
            [*manage, "shell", "-c", setup], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        tokens = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("token ")]
        assert len(tokens) == LABELERS, done.stdout
        server, base = start_gunicorn("-w", "2", "--threads", "4", env=env)
        try:
            deadline = time.monotonic() + 60
            while not _up(base):
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
            log: list[tuple[int, str]] = []
            labelers = [Labeler(base, token, log) for token in tokens]
            errors: list[BaseException] = []
            threads = [threading.Thread(target=_run, args=(labeler, errors)) for labeler in labelers]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 120
            while sum(len(labeler.stored) for labeler in labelers) < LABELERS:  # the burst is under way
                # A labeler that failed, or a server that stopped answering, would keep the count down.
                assert not errors, f"a labeler failed before the restart: {errors}"
                assert time.monotonic() < deadline, (
                    f"the burst did not get under way in 2 minutes: "
                    f"{sum(len(labeler.stored) for labeler in labelers)} of {LABELERS} stored"
                )
                time.sleep(0.05)
            # The new server's output goes to the log: on a pipe it would keep this call waiting for good.
            log_file = str(data.parent / "log")
            restart = [pg_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-l", log_file, "restart"]
            subprocess.run(as_postgres(restart), check=True, stdout=subprocess.DEVNULL, timeout=60)
            for thread in threads:
                thread.join(timeout=180)
            assert not any(thread.is_alive() for thread in threads) and not errors, errors
        finally:
            server.terminate()
            server.wait(timeout=20)
        told_stored = sorted(task for labeler in labelers for task in labeler.stored)
        assert len(set(told_stored)) == len(told_stored)  # no task was handed out twice
        statuses = Counter(status for status, _ in log)
        assert statuses[500] == 0 and set(statuses) <= {200, 201, 503}, statuses
        assert statuses[503] > 0, statuses  # the restart did land in the middle of the burst
        with psycopg.connect(database.replace("postgres://", "postgresql://")) as db:
            stored = [row[0] for row in db.execute(
                "SELECT id FROM annotation_assignment WHERE status = 'submitted' ORDER BY id"
            )]  # fmt: skip
            revisions = db.execute("SELECT count(*) FROM annotation_assignmentrevision").fetchone()[0]
        assert stored == told_stored and len(stored) == LABELERS * TASKS_EACH  # all there, once each
        assert revisions == 0  # a submit applied twice would have turned the first into a revision


def _run(labeler: Labeler, errors: list[BaseException]) -> None:
    try:
        labeler.work(TASKS_EACH)
    except BaseException as exc:  # a thread's failure must fail the test, not vanish with the thread
        errors.append(exc)


def _up(base: str) -> bool:
    try:
        return requests.get(base + "/accounts/login/", timeout=10).status_code == 200
    except requests.RequestException:  # not listening yet, or still loading the app
        return False
