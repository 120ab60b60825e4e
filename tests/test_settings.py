"""Settings come from the environment: bad values stop start-up naming the variable; production is
safe by default and passes ``check --deploy``.

Start-up is what a deploy runs, so a real ``manage.py`` process shows the whole path once for each kind of
outcome (a bad value's one clear line, a clean ``check --deploy``, the key read from a file). The many bad
values are each checked by executing the settings module afresh in this process, with the environment the
process would have had: the module reads the environment only when it runs, and a bad value stops it with
the same ``ImproperlyConfigured`` that ``manage.py`` turns into that line (a process each took ~2 s).
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from unittest import mock

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.conftest import ROOT

GOOD_KEY = "k3y-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP"
CLEARED = (
    "DJANGO_ALLOW_ASYNC_UNSAFE",
    "DEBUG",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "ALLOWED_HOSTS",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
)


def manage(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if key not in CLEARED}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, "VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def load_settings(tmp_path, **env: str) -> dict:
    """The settings module run afresh under the environment ``manage`` would give its process (this
    process's environment is put back afterwards); its names and values."""
    base = {key: value for key, value in os.environ.items() if key not in CLEARED}
    with mock.patch.dict(os.environ, {**base, "VAR_DIR": str(tmp_path), **env}, clear=True):
        return runpy.run_path(str(ROOT / "webgpt_site" / "settings.py"))


PRODUCTION = {"DEBUG": "0", "SECRET_KEY": GOOD_KEY, "ALLOWED_HOSTS": "feedback.example.org"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG: expected a boolean"),
        (
            {"DEBUG": "1", "DATABASE_URL": "mysql://root@localhost/x"},
            "DATABASE_URL: unsupported scheme 'mysql'",
        ),
        (
            {"DEBUG": "1", "CELERY_BROKER_URL": "amqp://guest@localhost//"},
            "CELERY_BROKER_URL: expected redis://",
        ),
        ({"DEBUG": "1", "QUESTION_SPLIT_RATIOS": "bc=0.5,rm=0.5"}, "QUESTION_SPLIT_RATIOS: missing rl, eval"),
        (
            {"DEBUG": "1", "QUESTION_SPLIT_RATIOS": "bc=1,rm=1,rl=0,eval=0"},
            "QUESTION_SPLIT_RATIOS: ratios must sum to 1",
        ),
        ({"DEBUG": "0", "ALLOWED_HOSTS": "example.org"}, "SECRET_KEY: required when DEBUG is off"),
        ({**PRODUCTION, "SECRET_KEY": "short"}, "SECRET_KEY: must be at least 50 characters"),
        (
            {**PRODUCTION, "SECRET_KEY": "", "SECRET_KEY_FILE": "/nonexistent/key"},
            "SECRET_KEY_FILE: cannot read",
        ),
        ({**PRODUCTION, "ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS: required when DEBUG is off"),
        ({**PRODUCTION, "ALLOWED_HOSTS": "*"}, "ALLOWED_HOSTS: '*' is not allowed"),
        ({**PRODUCTION, "SECURE_HSTS_SECONDS": "a year"}, "SECURE_HSTS_SECONDS: expected an integer"),
        ({"DEBUG": "1", "LOG_LEVEL": "LOUD"}, "LOG_LEVEL: expected one of"),
        ({"DEBUG": "1", "API_THROTTLE_USER": "lots"}, "API_THROTTLE_USER: expected a rate like 120/minute"),
        ({"DEBUG": "1", "API_THROTTLE_USER": "0/minute"}, "API_THROTTLE_USER: expected a rate"),
        ({"DEBUG": "1", "CACHE_URL": "memcached://cache:11211"}, "CACHE_URL: expected redis://"),
        ({"DEBUG": "1", "TRUSTED_PROXIES": "-1"}, "TRUSTED_PROXIES: must be at least 0"),
        ({"DEBUG": "1", "LOGIN_FAILURE_LIMIT": "0"}, "LOGIN_FAILURE_LIMIT: must be at least 1"),
        ({"DEBUG": "1", "SESSION_IDLE_MINUTES": "soon"}, "SESSION_IDLE_MINUTES: expected an integer"),
        ({"DEBUG": "1", "SQLITE_BUSY_TIMEOUT": "0"}, "SQLITE_BUSY_TIMEOUT: must be at least 1"),
        ({"DEBUG": "1", "SAMPLING_ENDPOINTS": "{gpu"}, "SAMPLING_ENDPOINTS: not valid JSON"),
        (
            {"DEBUG": "1", "SAMPLING_ENDPOINTS": '{"gpu": {"base_url": "file:///etc", "model": "m"}}'},
            "SAMPLING_ENDPOINTS: gpu: the endpoint base URL must be http:// or https://",
        ),
        (
            {
                "DEBUG": "1",
                "SAMPLING_ENDPOINTS": '{"gpu": {"base_url": "http://h/v1", "model": "m", "key": "x"}}',
            },
            "SAMPLING_ENDPOINTS: gpu: unknown key(s) key",
        ),
        (
            {
                "DEBUG": "1",
                "SAMPLING_ENDPOINTS": '{"gpu": {"base_url": "http://h/v1", "api_key_env": "sk-1"}}',
            },
            "SAMPLING_ENDPOINTS: gpu:",
        ),
        (
            {"DEBUG": "1", "SAMPLING_ENDPOINTS": '{"local": {"base_url": "http://h/v1", "model": "m"}}'},
            "an endpoint name is lowercase",
        ),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(tmp_path, env, message):
    with pytest.raises(ImproperlyConfigured) as stopped:
        load_settings(tmp_path, **env)
    assert message in str(stopped.value)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "Configuration error: DEBUG: expected a boolean"),  # a reader of env.py
        (  # one checked in settings.py itself
            {"DEBUG": "1", "DATABASE_URL": "mysql://root@localhost/x"},
            "Configuration error: DATABASE_URL: unsupported scheme 'mysql'",
        ),
    ],
)
def test_a_bad_value_stops_manage_py_with_one_clear_line(tmp_path, env, message):
    result = manage(tmp_path, "check", **env)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_production_settings_pass_check_deploy_without_warnings(tmp_path):
    result = manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_key_can_come_from_a_file(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(GOOD_KEY + "\n")
    env = {**PRODUCTION, "SECRET_KEY": "", "SECRET_KEY_FILE": str(key_file)}
    # One process: the deploy checks pass (they raise SystemCheckError otherwise), then the key in use is
    # shown: the file's, without its line end (not a generated or empty one).
    check_then_show_key = (
        "from django.conf import settings; from django.core.management import call_command; "
        "call_command('check', '--deploy', '--fail-level', 'WARNING'); print('key', settings.SECRET_KEY)"
    )
    shown = manage(tmp_path, "shell", "--no-imports", "-c", check_then_show_key, **env)
    assert shown.returncode == 0, shown.stderr
    assert "System check identified no issues (0 silenced)." in shown.stdout
    assert shown.stdout.splitlines()[-1] == f"key {GOOD_KEY}", shown.stderr
    assert not (tmp_path / "secret_key").exists()


def test_development_generates_one_secret_key_and_keeps_it_private(tmp_path):
    assert manage(tmp_path, "check", DEBUG="1").returncode == 0
    key_file = tmp_path / "secret_key"
    first = key_file.read_text()
    assert len(first) >= 50
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    # The next start (the settings run again, here in-process: the key lives in the file) keeps it.
    assert load_settings(tmp_path, DEBUG="1")["SECRET_KEY"] == first
    assert key_file.read_text() == first


def test_production_serves_the_api_as_json_only(tmp_path):
    """The browsable HTML API needs inline scripts and styles that the CSP refuses: development only."""
    show = "from rest_framework.settings import api_settings as a; print(a.DEFAULT_RENDERER_CLASSES)"
    production = manage(tmp_path, "shell", "-c", show, **PRODUCTION)
    assert production.returncode == 0, production.stderr
    assert "JSONRenderer" in production.stdout and "Browsable" not in production.stdout
    development = load_settings(tmp_path, DEBUG="1")["REST_FRAMEWORK"]["DEFAULT_RENDERER_CLASSES"]
    assert "rest_framework.renderers.BrowsableAPIRenderer" in development
