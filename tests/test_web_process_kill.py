"""A web process killed in the middle of a submit (SIGKILL to the gunicorn worker serving it): the labeler's
client sees the connection drop, sends the very same request again (same idempotency key, same version)
to the worker gunicorn started in its place, and the judgement is stored exactly once.

The request is held inside the database (the test locks the task's row, so the submit waits in its
transaction) to kill the worker at a known point; the dead worker's transaction never commits, because a
commit needs a client that is no longer there."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import requests

from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import Assignment, AssignmentRevision, AssignmentStatus
from annotation.questions.service import import_questions
from core.api_tokens import issue
from tests.conftest import database_url_for_tests, make_user, start_gunicorn

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
WAITING_FOR_THE_ROW = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    " AND wait_event_type = 'Lock' AND query LIKE '%annotation_assignment%'"
)


def test_a_submit_whose_web_process_is_killed_is_stored_once_when_sent_again(tmp_path, django_user_model):
    import_questions(b'{"question": "Is the sky green?"}', filename="q.jsonl")
    answers = import_answers(b'{"question": "Is the sky green?", "answer": "No.", "quotes": []}')
    create_feedback_batch(
        None, BatchSettings("rated", "rating", "truthfulqa"), group_answers(answers, "rating")
    )
    bob = make_user(django_user_model, "bob", "labeler")
    env = {
        "DEBUG": "1",
        "DATABASE_URL": database_url_for_tests(),
        "VAR_DIR": str(tmp_path),
        "PATH": os.environ["PATH"],
    }
    server, base = start_gunicorn("-w", "1", env=env)
    session = requests.Session()
    session.headers["Authorization"] = f"Token {issue(bob)}"
    try:
        deadline = time.monotonic() + 60
        while True:  # the socket listens from the start: a request waits there until the worker is up
            try:
                requests.get(base + "/accounts/login/", timeout=10).raise_for_status()
                break
            except requests.RequestException:
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
        task = session.post(base + "/api/tasks/next", timeout=10).json()
        body = {"response": {"truthful": "no", "informative": "yes"}, "key": str(uuid.uuid4())}
        body["version"] = task["version"]
        first: list = []
        with psycopg.connect(database_url_for_tests()) as blocker:
            blocker.execute("SELECT id FROM annotation_assignment WHERE id = %s FOR UPDATE", [task["id"]])
            sender = threading.Thread(
                target=lambda: first.append(_post(session, f"{base}/api/tasks/{task['id']}/submit", body))
            )
            sender.start()
            # Watched from a connection of its own: within the blocker's transaction the statistics views
            # would show one snapshot for good.
            with psycopg.connect(database_url_for_tests(), autocommit=True) as watcher:
                deadline = time.monotonic() + 60
                while not watcher.execute(WAITING_FOR_THE_ROW).fetchone()[0]:
                    assert sender.is_alive(), f"the submit was answered without waiting for the row: {first}"
                    assert time.monotonic() < deadline, "the submit did not reach the locked row in a minute"
                    time.sleep(0.05)
            (worker,) = (
                (Path("/proc") / str(server.pid) / "task" / str(server.pid) / "children").read_text().split()
            )
            os.kill(int(worker), signal.SIGKILL)
            sender.join(timeout=30)
            blocker.rollback()
        assert isinstance(first[0], requests.ConnectionError)  # the client saw the connection drop
        assert Assignment.objects.get(pk=task["id"]).status == AssignmentStatus.LEASED  # nothing committed
        deadline = time.monotonic() + 60
        while True:  # the same request again, until the new worker answers
            again = _post(session, f"{base}/api/tasks/{task['id']}/submit", body)
            if not isinstance(again, requests.ConnectionError):
                break
            assert time.monotonic() < deadline, "no new worker"
            time.sleep(0.2)
        assert again.status_code == 200 and again.json()["complete"] and not again.json()["repeated"]
        twice = _post(session, f"{base}/api/tasks/{task['id']}/submit", body)  # and a third time
        assert twice.status_code == 200 and twice.json()["repeated"]
    finally:
        server.terminate()
        server.wait(timeout=20)
    stored = Assignment.objects.get(pk=task["id"])
    assert stored.status == AssignmentStatus.SUBMITTED and stored.response["truthful"] == "no"
    assert not AssignmentRevision.objects.exists()


def _post(session: requests.Session, url: str, body: dict) -> requests.Response | requests.ConnectionError:
    try:
        return session.post(url, json=body, timeout=30)
    except requests.ConnectionError as exc:
        return exc
