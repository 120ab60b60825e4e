"""``manage.py create_api_token USERNAME``: print a new API token for the user, the only time it is shown; it
replaces theirs (the old one stops working at once). ``--revoke`` ends the user's token instead. Both are in
the audit log, without the token."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import api_tokens


class Command(BaseCommand):
    help = "Print a new API token for USERNAME (its old one stops working), or end it with --revoke."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--revoke", action="store_true", help="end the user's token; print no new one")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        try:
            user = User.objects.get_by_natural_key(options["username"])
        except User.DoesNotExist:
            raise CommandError(f"No user {options['username']!r}.") from None
        if options["revoke"]:
            revoked = api_tokens.revoke(user, actor=None)
            self.stderr.write("Token revoked." if revoked else "The user had no token.")
            return
        if not user.is_active:
            raise CommandError(f"{user.get_username()} is deactivated: a token would not sign them in.")
        # Only the token on standard output, so a script can read it: TOKEN=$(manage.py create_api_token NAME)
        self.stdout.write(api_tokens.issue(user, actor=None))
