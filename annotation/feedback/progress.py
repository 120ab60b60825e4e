"""What a labeler sees of their own work: tasks submitted today and in the batch, time on the task, the
kinds of task waiting for them, and the work the same-question window holds back (with when it frees)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from annotation.feedback.assignment import (
    JUDGED,
    OwnWork,
    available_items,
    eligible_items,
    own_work,
    recent_judgements,
    same_question_clash,
)
from annotation.models import Assignment, FeedbackBatch, FeedbackItem, Preset, Template
from annotation.workforce.gate import open_batch_kinds
from core.permissions import AnyUser


def start_of_today(now: datetime) -> datetime:
    """Midnight of the site's day (TIME_ZONE) that ``now`` falls in: "today" for a labeler's counts."""
    zone = timezone.get_current_timezone()
    return datetime.combine(timezone.localtime(now, zone).date(), time.min, tzinfo=zone)


def clock(seconds: float) -> str:
    """Seconds as mm:ss (minutes go past 59: a timer, not a clock face), as task_timer.js writes them."""
    whole = max(int(seconds), 0)
    return f"{whole // 60:02d}:{whole % 60:02d}"


@dataclass(frozen=True)
class TaskProgress:
    today: int  # tasks submitted since the site's midnight (a revision counts the task again only once)
    in_batch: int  # tasks of this batch the labeler submitted
    batch_total: int  # the batch's items this labeler can do (those with their own answers left out)
    seconds: int  # active time on this task, as the heartbeats counted it

    @property
    def clock(self) -> str:
        return clock(self.seconds)


def task_progress(assignment: Assignment, now: datetime | None = None) -> TaskProgress:
    """The progress line of a task page, for the task's own labeler. Two queries."""
    now = now or timezone.now()
    batch_id = assignment.item.batch_id
    done = Assignment.objects.filter(labeler_id=assignment.labeler_id, status__in=JUDGED).aggregate(
        today=Count("pk", filter=Q(submitted_at__gte=start_of_today(now))),
        in_batch=Count("pk", filter=Q(item__batch_id=batch_id)),
    )
    # The batch's items less those holding the labeler's own answers (walked from their answers, not the
    # batch: counting a 20,000-item batch took 4 ms a page).
    own = (
        FeedbackItem.answers.through.objects.filter(
            feedbackitem__batch_id=batch_id, answer__episode__user_id=assignment.labeler_id
        )
        .values("feedbackitem_id")
        .distinct()
        .count()
    )
    if assignment.item.episode_id is not None:  # a step review: the reviews of the labeler's own episodes
        own += FeedbackItem.objects.filter(batch_id=batch_id, episode__user_id=assignment.labeler_id).count()
    total = assignment.item.batch.item_count - own
    return TaskProgress(done["today"], done["in_batch"], total, int(assignment.active_seconds))


def submitted_today(labeler: AnyUser, now: datetime | None = None) -> int:
    now = now or timezone.now()
    mine = Assignment.objects.filter(labeler=labeler, status__in=JUDGED)
    return mine.filter(submitted_at__gte=start_of_today(now)).count()


# The most items a kind's count on "next task" walks: past it the page says "1000+". Counting the whole
# pool grew with it (11 ms of the landing page's 37 at 20,000 items); nobody plans a day on the exact number.
WAITING_CAP = 1000


@dataclass(frozen=True)
class WaitingKind:
    template: str
    preset: str
    count: int  # at most WAITING_CAP
    more: bool = False  # more than ``count`` wait

    @property
    def label(self) -> str:
        """ "K-way ranking", "Single-answer rating (GopherCite)"."""
        name = Template(self.template).label
        return f"{name} ({Preset(self.preset).label})" if self.preset else name


