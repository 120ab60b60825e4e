"""The embedded broker (``make run``, no Redis) hands out messages in the order they were sent: kombu's own
file names (unpadded milliseconds since boot) sort out of order when the counter gains a digit and after a
reboot, so a job queued first could run last."""

from __future__ import annotations

import subprocess
import sys

from kombu import Connection

from core import embedded_broker
from core.embedded_broker import Transport, message_name
from tests.conftest import ROOT


def broker_folder(tmp_path) -> dict[str, str]:
    """A fresh embedded-broker folder under ``tmp_path``: its transport options, as settings.py sets them."""
    folder = tmp_path / "celery-broker"
    (folder / "control").mkdir(parents=True)
    return {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "control_folder": str(folder / "control"),
    }


def test_names_sort_in_the_order_sent_when_the_clock_gains_a_digit():
    before, after = message_name("training", 9_999), message_name("training", 10_000)
    assert sorted([after, before]) == [before, after]
    assert len(before.split("_")[0]) == len(message_name("training").split("_")[0]) == 20


def test_messages_come_out_in_the_order_they_went_in_across_a_digit(tmp_path, monkeypatch):
    options = broker_folder(tmp_path)
    clock = iter([9_998, 9_999, 10_000, 10_001])
    monkeypatch.setattr(embedded_broker.time, "time_ns", lambda: next(clock))
    with Connection("filesystem://", transport=Transport, transport_options=options) as conn:
        queue = conn.SimpleQueue("training")
        for n in range(4):
            queue.put({"n": n})
        got = []
        for _ in range(4):
            message = queue.get(timeout=1)
            got.append(message.payload["n"])
            message.ack()
        queue.close()
    assert got == [0, 1, 2, 3]


def test_make_runs_settings_use_it_for_the_workers_and_the_probes(tmp_path):
    """The site as ``make run`` starts it (no CELERY_BROKER_URL): Celery's connection uses this transport."""
    code = (
        "import django; django.setup(); from webgpt_site.celery import app; "
        "from core.ops import broker; "
        "print(type(app.connection_for_write().transport).__module__); broker.check(); "
        "print(broker.queue_lengths())"
    )
    env = {
        "DEBUG": "1",
        "VAR_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "webgpt_site.settings",
    }
    (tmp_path / "celery-broker" / "control").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "core.embedded_broker",
        "{'default': 0, 'exports': 0, 'training': 0, 'sampling': 0}",
    ]


def test_a_connection_to_the_folder_asks_for_no_host(tmp_path, caplog):
    """A folder has no host: kombu warned "No hostname was supplied" at every worker start and probe."""
    with Connection("filesystem://", transport=Transport, transport_options=broker_folder(tmp_path)) as conn:
        assert conn.info()["hostname"] is None
        conn.SimpleQueue("default").put({"n": 1})
    assert "hostname" not in caplog.text
