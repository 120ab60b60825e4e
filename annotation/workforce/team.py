"""The team: who has which role, their state per kind of work, gold accuracy, hours this week and last
activity; granting and removing roles.

Who may grant what, and on whose account, is ``workforce.authority``'s rule. Staff accounts are researchers
whatever their groups (``permissions.user_roles``), so removing the group does not take that away from them.
Each state carries the person's screening result for that kind (the candidates page's scores and
suggestion), so nobody is qualified without it in sight.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Max

from annotation.models import Assignment, Episode, Qualification
from annotation.models.workforce import DEMONSTRATION
from annotation.workforce.authority import check_may_act_on, may_grant
from annotation.workforce.gold import Accuracy, accuracy_of, gold_checks
from annotation.workforce.quality import agreement_scores, share
from annotation.workforce.screening import Candidate, candidates_for
from annotation.workforce.states import State, all_kinds, kind_label, kinds_for
from annotation.workforce.timesheets import seconds_by_user, this_week
from core.models import log_action
from core.permissions import AnyUser, Role

User = get_user_model()
WORKER_ROLES = (Role.LABELER, Role.DEMONSTRATOR)
ROLE_ORDER = (Role.LABELER, Role.DEMONSTRATOR, Role.RESEARCHER)


class RoleError(ValueError):
    """A role the person asking may not grant or remove, or one that does not exist."""


@dataclass(frozen=True)
class KindState:
    kind: str
    label: str
    state: str
    screening: Candidate | None = None  # their screening test's result, when they took one


@dataclass
class Member:
    """One person as the team page shows them."""

    user: AnyUser
    roles: list[Role]
    states: list[KindState] = field(default_factory=list)
    gold: Accuracy = field(default_factory=lambda: accuracy_of([]))
    agreement: Accuracy = field(default_factory=lambda: accuracy_of([]))
    week_seconds: float = 0.0
    last_activity: datetime | None = None

    @property
    def week_hours(self) -> float:
        return self.week_seconds / 3600

    @property
    def gold_text(self) -> str:
        return accuracy_text(self.gold)

    @property
    def agreement_text(self) -> str:
        return accuracy_text(self.agreement, "shared item")


def accuracy_text(gold: Accuracy, unit: str = "gold item") -> str:
    """ "75% of 4 gold items (95% interval 30%-95%)", or that there are none yet."""
    if gold.accuracy is None:
        return f"no {unit}s yet"
    items = unit if gold.count == 1 else f"{unit}s"
    return f"{gold.accuracy:.0%} of {gold.count} {items} (95% interval {gold.low:.0%}-{gold.high:.0%})"


def roles_of(user: AnyUser) -> list[Role]:
    """The person's roles from their groups (staff count as researchers, as everywhere), in page order."""
    names = {group.name for group in user.groups.all()}  # prefetched by the team's query
    return [role for role in ROLE_ORDER if role.value in names or (role == Role.RESEARCHER and user.is_staff)]


def kinds_of(roles: Iterable[Role], rows: dict[str, str]) -> list[str]:
    """The kinds of work shown for a person: their roles' kinds, and any other kind they have a state for
    (a role taken away leaves its states, which stay visible and can still be changed)."""
    kinds = [kind for role in roles for kind in kinds_for(role)]
    return kinds + [kind for kind in all_kinds() if kind in rows and kind not in kinds]


def last_activity(user_ids: list[int]) -> dict[int, datetime]:
    """Each person's latest sign of work: a task submitted or seen, an episode seen."""
    latest: dict[int, datetime] = {}

    def keep(user_id: int, *moments: datetime | None) -> None:
        for moment in moments:
            if moment is not None and (user_id not in latest or moment > latest[user_id]):
                latest[user_id] = moment

    tasks = (
        Assignment.objects.filter(labeler_id__in=user_ids)
        .values("labeler_id")
        .annotate(submitted=Max("submitted_at"), seen=Max("last_seen_at"))
        .order_by()
    )
    for row in tasks:
        keep(row["labeler_id"], row["submitted"], row["seen"])
    episodes = (
        Episode.objects.filter(user_id__in=user_ids)
        .values("user_id")
        .annotate(seen=Max("last_seen_at"))
        .order_by()
    )
    for row in episodes:
        keep(row["user_id"], row["seen"])
    return latest


