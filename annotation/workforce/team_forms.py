"""The team page's forms: a change of state, a role granted or removed, a person added, an invitation, and
the invitation's own page (a username and a password, checked by Django's password validators)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.validators import UnicodeUsernameValidator

from annotation.workforce.authority import may_grant
from annotation.workforce.invitations import DEFAULT_DAYS, MAX_DAYS, MIN_DAYS
from annotation.workforce.states import ACTION_STATES, all_kinds, kind_label
from annotation.workforce.team import WORKER_ROLES
from core.permissions import AnyUser, Role

User = get_user_model()
MAX_REASON = 2000
ROLE_CHOICES = [
    (role.value, role.value.capitalize()) for role in (Role.LABELER, Role.DEMONSTRATOR, Role.RESEARCHER)
]


def _roles_offered(actor: AnyUser) -> list[tuple[str, str]]:
    """A researcher is offered labeler and demonstrator; a superuser researcher too."""
    return [(value, label) for value, label in ROLE_CHOICES if may_grant(actor, Role(value))]


def _days() -> forms.IntegerField:
    return forms.IntegerField(
        min_value=MIN_DAYS,
        max_value=MAX_DAYS,
        initial=DEFAULT_DAYS,
        label="Link valid for (days)",
        help_text=f"{MIN_DAYS} to {MAX_DAYS} days; after that the link opens nothing.",
    )


class StateForm(forms.Form):
    """One change of one kind of work's state; the button pressed is the action."""

    kind = forms.ChoiceField(choices=[])
    action = forms.ChoiceField(choices=[(action, action) for action in ACTION_STATES])
    reason = forms.CharField(max_length=MAX_REASON, strip=True, widget=forms.Textarea(attrs={"rows": 2}))
    exclude_work = forms.BooleanField(
        required=False, label="Also leave their work of this kind submitted until now out of exports"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = [(kind, kind_label(kind)) for kind in all_kinds()]
        self.fields["reason"].error_messages["required"] = "Say why: the reason is kept in the audit trail."


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)
    action = forms.ChoiceField(choices=[("grant", "Grant"), ("remove", "Remove")])


class QualifyRoleForm(forms.Form):
    """Qualify for every kind of one role's work at once."""

    role = forms.ChoiceField(choices=[(role.value, role.value) for role in WORKER_ROLES])
    reason = forms.CharField(max_length=MAX_REASON, strip=True, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reason"].error_messages["required"] = "Say why: the reason is kept in the audit trail."


class AddPersonForm(forms.Form):
    username = forms.CharField(
        max_length=150,
        validators=[UnicodeUsernameValidator()],
        help_text="Letters, digits and @/./+/-/_ only; they sign in with it.",
    )
    email = forms.EmailField(required=False, help_text="Optional: for your records (no mail is sent).")
    roles = forms.MultipleChoiceField(choices=[], required=False, widget=forms.CheckboxSelectMultiple)
    days = _days()

    def __init__(self, actor: AnyUser, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, prefix="add", **kwargs)
        self.fields["roles"].choices = _roles_offered(actor)


class InviteForm(forms.Form):
    roles = forms.MultipleChoiceField(choices=[], widget=forms.CheckboxSelectMultiple)
    note = forms.CharField(
        max_length=200, required=False, help_text="Who it is for (you see it in the list)."
    )
    days = _days()

    def __init__(self, actor: AnyUser, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, prefix="invite", **kwargs)
        self.fields["roles"].choices = _roles_offered(actor)


class AcceptForm(forms.Form):
    """The invitation's page: a username (unless the account exists) and a password, twice."""

    username = forms.CharField(max_length=150, validators=[UnicodeUsernameValidator()])
    password1 = forms.CharField(
        label="Password",
        strip=False,
        max_length=4096,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=password_validation.password_validators_help_text_html(),
    )
    password2 = forms.CharField(
        label="Password again",
        strip=False,
        max_length=4096,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def __init__(self, account: AnyUser | None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.account = account
        if account is not None:
            del self.fields["username"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        first, second = data.get("password1"), data.get("password2")
        if first and second and first != second:
            self.add_error("password2", "The two passwords differ.")
        elif first:
            # The similarity validator compares the password with the username the person is choosing.
            someone = self.account or User(username=data.get("username", ""))
            try:
                password_validation.validate_password(first, someone)
            except forms.ValidationError as error:
                self.add_error("password1", error)
        return data
