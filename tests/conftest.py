"""Shared fixtures. People in tests have names: alice researches, bob labels, dana demonstrates,
charlie has an account but no role (the outsider)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group

from tests.fake_web import FakeWeb

ROOT = Path(__file__).resolve().parent.parent
QUESTION_DATA = ROOT / "data" / "questions"
FRESHWIKI = ROOT / "data" / "corpus" / "freshwiki" / "json"


def pytest_configure(config: pytest.Config) -> None:
    """Give this test run its own broker namespace: a Redis key prefix no other run uses.

    Tests that start workers empty the broker first; with one namespace per run they empty only their
    own keys, so two runs (two people, or CI next to a developer) sharing one Redis database neither wipe
    nor consume each other's messages. Set here, before the Celery app first reads its configuration.
    """
    from webgpt_site.celery import app

    if app.configured:
        raise pytest.UsageError("the Celery app was configured before this run chose its broker namespace")
    prefix = f"{django_settings.CELERY_BROKER_KEY_PREFIX}test-run-{secrets.token_hex(6)}:"
    django_settings.CELERY_BROKER_KEY_PREFIX = prefix
    if django_settings.CELERY_BROKER_URL != "filesystem://":
        django_settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": prefix}
    # Subprocesses that inherit the environment (CLI commands, workers) join the same namespace.
    os.environ["CELERY_BROKER_KEY_PREFIX"] = prefix


def pytest_unconfigure(config: pytest.Config) -> None:
    delete_broker_keys(django_settings.CELERY_BROKER_KEY_PREFIX)


def delete_broker_keys(prefix: str) -> int:
    """Delete the Redis keys under ``prefix`` (one namespace, never the whole database); how many went."""
    if not prefix or django_settings.CELERY_BROKER_URL == "filesystem://":
        return 0
    import redis

    client = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"  # the prefix literally, then anything
    keys = list(client.scan_iter(match=pattern, count=1000))
    return client.delete(*keys) if keys else 0


@pytest.fixture
def broker_namespace() -> str:
    """This run's broker namespace, emptied first: no message left by an earlier test reaches this one's
    workers. Other runs' keys in the same Redis database are left alone."""
    delete_broker_keys(django_settings.CELERY_BROKER_KEY_PREFIX)
    return django_settings.CELERY_BROKER_KEY_PREFIX


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


@pytest.fixture
def demo_data(settings):
    """What `make run` loads: users, questions, the FreshWiki index, batches (load_demo needs DEBUG)."""
    from django.core.management import call_command

    settings.DEBUG = True
    call_command("load_demo", "--no-reward-model", verbosity=0)  # test_demo.py covers the demo RM run
    settings.DEBUG = False


@pytest.fixture(autouse=True)
def fresh_cache():
    """Every test starts with empty API throttle counters (they live in the cache), so no test is
    throttled by requests an earlier one made."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def corpus_indexes_in_tmp(settings, tmp_path, monkeypatch):
    """Every test gets its own index folder: tests never touch var/corpora, nor each other's indexes."""
    from browser import services

    settings.CORPUS_INDEX_DIR = tmp_path / "corpora"
    monkeypatch.setattr(services, "_indexes", {})


@pytest.fixture(scope="session")
def freshwiki_index_dir(tmp_path_factory):
    """The FreshWiki corpus indexed once per test session (tests only read it)."""
    from browser.corpus.readers import read_corpus
    from browser.search.local import LocalIndex

    root = tmp_path_factory.mktemp("shared-corpora")
    LocalIndex.open(root / "freshwiki").add(read_corpus(FRESHWIKI, "freshwiki"))
    return root


@pytest.fixture
def freshwiki(settings, freshwiki_index_dir):
    """The demo corpus, registered in this test's database and set as the default corpus."""
    from browser.models import Corpus

    settings.CORPUS_INDEX_DIR = freshwiki_index_dir
    settings.DEFAULT_CORPUS = "freshwiki"
    return Corpus.objects.create(name="freshwiki", document_count=100)


@pytest.fixture
def fake_web(settings):
    """A SearXNG- and Brave-compatible web on 127.0.0.1 (tests/fake_web.py), configured as this site's
    providers; the page fetcher may reach loopback (only tests do this), with no spacing between fetches."""
    with FakeWeb() as web:
        settings.SEARXNG_URL = web.searxng_url
        settings.BRAVE_API_KEY = FakeWeb.BRAVE_KEY
        settings.BRAVE_API_URL = web.brave_url
        settings.FETCH_ALLOW_LOOPBACK = True
        settings.FETCH_MIN_INTERVAL = 0
        yield web


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


@contextmanager
def running_worker(env: dict[str, str], queues: str | None = None) -> Iterator[subprocess.Popen]:
    """A real Celery worker process (solo pool) on ``queues`` (all of ``CELERY_QUEUES`` by default), stopped
    when the block ends. It listens in this run's broker namespace unless ``env`` names another."""
    queues = queues or ",".join(django_settings.CELERY_QUEUES)
    env = {"CELERY_BROKER_KEY_PREFIX": django_settings.CELERY_BROKER_KEY_PREFIX, **env}
    command = [sys.executable, "-m", "celery", "-A", "webgpt_site", "worker", "-Q", queues, "--pool", "solo",
               "--without-gossip", "--without-mingle", "--loglevel", "WARNING"]  # fmt: skip
    worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory):
    """A 2-layer random Llama with the SmolLM2 tokenizer, built once per session (tests only read it)."""
    from tests.tiny_models import tiny_llama

    return tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A 2-layer random BERT with the all-MiniLM-L6-v2 tokenizer."""
    from tests.tiny_models import tiny_bert

    return tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture
def model_store(settings, tmp_path):
    """Trained models go to a folder of the test's own."""
    settings.MODEL_STORE_DIR = tmp_path / "models"
    return settings.MODEL_STORE_DIR


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 API on 127.0.0.1 (moto's server, in a process of its own: tests/object_storage.py)."""
    from tests.object_storage import S3Server

    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3_server, settings, monkeypatch, tmp_path):
    """This test's own bucket, and the site switched to it (STORAGE_BACKEND=s3 and the S3_* variables an
    operator sets, read by the same code as at start-up); ``bucket.env`` points a worker at it."""
    from tests.object_storage import new_bucket
    from webgpt_site.storage_config import produced_file_storages

    bucket = new_bucket(s3_server.url, tmp_path / "cache")
    for name, value in bucket.env.items():
        monkeypatch.setenv(name, value)
    settings.STORAGES = settings.STORAGES | produced_file_storages()
    settings.STORAGE_BACKEND = "s3"
    settings.STORAGE_CACHE_DIR = bucket.cache
    return bucket
