"""Shared fixtures. People in tests have names: alice researches, bob labels, dana demonstrates,
charlie has an account but no role (the outsider)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group

ROOT = Path(__file__).resolve().parent.parent
QUESTION_DATA = ROOT / "data" / "questions"


def make_user(django_user_model, username: str, *groups: str, **extra):
    user = django_user_model.objects.create_user(username=username, password=f"{username}-pw", **extra)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def alice(django_user_model):
    return make_user(django_user_model, "alice", "researcher")


@pytest.fixture
def bob(django_user_model):
    return make_user(django_user_model, "bob", "labeler")


@pytest.fixture
def dana(django_user_model):
    return make_user(django_user_model, "dana", "demonstrator")


@pytest.fixture
def charlie(django_user_model):
    return make_user(django_user_model, "charlie")


@pytest.fixture
def client_for(client):
    """``client_for(user)``: the test client signed in as ``user`` (or anonymous for None)."""

    def sign_in(user):
        client.logout()
        if user is not None:
            client.force_login(user)
        return client

    return sign_in
