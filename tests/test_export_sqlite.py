"""On the embedded database (SQLite, what `make run` uses) an export must not hold labelers up: the app's
transactions take SQLite's write lock when they begin, and an export's snapshot must not be one of them.
Runs in a fresh process on an SQLite file, as `make run` would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

SCRIPT = textwrap.dedent(
    """
    import io, json, threading, django
    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from annotation.exports.comparisons_import import import_comparisons
    from annotation.exports.service import write_rows
    from django.contrib.auth.models import Group

    call_command("migrate", verbosity=0)
    side = lambda answer, score: {"question": {"dataset": "eli5", "full_text": "Why is the sky blue?",
        "id": "q1"}, "quotes": {"title": [], "extract": []}, "answer": answer, "tokens": [], "score": score}
    pair = [side("Rayleigh scattering.", 1.0), side("It reflects the sea.", -1.0)]
    import_comparisons(json.dumps(pair).encode() + b"\\n", source="test")

    outcome = {}

    def labeler_writes():  # another request, on its own connection, while the export is reading
        try:
            Group.objects.create(name="written during the export")
            outcome["write"] = "ok"
        except Exception as exc:
            outcome["write"] = repr(exc)
        finally:
            connection.close()

    class Out(io.BytesIO):
        def write(self, data):
            if "write" not in outcome:
                worker = threading.Thread(target=labeler_writes)
                worker.start()
                worker.join()
            return super().write(data)

    out = Out()
    count = write_rows("webgpt-comparisons", {}, out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    print(json.dumps({"write": outcome["write"], "count": count, "answers": [r["answer_0"] for r in rows]}))
    """
)


def test_an_export_on_sqlite_does_not_make_labelers_wait(tmp_path):
    env = {
        **os.environ,
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path),
        "SQLITE_BUSY_TIMEOUT": "2",  # a write that had to wait for the export would fail after 2 s
        "DJANGO_SETTINGS_MODULE": "webgpt_site.settings",
    }
    env.pop("CELERY_BROKER_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = result.stdout.strip().splitlines()[-1]
    assert report.startswith("{"), result.stdout
    outcome = json.loads(report)
    assert outcome["write"] == "ok"  # was: OperationalError('database is locked')
    assert outcome["count"] == 1
    assert outcome["answers"] == ["Rayleigh scattering."]  # the rows are the export's, read in its snapshot
