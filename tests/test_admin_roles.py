"""Roles are granted in the Django admin (docs: a role is a group): sam, the site's superuser, opens the
user and group pages and makes charlie a labeler by ticking the ``labeler`` group on charlie's change
form; charlie then has the role and the labeler's pages open for him. Nobody else gets into the admin."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from core.permissions import Role, has_role

pytestmark = pytest.mark.django_db


class FormFields(HTMLParser):
    """The fields of one form, as a browser would submit them: {name: [values]}."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id, self.inside, self.fields = form_id, False, {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attr = dict(attrs)
        if tag == "form":
            self.inside = attr.get("id") == self.form_id
        if not self.inside or (not attr.get("name") and tag != "option"):
            return
        name = attr.get("name")
        if tag == "input" and attr.get("type") not in ("submit", "button", "file"):
            if attr.get("type") in ("checkbox", "radio"):
                if "checked" in attr:
                    self.fields.setdefault(name, []).append(attr.get("value") or "on")
            else:
                self.fields.setdefault(name, []).append(attr.get("value") or "")
        elif tag == "select":
            self._select = name
            self.fields.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in attr:
            self.fields[self._select].append(attr.get("value", ""))
        elif tag == "textarea":
            self._textarea = name
            self.fields[name] = [""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea][-1] += data


def form_fields(html: str, form_id: str) -> dict[str, list[str]]:
    parser = FormFields(form_id)
    parser.feed(html)
    assert parser.fields, f"no form {form_id!r} on the page"
    return parser.fields


@pytest.fixture
def sam(django_user_model):
    return django_user_model.objects.create_superuser("sam", "sam@example.org", "sam-pw")


def test_sam_opens_the_user_and_group_pages_where_roles_are_granted(client_for, sam, bob, charlie):
    client = client_for(sam)
    users = client.get(reverse("admin:auth_user_changelist"))
    assert users.status_code == 200
    for name in ("sam", "bob", "charlie"):
        assert f">{name}</a>" in users.content.decode()
    page = client.get(reverse("admin:auth_user_change", args=[charlie.pk]))
    assert page.status_code == 200
    groups = client.get(reverse("admin:auth_group_changelist"))
    assert groups.status_code == 200
    for role in Role:
        assert f">{role.value}</a>" in groups.content.decode()
        group = Group.objects.get(name=role.value)
        change = client.get(reverse("admin:auth_group_change", args=[group.pk]))
        assert change.status_code == 200 and f'value="{role.value}"' in change.content.decode()
    # The labeler group's option is on charlie's change form, and not chosen yet.
    labeler = Group.objects.get(name=Role.LABELER)
    fields = form_fields(page.content.decode(), "user_form")
    assert fields["groups"] == []
    assert f'<option value="{labeler.pk}">labeler</option>' in page.content.decode()


def test_sam_makes_charlie_a_labeler_through_the_user_form(client_for, sam, charlie):
    labeler = Group.objects.get(name=Role.LABELER)
    assert client_for(charlie).get(reverse("annotation:next_task")).status_code == 403
    client = client_for(sam)
    url = reverse("admin:auth_user_change", args=[charlie.pk])
    fields = form_fields(client.get(url).content.decode(), "user_form")
    response = client.post(url, {**fields, "groups": [str(labeler.pk)], "_save": "Save"})
    errors = re.findall(r"errorlist[^>]*>(.*?)</ul>", response.content.decode(), re.S)
    assert response.status_code == 302, errors
    assert response.url == reverse("admin:auth_user_changelist")
    charlie.refresh_from_db()
    assert list(charlie.groups.values_list("name", flat=True)) == ["labeler"]
    assert has_role(charlie, Role.LABELER) and not has_role(charlie, Role.RESEARCHER)
    assert not charlie.is_staff  # the form kept what it did not change
    assert client_for(charlie).get(reverse("annotation:next_task")).status_code == 200


def test_only_staff_get_into_the_admin(client_for, alice, bob, charlie):
    for user in (None, charlie, bob, alice):  # a researcher is not staff either
        response = client_for(user).get(reverse("admin:auth_user_change", args=[charlie.pk]))
        assert response.status_code == 302 and response.url.startswith(reverse("admin:login")), user
