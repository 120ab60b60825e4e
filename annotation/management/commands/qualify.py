"""``manage.py qualify USERNAME --kind K | --all --reason "..." [--state qualified|paused|revoked]``: set one
person's state for a kind of work (``--all``: every kind of their roles' work), with the reason, recorded in
the audit trail like a change on the team page (who: ``--by``, or "command line")."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotation.workforce.states import (
    State,
    StateError,
    all_kinds,
    kind_label,
    kinds_for,
    set_state,
    states_of,
)
from annotation.workforce.team import roles_of

STATES = (State.QUALIFIED, State.PAUSED, State.REVOKED)
VIA = {"via": "command line"}  # the audit trail's "who" when no --by is given


class Command(BaseCommand):
    help = "Qualify (or pause, or revoke) a person for a kind of work, or every kind of their roles' work."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--kind", choices=all_kinds(), help="one kind of work")
        which.add_argument("--all", action="store_true", help="every kind of work of the person's roles")
        parser.add_argument("--reason", required=True, help="why: kept in the audit trail")
        parser.add_argument(
            "--state", choices=[state.value for state in STATES], default=State.QUALIFIED.value
        )
        parser.add_argument("--by", help="the researcher making the call (default: none, 'command line')")

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model().objects
        person = users.filter(username=options["username"]).first()
        if person is None:
            raise CommandError(f"no user {options['username']!r}; nothing was changed")
        by = None
        if options["by"]:
            by = users.filter(username=options["by"]).first()
            if by is None:
                raise CommandError(f"no user {options['by']!r}; nothing was changed")
        to_state = State(options["state"])
        if options["all"]:
            kinds = [kind for role in roles_of(person) for kind in kinds_for(role)]
            if not kinds:
                raise CommandError(f"{person} has neither the labeler nor the demonstrator role")
            current = states_of(person)
            # Kinds already in that state are left alone (as "Qualify for all kinds" does on the team page).
            kinds = [kind for kind in kinds if current.get(kind, State.APPLICANT) != to_state]
        else:
            kinds = [options["kind"]]
        try:
            with transaction.atomic():  # all of them or none
                for kind in kinds:
                    set_state(person, kind, to_state, by=by, reason=options["reason"], figures=VIA)
        except StateError as error:
            raise CommandError(f"{error} Nothing was changed.") from None
        for kind in kinds:
            self.stdout.write(f"{person}: {kind_label(kind)} {to_state.value}")
        if not kinds:
            self.stdout.write(f"{person} was {to_state.value} for every kind of their work already")
