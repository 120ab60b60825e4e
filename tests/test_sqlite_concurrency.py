"""The zero-setup SQLite database holds a small team: many labelers asking for work at the same moment
against `make run`'s server (runserver, one thread per request, on an SQLite file) get tasks or "none
left", never a 500 "database is locked", and no slot is handed out twice."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection
from pathlib import Path
from threading import Barrier

import pytest

from tests.conftest import ROOT, free_port

# A web server under 36 requests at once: with the tests that start workers and servers (XDIST_GROUPS in
# tests/conftest.py), one at a time, so its busy-timeout is not spent waiting for the other xdist worker.
pytestmark = pytest.mark.xdist_group("processes")
LABELERS = 36
ITEMS, OVERLAP = 10, 3  # 30 slots for 36 people: six must hear "none left"

SETUP = f"""
from django.contrib.auth.models import Group, User
from core.api_tokens import issue
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import Answer, SourceKind
from annotation.questions.service import import_questions
from annotation.workforce.states import qualify_for_role
from core.permissions import Role

rows = b"\\n".join(b'{{"question": "Is claim %d true?"}}' % i for i in range({ITEMS}))
questions = import_questions(rows, filename="claims.jsonl").questions.order_by("id")
groups = [[Answer.objects.create(question=q, text="Yes.", source_kind=SourceKind.MODEL)] for q in questions]
create_feedback_batch(None, BatchSettings(name="claims", template="rating", preset="truthfulqa",
                                          overlap={OVERLAP}), groups)
labelers = Group.objects.get_or_create(name="labeler")[0]
for n in range({LABELERS}):
    user = User.objects.create_user(f"labeler{{n}}")
    user.groups.add(labelers)
    qualify_for_role(user, Role.LABELER, by=None, reason="already working")
    print("token", issue(user))
"""


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def sqlite_server(tmp_path):
    """`make run`'s web server on a fresh SQLite file, with the labelers' API tokens."""
    database = tmp_path / "db.sqlite3"
    ours = ("DATABASE_URL", "CELERY_BROKER_URL")
    env = {name: value for name, value in os.environ.items() if name not in ours}
    env |= {"DEBUG": "1", "VAR_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{database}"}
    manage(env, "migrate", "--noinput", "-v", "0")
    output = manage(env, "shell", "-c", SETUP).splitlines()
    tokens = [line.split()[1] for line in output if line.startswith("token ")]
    # runserver takes no socket from us: the port is one found free a moment before, and when another
    # process took it meanwhile, runserver exits saying so and another port is tried.
    for _ in range(5):
        server, port = runserver(env, tmp_path / "runserver.log")
        if server is not None:
            break
    else:
        pytest.fail("runserver found no free port in 5 tries")
    try:
        yield port, tokens, database
    finally:
        server.terminate()
        server.wait(timeout=20)


def runserver(env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen | None, int]:
    """runserver on a free port once it answers there (start-up takes a few seconds); None if the port
    was taken."""
    port = free_port()
    with log_path.open("w") as log:  # a file, not a pipe: a full pipe would stall the server
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            request(port, "GET", "/accounts/login/")
            return server, port
        except OSError:
            if server.poll() is not None:
                if "already in use" in log_path.read_text():
                    return None, port
                pytest.fail(f"runserver exited: {log_path.read_text()}")
            if time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"runserver did not answer in a minute: {log_path.read_text()}")
            time.sleep(0.1)


def request(port: int, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    connection = HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def next_task(port: int, token: str) -> tuple[int, dict]:
    status, body = request(port, "POST", "/api/tasks/next", {"Authorization": f"Token {token}"})
    if status >= 500:
        return status, {"error": body.decode(errors="replace")[:300]}
    return status, json.loads(body) if body else {}


def test_thirty_six_labelers_asking_for_work_at_once_on_sqlite_all_get_an_answer(sqlite_server):
    port, tokens, database = sqlite_server
    assert len(tokens) == LABELERS
    start = Barrier(LABELERS)

    def ask(token: str) -> tuple[int, dict]:
        start.wait()  # everyone at the same moment
        return next_task(port, token)

    with ThreadPoolExecutor(LABELERS) as pool:
        answers = list(pool.map(ask, tokens))

    statuses = sorted(status for status, _ in answers)
    failures = [body for status, body in answers if status >= 500]
    assert failures == [], f"{len(failures)} of {LABELERS} failed: {failures[:2]}"
    assert statuses == [201] * (ITEMS * OVERLAP) + [204] * (LABELERS - ITEMS * OVERLAP)
    with sqlite3.connect(database) as db:
        per_item = db.execute(
            "SELECT i.slots_taken, COUNT(a.id) FROM annotation_feedbackitem i "
            "LEFT JOIN annotation_assignment a ON a.item_id = i.id GROUP BY i.id"
        ).fetchall()
        per_labeler = db.execute(
            "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM annotation_assignment GROUP BY labeler_id)"
        ).fetchone()[0]
    assert per_item == [(OVERLAP, OVERLAP)] * ITEMS  # every slot taken exactly once
    assert per_labeler == 1
    assert len({body["id"] for status, body in answers if status == 201}) == ITEMS * OVERLAP