@dataclass(frozen=True)
class HeldBack:
    """Items the labeler could have but for the same-question window."""

    count: int
    # When the first of them comes back; None while each waits on a question in a task the labeler holds
    # (it comes back a window after that task is submitted).
    next_at: datetime | None

    @property
    def message(self) -> str:
        """What "next task" says instead of "nothing left"."""
        hours = settings.FEEDBACK_SAME_QUESTION_WINDOW / timedelta(hours=1)
        span = f"{hours:g} hour{'' if hours == 1 else 's'}"
        waiting = f"{self.count} task is" if self.count == 1 else f"{self.count} tasks are"
        told = (
            f"{waiting} waiting, but on questions you judged under another kind of task in the last {span}: "
            "a question is not given to you again from another angle that soon, as the first judgement "
            "would bias the second."
        )
        if self.next_at is None:
            return f"{told} They come back {span} after you submit the task you hold."
        local = timezone.localtime(self.next_at)
        day = "" if local.date() == timezone.localdate() else f"{local:%d %b} "
        return f"{told} The next one comes back at {day}{local:%H:%M}."


@dataclass(frozen=True)
class Waiting:
    """What "next task" could hand the labeler now, by kind, and what the same-question window holds back."""

    kinds: list[WaitingKind]
    held: HeldBack

    @property
    def total(self) -> int:
        return sum(kind.count for kind in self.kinds)

    @property
    def more(self) -> bool:
        """More wait than ``total`` (a kind's count stopped at WAITING_CAP)."""
        return any(kind.more for kind in self.kinds)


def waiting(labeler: AnyUser, now: datetime | None = None) -> Waiting:
    """Per template and preset, how many items "next task" could hand this labeler now (the rule of
    ``available_items``: open, active batch the gate opens, never theirs, the same-question window), up to
    WAITING_CAP each, and what only that window keeps from them (``held_back``). A query per kind of task
    the gate opens to them, each walking at most WAITING_CAP + 1 items."""
    now = now or timezone.now()
    own = own_work(labeler)
    kinds = []
    for (template, preset), batch_ids in sorted(open_batch_kinds(labeler).items()):
        count = available_items(labeler, now, batch_ids, own=own)[: WAITING_CAP + 1].count()
        if count:
            kinds.append(WaitingKind(template, preset, min(count, WAITING_CAP), more=count > WAITING_CAP))
    return Waiting(kinds, held_back(labeler, now, own=own))


def held_back(labeler: AnyUser, now: datetime | None = None, *, own: OwnWork | None = None) -> HeldBack:
    """The items only the same-question window keeps from the labeler, and when the first comes back.
    One pass over the pool, and none when nothing can be held: a labeler whose recent judgements are all
    of the one kind of task every active batch is (the usual day) can have no clash. ``own``: as for
    ``eligible_items``."""
    now = now or timezone.now()
    clash = same_question_clash(labeler, now)
    if clash is None or not _may_clash(labeler, now):
        return HeldBack(0, None)
    held = list(
        eligible_items(labeler, own=own)
        .filter(clash)
        .values_list("question_id", "batch__template", "batch__preset")
        .annotate(n=Count("pk"))
        .order_by()
    )
    if not held:
        return HeldBack(0, None)
    questions = {question for question, _, _, _ in held}
    blockers = list(
        recent_judgements(labeler, now)
        .filter(item__question_id__in=questions)
        .values_list("item__question_id", "item__batch__template", "item__batch__preset", "submitted_at")
    )
    window = settings.FEEDBACK_SAME_QUESTION_WINDOW
    frees: list[datetime] = []
    for question, template, preset, _ in held:
        # A held task (not submitted yet) keeps its question back until a window after it is submitted.
        ends = [
            at and at + window for q, t, p, at in blockers if q == question and (t, p) != (template, preset)
        ]
        if ends and None not in ends:
            frees.append(max(ends))
    return HeldBack(sum(n for _, _, _, n in held), min(frees, default=None))


def _may_clash(labeler: AnyUser, now: datetime) -> bool:
    """Whether any item could clash: the labeler judged recently under some kind of task other than one an
    active batch offers. Two small queries instead of a pass over the pool."""
    judged = set(
        recent_judgements(labeler, now)
        .values_list("item__batch__template", "item__batch__preset")
        .order_by()
        .distinct()
    )
    if len(judged) != 1:
        return bool(judged)
    offered = set(
        FeedbackBatch.objects.filter(is_active=True).values_list("template", "preset").order_by().distinct()
    )
    return bool(offered - judged)
