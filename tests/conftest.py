"""Shared fixtures. People in tests have names: alice researches, bob labels, dana demonstrates,
charlie has an account but no role (the outsider)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import zoneinfo
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group

from bench.serving import free_port  # noqa: F401 (re-exported: tests import it from here)
from tests.fake_web import FakeWeb

ROOT = Path(__file__).resolve().parent.parent
QUESTION_DATA = ROOT / "data" / "questions"
FRESHWIKI = ROOT / "data" / "corpus" / "freshwiki" / "json"


def xdist_worker(config: pytest.Config) -> str:
    """This process's pytest-xdist worker id (gw0, gw1, ...), or "main" in a run without workers."""
    return getattr(config, "workerinput", {}).get("workerid", "main")


# The hashers of this process (set by pytest_configure): tests only, never the settings module.
PASSWORD_HASHERS = [
    # Tests make ~550 users: Django's default hasher costs ~0.3 s a hash, on purpose. The subprocesses
    # (manage.py, gunicorn, workers) keep the real settings, and so the real hashers; the ones after MD5
    # are Django's defaults, so that a password a subprocess stored is still checked here.
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]


def pytest_configure(config: pytest.Config) -> None:
    """Give this test process its own broker namespace (a Redis key prefix no other run, nor the other
    xdist worker of this run, uses) and its own var/ folders, and the fast password hasher.

    Tests that start workers empty the broker first; with one namespace per process they empty only their
    own keys, so two runs (two people, or CI next to a developer) or two xdist workers sharing one Redis
    database neither wipe nor consume each other's messages. Set here, before the Celery app first reads
    its configuration. The files the app writes (exports, models, caches) go to a folder of this process:
    two xdist workers have a test database each, so the same ids (and file names) in both.
    """
    from webgpt_site.celery import app

    if app.configured:
        raise pytest.UsageError("the Celery app was configured before this run chose its broker namespace")
    worker = xdist_worker(config)
    prefix = f"{django_settings.CELERY_BROKER_KEY_PREFIX}test-run-{secrets.token_hex(6)}-{worker}:"
    django_settings.CELERY_BROKER_KEY_PREFIX = prefix
    if django_settings.CELERY_BROKER_URL != "filesystem://":
        django_settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": prefix}
    # Subprocesses that inherit the environment (CLI commands, workers) join the same namespace.
    os.environ["CELERY_BROKER_KEY_PREFIX"] = prefix

    var = Path(tempfile.mkdtemp(prefix=f"webgpt-tests-{worker}-"))
    config._webgpt_var_dir = var
    django_settings.MEDIA_ROOT = var / "media"
    django_settings.MODEL_STORE_DIR = var / "models"
    django_settings.STORAGE_CACHE_DIR = var / "cache"
    django_settings.CELERY_BROKER_FOLDER = var / "celery-broker"
    django_settings.STATIC_ROOT = var / "static"
    django_settings.PASSWORD_HASHERS = PASSWORD_HASHERS
    hypothesis_profile()
    share_the_cores(config)


