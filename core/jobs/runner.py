"""Running a job on a worker: what every kind does alike around its own work.

``run_job`` claims the row (queued to running, one worker only), stamps its heartbeat while ``execute``
works, and makes sure the row ends done, cancelled or failed with the reason whatever happens: a message
whose row it cannot claim is redelivered (its row is left alone, or failed if its worker died); a
``Cancelled`` ends the row cancelled with what it kept; any other exception fails the row with the reason
and what the job kept so far, discards what it half wrote, and is raised again for the worker's log unless
it is one the kind expects (bad data or settings: the reason on the row says it all).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from core.jobs.heartbeat import beating, is_orphan
from core.jobs.models import Cancelled, JobError, JobRow, JobStatus
from core.jobs.sweeper import reap

Row = TypeVar("Row", bound=JobRow)
logger = logging.getLogger(__name__)


def redelivered(row: Row) -> Row:
    """What a job does with a message whose row it could not claim: an orphan (its worker died and no
    sweep has seen it yet) is failed now; a finished row, or one another worker is running (a message sent
    again by a sweep, or redelivered by Redis), is left as it is. The row as now stored."""
    if is_orphan(row):
        reap(type(row), row.pk)
        row.refresh_from_db()
    return row


def run_job(
    model: type[Row],
    pk: int,
    execute: Callable[[Row], Row],
    *,
    related: Sequence[str] = (),
    expected: tuple[type[Exception], ...] = (),
) -> Row:
    """Run ``execute(row)`` for ``model``'s row ``pk`` as described above; the row as it ended (as the
    ``execute`` returned it when it ended the row itself). ``related``: foreign keys read with the row."""
    claimed = model.claim(pk)
    row = model.objects.select_related(*related).get(pk=pk)
    if not claimed:
        return redelivered(row)
    try:
        with beating(model, pk):
            return execute(row)
    except Cancelled as stop:
        return row.finish(JobStatus.CANCELLED, **stop.fields)
    except Exception as exc:  # the row must say why; the worker log has the traceback
        row.fail(exc, **row.kept_on_failure())
        try:
            model.discard_partial(pk)
        except Exception:  # the row already says why it failed; the sweeper's next pass cannot redo this
            logger.exception("%s %s: what it half wrote could not be discarded", model.job_name, pk)
        if isinstance(exc, (JobError, *expected)):
            return row
        raise