def screening_results() -> dict[tuple[int, str], Candidate]:
    """Everyone's screening result per kind of work, by (user id, kind): the candidates page's computation,
    once per kind whatever the number of people."""
    return {(one.user_id, kind): one for kind in all_kinds() for one in candidates_for(kind)}


def _members(users: list[AnyUser]) -> list[Member]:
    ids = [user.pk for user in users]
    rows: dict[int, dict[str, str]] = {}
    for user_id, kind, state in Qualification.objects.filter(user_id__in=ids).values_list(
        "user_id", "kind", "state"
    ):
        rows.setdefault(user_id, {})[kind] = state
    hours = seconds_by_user(*this_week(), users=ids)
    latest = last_activity(ids)
    screened = screening_results()
    members = []
    for user in users:
        roles = roles_of(user)
        mine = rows.get(user.pk, {})
        member = Member(user, roles, week_seconds=hours.get(user.pk, 0.0), last_activity=latest.get(user.pk))
        member.states = [
            KindState(kind, kind_label(kind), mine.get(kind, State.APPLICANT), screened.get((user.pk, kind)))
            for kind in kinds_of(roles, mine)
        ]
        if Role.LABELER in roles or any(kind != DEMONSTRATION for kind in mine):
            member.gold = accuracy_of(gold_checks(user))
            member.agreement = share(
                score for scored in agreement_scores(user).values() for _, score in scored
            )
        members.append(member)
    return members


@dataclass
class Team:
    workers: list[Member]  # a labeler or demonstrator role (researchers who also label are here too)
    researchers: list[Member]
    without_role: list[Member]  # accounts with no role (made without one, or all taken away)


def team() -> Team:
    """Everyone with an account, in three lists, each by username."""
    users = list(User.objects.order_by("username").prefetch_related("groups"))
    members = _members(users)
    return Team(
        workers=[m for m in members if any(role in WORKER_ROLES for role in m.roles)],
        researchers=[m for m in members if Role.RESEARCHER in m.roles],
        without_role=[m for m in members if not m.roles],
    )


def member(user: AnyUser) -> Member:
    return _members([User.objects.prefetch_related("groups").get(pk=user.pk)])[0]


def gold_by_kind(user: AnyUser, kinds: Iterable[str]) -> dict[str, str]:
    """Gold accuracy per kind of feedback work in words (demonstrations have no gold items), saying how many
    gold judgements were revised after the first submission, which is the one scored."""
    texts = {}
    for kind in kinds:
        if kind == DEMONSTRATION:
            continue
        checks = gold_checks(user, kind)
        revised = sum(check.revised for check in checks)
        later = f"; {revised} revised later, scored as first submitted" if revised else ""
        texts[kind] = accuracy_text(accuracy_of(checks)) + later
    return texts


def role_named(name: str) -> Role:
    try:
        return Role(name)
    except ValueError:
        raise RoleError(f"There is no role {name[:40]!r}.") from None


def check_roles(actor: AnyUser, roles: Iterable[Role]) -> None:
    """RoleError when ``actor`` may not grant one of ``roles``."""
    for role in roles:
        if not may_grant(actor, role):
            raise RoleError(f"Only a superuser may grant or remove the {role.value} role.")


def grant_role(actor: AnyUser, user: AnyUser, role: Role) -> bool:
    """Give ``user`` the role (they start as an applicant for its kinds of work). False: they had it.
    RoleError or ``authority.NotYourCall`` when it is not ``actor``'s call."""
    check_roles(actor, [role])
    check_may_act_on(actor, user)
    with transaction.atomic():
        group, _ = Group.objects.get_or_create(name=role.value)
        if user.groups.filter(pk=group.pk).exists():
            return False
        user.groups.add(group)
        log_action(actor, "team.grant_role", user, role=role.value)
    return True


def remove_role(actor: AnyUser, user: AnyUser, role: Role) -> bool:
    """Take the role away; their states and work stay. False: they did not have it. RoleError or
    ``authority.NotYourCall`` when it is not ``actor``'s call."""
    check_roles(actor, [role])
    check_may_act_on(actor, user)
    with transaction.atomic():
        group = Group.objects.filter(name=role.value).first()
        if group is None or not user.groups.filter(pk=group.pk).exists():
            return False
        user.groups.remove(group)
        log_action(actor, "team.remove_role", user, role=role.value)
    return True