def share_the_cores(config: pytest.Config) -> None:
    """With several xdist workers, each one's torch (and the workers and servers it starts, which inherit
    the environment) gets its share of the cores: two workers of two threads each on two cores spin
    against each other, and the tiny models' steps take several times as long."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    if workers < 2:
        return
    threads = max(1, (os.cpu_count() or 1) // workers)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `make worker` runs (Makefile)
    if "torch" in sys.modules:  # already started: the variable is read once, at its start
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_unconfigure(config: pytest.Config) -> None:
    delete_broker_keys(django_settings.CELERY_BROKER_KEY_PREFIX)
    if var := getattr(config, "_webgpt_var_dir", None):
        shutil.rmtree(var, ignore_errors=True)


def hypothesis_profile() -> None:
    """``HYPOTHESIS_PROFILE=ci`` (scripts/test.sh, so `make test` and CI): the same examples at every run
    (derandomize), so a failure shows on the next run too; otherwise random examples, as hypothesis's
    default. Both print the blob that replays a failing example (@reproduce_failure). No deadline: a test
    slowed by the other xdist worker is not wrong, and pytest-timeout ends one that hangs."""
    from hypothesis import settings as hypothesis_settings

    hypothesis_settings.register_profile("dev", print_blob=True, deadline=None)
    hypothesis_settings.register_profile("ci", print_blob=True, deadline=None, derandomize=True)
    hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


XDIST_GROUPS = {
    # Chromium against a live server, and real Celery workers or servers: each kind runs on one xdist
    # worker, one test at a time, so two of them never compete for the two cores (their waits have
    # deadlines sized for one at a time). The other tests are spread over both workers.
    "e2e": "e2e",
    "worker": "processes",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker, group in XDIST_GROUPS.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.xdist_group(group))
                break


def listening_socket() -> socket.socket:
    """A TCP socket on 127.0.0.1, on a port the OS chose, already listening: handed to a server process
    (gunicorn's ``-b fd://N`` with ``pass_fds``), so no other process can take the port between choosing
    it and serving on it (a probe closed before the server binds leaves that window open)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def start_gunicorn(*options: str, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """gunicorn serving the project with ``options`` (workers, threads) on a socket already listening on a
    port the OS chose (no port to race for); the process and its base URL."""
    with listening_socket() as listener:
        bind = f"fd://{listener.fileno()}"
        command = [sys.executable, "-m", "gunicorn", "webgpt_site.wsgi", "-b", bind, *options]
        server = subprocess.Popen(
            [*command, "--log-level", "warning"], cwd=ROOT, env=env, pass_fds=[listener.fileno()]
        )
        return server, f"http://127.0.0.1:{listener.getsockname()[1]}"


@contextmanager
def refused_port() -> Iterator[int]:
    """A port where nothing listens for the whole block: bound by this process but not listening, so a
    connection to it is refused, and no other process can start listening on it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


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


def make_user(django_user_model, username: str, *groups: str, applicant: bool = False, **extra):
    """A user with the given roles, qualified for every kind of their roles' work (as the upgrade qualifies
    everyone already working) unless ``applicant``: tests of the gate make applicants."""
    from annotation.workforce.states import qualify_for_role
    from core.permissions import Role

    user = django_user_model.objects.create_user(username=username, password=f"{username}-pw", **extra)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
        if name in {role.value for role in Role} and not applicant:
            qualify_for_role(user, Role(name), by=None, reason="qualified by the test setup")
    return user


@pytest.fixture
def demo_data(settings):
    """What `make run` loads: users, questions, the FreshWiki index, batches (load_demo needs DEBUG).
    ~4 s: for tests about the whole demo (its question sets, its TruthfulQA comparisons); most tests want
    ``demo_site``."""
    from django.core.management import call_command

    settings.DEBUG = True
    call_command("load_demo", "--no-reward-model", verbosity=0)  # test_demo.py covers the demo RM run
    settings.DEBUG = False


@pytest.fixture
def demo_site(settings, freshwiki, monkeypatch):
    """The demo as the people in it meet it: the demo accounts (password = user name), the FreshWiki demo
    questions and corpus, the demonstration batch and the demo feedback batches, made by load_demo itself.
    Left out: the other shipped question sets (~4,200 questions nobody here is handed: the demo batches
    are made of FreshWiki questions) and so their TruthfulQA reference comparisons. The corpus is the
    session's index (``freshwiki``), which load_demo finds indexed, instead of indexing it again."""
    from django.core.management import call_command

    from annotation.demo import DEMO_BATCH_DATASET, DEMO_QUESTION_FILES
    from webgpt_site.management.commands import load_demo

    freshwiki_only = tuple(path for path in DEMO_QUESTION_FILES if path.stem == DEMO_BATCH_DATASET)
    assert len(freshwiki_only) == 1
    monkeypatch.setattr(load_demo, "DEMO_QUESTION_FILES", freshwiki_only)
    settings.DEBUG = True
    call_command("load_demo", "--no-reward-model", verbosity=0)
    settings.DEBUG = False


def demo_production_batches():
    """The demo's batches of real work, one per template and preset (the minimal comparisons' with gold
    items among them): its screening test (annotation.workforce.demo) aside."""
    from annotation.models import FeedbackBatch
    from annotation.workforce.demo import SCREENING_NAME

    return FeedbackBatch.objects.exclude(name=SCREENING_NAME)


@pytest.fixture
def midday(settings):
    """The clock at noon today in the site's time zone, and running: a test that counts "today" with the
    clock the code reads cannot see midnight pass between its steps. Only this process's clock moves
    (time-machine); nothing here reads the database's clock."""
    import time_machine

    zone = zoneinfo.ZoneInfo(settings.TIME_ZONE)
    with time_machine.travel(datetime.combine(datetime.now(zone).date(), time(12), tzinfo=zone), tick=True):
        yield


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


@pytest.fixture(scope="module")
def rl_model_dirs(tiny_bert_dir, tmp_path_factory):
    """(policy, reward model) folders for RL runs: the seeded tiny Llama and a tiny reward model."""
    from tests.test_sampling_core import seeded_tiny_llama
    from tests.tiny_models import tiny_reward_model

    policy_dir = seeded_tiny_llama(tmp_path_factory.mktemp("rl-policy"))
    reward_dir = tiny_reward_model(
        tmp_path_factory.mktemp("rl-rm"), tiny_bert_dir, offset=0.25, max_length=128
    )
    return policy_dir, reward_dir


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
    from core.storage_config import produced_file_storages
    from tests.object_storage import new_bucket

    bucket = new_bucket(s3_server.url, tmp_path / "cache")
    for name, value in bucket.env.items():
        monkeypatch.setenv(name, value)
    settings.STORAGES = settings.STORAGES | produced_file_storages()
    settings.STORAGE_BACKEND = "s3"
    settings.STORAGE_CACHE_DIR = bucket.cache
    return bucket


# Real model servers (tests/servers.py).
from tests.servers import llama_cpp_server, transformers_server  # noqa: E402, F401
