"""Shared fixtures. People in tests have names: alice researches, bob labels, dana demonstrates,
charlie has an account but no role (the outsider)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group

ROOT = Path(__file__).resolve().parent.parent
QUESTION_DATA = ROOT / "data" / "questions"


def database_url_for_tests() -> str:
    """The test database's URL, for subprocesses (workers, CLI) that must see what a test committed."""
    from django.db import connection

    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def make_user(django_user_model, username: str, *groups: str, **extra):
    user = django_user_model.objects.create_user(username=username, password=f"{username}-pw", **extra)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture(autouse=True)
def corpus_indexes_in_tmp(settings, tmp_path, monkeypatch):
    """Every test gets its own index folder: tests never touch var/corpora, nor each other's indexes."""
    from browser import services

    settings.CORPUS_INDEX_DIR = tmp_path / "corpora"
    monkeypatch.setattr(services, "_indexes", {})


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
