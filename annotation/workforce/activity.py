"""What counts as a person's active time: heartbeats from a page the site served to that person, sent while
the page is visible and in use (the page's script stops beating after a minute without input, or when hidden).

Each page is served with a signed *page view* naming the person, the task or episode and when it was served;
its heartbeats carry it back. A heartbeat without a page view of its own (a script posting to the URL, a page
served to someone else or for another task, a view more than a day old) counts nothing. One that does count
extends the person's latest ``ActiveSpan`` of that kind when that ended at most the idle limit ago, so two
tabs, or a task page and a browsing page, never add the same minute twice (time sheets join the kinds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.core import signing
from django.db import transaction
from django.utils import timezone

from annotation.feedback.assignment import IDLE_LIMIT
from annotation.models import ActiveKind, ActiveSpan
from core.permissions import AnyUser

SALT = "annotation.activity.page_view"
MAX_AGE = timedelta(days=1)  # a page open longer counts again once reloaded
NO_PAGE_VIEW = "This page is out of date or was not served to you: reload it to go on counting your time."


def page_view(user: AnyUser, kind: ActiveKind, pk: int) -> str:
    """The page view for a page about task or episode ``pk`` served to ``user`` now."""
    return signing.dumps([user.pk, kind.value, pk, timezone.now().timestamp()], salt=SALT)


def served_at(token: object, user: AnyUser, kind: ActiveKind, pk: int) -> datetime | None:
    """When the page that sent ``token`` was served, if it was served to ``user`` for that task or episode
    within a day; otherwise None."""
    if not isinstance(token, str) or len(token) > 200:
        return None
    try:
        view = signing.loads(token, salt=SALT, max_age=MAX_AGE)
    except signing.BadSignature:  # also an expired one
        return None
    if not isinstance(view, list) or view[:3] != [user.pk, kind.value, pk]:
        return None
    return datetime.fromtimestamp(view[3], tz=UTC)


def record(user: AnyUser, kind: ActiveKind, served: datetime, now: datetime | None = None) -> None:
    """A heartbeat at ``now`` from a page of ``kind`` served at ``served``: it extends the person's latest
    span of that kind, or starts one (from the page's serving when that was at most the idle limit ago, as
    the time from opening a page to its first heartbeat counts on the task itself)."""
    now = now or timezone.now()
    with transaction.atomic():
        # Locks the span two tabs would both extend. With none yet, two first heartbeats at once may each
        # start one: they overlap, and time sheets join overlaps, so nothing counts twice either way.
        latest = (
            ActiveSpan.objects.select_for_update()
            .filter(user=user, kind=kind)
            .order_by("-ended_at", "-id")
            .first()
        )
        if latest is not None and now - IDLE_LIMIT <= latest.ended_at:
            if now > latest.ended_at:  # a beat that arrived after a later one has nothing to add
                latest.ended_at = now
                latest.save(update_fields=["ended_at"])
            return
        started = served if timedelta(0) <= now - served <= IDLE_LIMIT else now
        if latest is not None:
            started = max(started, latest.ended_at)
        ActiveSpan.objects.create(user=user, kind=kind, started_at=started, ended_at=now)
