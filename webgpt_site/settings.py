"""Settings for the whole platform, read from the environment (see docs/configuration.md).

Development (``DEBUG=1``, what ``make run`` and ``make test`` use) works with no other variable:
SQLite in ``var/``, a generated secret key kept in ``var/secret_key``, and an embedded Celery broker.
Production (``DEBUG`` unset or 0) requires ``SECRET_KEY`` and ``ALLOWED_HOSTS`` and turns on every
transport-security setting, so ``manage.py check --deploy`` reports nothing.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_int, env_list, env_rate, env_ratios, env_str
from core.ops.logs import logging_config
from core.storage_config import produced_file_storages, storage_backend
from training.sampling.endpoints import parse_endpoints

BASE_DIR = Path(__file__).resolve().parent.parent
# Everything the running app writes locally (SQLite file, dev secret, embedded broker, exports).
VAR_DIR = Path(env_str("VAR_DIR") or BASE_DIR / "var")

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    configured = env_str("SECRET_KEY")
    if configured:
        if len(configured) < 50 or len(set(configured)) < 5:
            raise ImproperlyConfigured("SECRET_KEY: must be at least 50 characters with 5 distinct ones")
        return configured
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY: required when DEBUG is off; set SECRET_KEY or SECRET_KEY_FILE "
            "(for local development set DEBUG=1 and a key is generated for you)"
        )
    # Development only: generate once and keep it in an untracked file, so sessions survive restarts.
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])
if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS: required when DEBUG is off (comma-separated host names)")
if not DEBUG and "*" in ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS: '*' is not allowed when DEBUG is off; list the host names")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "csp",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "core",
    "webgpt_site",
    "browser",
    "annotation",
    "training",
]

MIDDLEWARE = [
    # First: the request id is set before anything logs, and the access line times the whole stack.
    "core.ops.middleware.RequestIdMiddleware",
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "core.sessions.IdleSessionMiddleware",  # polls do not renew the session
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "core.middleware.PermissionsPolicyMiddleware",
    "core.middleware.NotFoundPageMiddleware",
    # A view's lost database connection becomes a 503 with Retry-After (core/unavailable.py).
    "core.unavailable.DatabaseUnavailableMiddleware",
    "core.ops.middleware.PrometheusAfterMiddleware",
    # Last, as django-axes requires: it turns a refused sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

if not DEBUG:
    # Production serves collected static files itself; in development runserver serves them from the apps.
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
        "whitenoise.middleware.WhiteNoiseMiddleware",
    )

ROOT_URLCONF = "webgpt_site.urls"
WSGI_APPLICATION = "webgpt_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.permissions.roles_context",
            ],
        },
    },
]


def _database() -> dict:
    url = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
    scheme = url.partition("://")[0]
    if scheme not in {"sqlite", "postgres", "postgresql", "pgsql"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL: unsupported scheme {scheme!r}; use postgres://USER@HOST:PORT/NAME or sqlite:///PATH"
        )
    try:
        config = dict(dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60)))
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL: {exc}") from None
    if scheme == "sqlite":
        Path(config["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        # For a small team on the zero-setup database: readers never wait for the writer (WAL), writers
        # queue for the lock for up to SQLITE_BUSY_TIMEOUT seconds instead of failing with "database is
        # locked", and a transaction takes the write lock when it begins (IMMEDIATE), so two requests can
        # never both read and then both fail to upgrade to writing.
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": env_int("SQLITE_BUSY_TIMEOUT", 20, minimum=1),
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    config["CONN_HEALTH_CHECKS"] = True
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# django-axes first: it refuses a sign-in while the username or the address is locked out.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed, compressed files in production (after collectstatic); plain files while developing.
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
MEDIA_ROOT = VAR_DIR / "media"

# --- Produced files (core/storage.py; docs/deployment.md, "Object storage") ---------------------
# The "exports", "models" and "imports" storages: folders here (local: MEDIA_ROOT/exports,
# MODEL_STORE_DIR/runs, MEDIA_ROOT/corpus-imports) or a private S3-compatible bucket (s3: S3_BUCKET,
# S3_ENDPOINT_URL, S3_REGION, S3_ACCESS_KEY_ID(_FILE), S3_SECRET_ACCESS_KEY(_FILE), S3_PREFIX,
# S3_URL_EXPIRE_SECONDS), checked by core/storage_config.py.
STORAGE_BACKEND = storage_backend()
STORAGES |= produced_file_storages()
# With s3: the copies a machine downloads (exports by sha256, model folders) and its files being uploaded.
STORAGE_CACHE_DIR = Path(env_str("STORAGE_CACHE_DIR") or VAR_DIR / "cache")

# --- Security -------------------------------------------------------------------------------------
# Pages only load our own scripts and styles; htmx is configured (base template) to need no inline
# styles or eval, so the policy has no 'unsafe-*' source at all.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
# Idle timeout: a session ends SESSION_IDLE_MINUTES after its last request (each request renews it; an
# open work page keeps it alive with its heartbeats, sent while the person is active; polls of pages that
# watch a job do not renew it: core/sessions.py).
SESSION_COOKIE_AGE = env_int("SESSION_IDLE_MINUTES", 8 * 60, minimum=1) * 60
SESSION_SAVE_EVERY_REQUEST = True
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # Load balancers and Prometheus often call the web process itself, in plain HTTP on the private
    # network: a redirect to HTTPS would read as "down" (docs/deployment.md).
    SECURE_REDIRECT_EXEMPT = [r"^(healthz|readyz|metrics)$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    if env_bool("BEHIND_TLS_PROXY", False):
        # Only when a trusted proxy terminates TLS and always sets this header.
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Proxies in front of the app that append to X-Forwarded-For (0: clients connect directly). Decides
# which address the login lockout and the API throttles count: a wrong number lets clients pick theirs.
TRUSTED_PROXIES = env_int("TRUSTED_PROXIES", 0, minimum=0)

# Brute-force protection on every sign-in form (/accounts/login/, /admin/login/): after
# LOGIN_FAILURE_LIMIT failures for one username, or LOGIN_FAILURES_PER_ADDRESS from one address (larger:
# a whole office signs in from one), sign-ins are refused for LOGIN_LOCKOUT_MINUTES (each refused try
# starts the wait again). Unlock early with `manage.py axes_reset_username NAME`, `axes_reset_ip ADDRESS`
# or `axes_reset` (everything).
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 50, minimum=1)
AXES_HANDLER = "core.lockout.LockoutHandler"  # the address's own limit
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
# Each on its own: per user, and per address (in this order: core/lockout.py reads them so).
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = False  # axes would clear the address's count too: core/lockout.py
AXES_LOCKOUT_CALLABLE = "webgpt_site.views.locked_out"
AXES_CLIENT_IP_CALLABLE = "core.throttles.client_address"
AXES_VERBOSE = False

# Throttle counters (and anything else cached) in Redis when CACHE_URL is set, so every web process
# shares them; otherwise in each process's memory.
CACHE_URL = env_str("CACHE_URL")
if CACHE_URL and CACHE_URL.partition("://")[0] not in {"redis", "rediss"}:
    raise ImproperlyConfigured("CACHE_URL: expected redis://HOST:PORT/DB (or unset for a per-process cache)")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    if CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# --- Celery ---------------------------------------------------------------------------------------
# With CELERY_BROKER_URL (Redis) real workers consume the queues. Without it (first run), the broker
# is kombu's filesystem transport in var/: still a separate worker process, never eager execution.
CELERY_QUEUES = ("default", "exports", "training", "sampling")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://"
if CELERY_BROKER_URL.partition("://")[0] not in {"redis", "rediss", "filesystem"}:
    raise ImproperlyConfigured(
        "CELERY_BROKER_URL: expected redis://HOST:PORT/DB (or unset for the embedded broker)"
    )
CELERY_BROKER_FOLDER = VAR_DIR / "celery-broker"
if CELERY_BROKER_URL == "filesystem://":
    # kombu's filesystem transport, its messages named to keep the order sent (core/embedded_broker.py)
    CELERY_BROKER_TRANSPORT = "core.embedded_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_FOLDER),
        "data_folder_out": str(CELERY_BROKER_FOLDER),
        # Exchange tables too (kombu's default is ./control, in whatever folder the process started).
        "control_folder": str(CELERY_BROKER_FOLDER / "control"),
        "store_processed": False,
        "polling_interval": 0.5,
    }
# Every key the broker writes in Redis starts with this prefix, so several deployments (or test runs)
# can share one Redis database without consuming each other's messages.
CELERY_BROKER_KEY_PREFIX = env_str("CELERY_BROKER_KEY_PREFIX") or ""
if CELERY_BROKER_KEY_PREFIX and CELERY_BROKER_URL != "filesystem://":
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": CELERY_BROKER_KEY_PREFIX}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_IGNORE_RESULT = True  # jobs report through database rows, never through task results
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Job liveness (core/jobs/heartbeat.py, core/jobs/sweeper.py): a running job's worker stamps
# its row every JOB_HEARTBEAT_SECONDS; a row silent for JOB_HEARTBEAT_TIMEOUT is failed by the sweep each
# worker runs every JOB_SWEEP_SECONDS, which also sends again a job queued for JOB_REQUEUE_AFTER whose queue
# lost it.
JOB_HEARTBEAT_SECONDS = env_int("JOB_HEARTBEAT_SECONDS", 10, minimum=1)
JOB_HEARTBEAT_TIMEOUT = env_int("JOB_HEARTBEAT_TIMEOUT", 60, minimum=2)
if JOB_HEARTBEAT_TIMEOUT < 2 * JOB_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured("JOB_HEARTBEAT_TIMEOUT must be at least twice JOB_HEARTBEAT_SECONDS")
JOB_SWEEP_SECONDS = env_int("JOB_SWEEP_SECONDS", 30, minimum=1)
JOB_REQUEUE_AFTER = env_int("JOB_REQUEUE_AFTER", 120, minimum=1)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# --- Question bank --------------------------------------------------------------------------------
QUESTION_SPLITS = ("bc", "rm", "rl", "eval")
QUESTION_SPLIT_RATIOS = env_ratios(
    "QUESTION_SPLIT_RATIOS", {"bc": 0.4, "rm": 0.3, "rl": 0.2, "eval": 0.1}, keys=QUESTION_SPLITS
)
# Largest import files (question files; answers files for feedback batches), checked before an upload is
# read; the file is then read a chunk at a time. Non-file request bodies: DATA_UPLOAD_MAX_MEMORY_SIZE.
QUESTION_IMPORT_MAX_BYTES = env_int("QUESTION_IMPORT_MAX_BYTES", 50 * 1024 * 1024, minimum=1)
ANSWERS_IMPORT_MAX_BYTES = env_int("ANSWERS_IMPORT_MAX_BYTES", 50 * 1024 * 1024, minimum=1)
# "Next task" holds back a question a labeler judged (or holds) under another template or preset for this
# long: an earlier judgement of the same question biases the later one. 0 turns the rule off.
FEEDBACK_SAME_QUESTION_WINDOW = timedelta(hours=env_int("FEEDBACK_SAME_QUESTION_HOURS", 24, minimum=0))
# Gold checks: a labeler's accuracy is read over their last this many gold judgements of a kind of work
# (at least the batch's gold_min_items), and they are paused when it falls under the batch's threshold.
GOLD_ROLLING_WINDOW = env_int("GOLD_ROLLING_WINDOW", 20, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# --- REST API (/api/) ------------------------------------------------------------------------------
# Tokens for scripts (stored as digests: core/api_tokens.py; `manage.py create_api_token <user>`),
# the session for the browser. Token comes first so an anonymous call is answered 401 with a
# WWW-Authenticate header.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.api_tokens.DigestTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON with limits on depth, numbers and NUL (core/parsers.py); forms as DRF parses them.
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # JSON only in production; the browsable HTML API (inline scripts and styles the CSP refuses) only
    # while developing.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Per signed-in user on every endpoint (anonymous calls are all 401 before a throttle); over the rate:
    # 429 with Retry-After. Generous by default (a labeler's autosave and heartbeats stay far below).
    "DEFAULT_THROTTLE_CLASSES": ["core.throttles.UserThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": env_rate("API_THROTTLE_USER", "1200/minute")},
    "NUM_PROXIES": TRUSTED_PROXIES,  # without it DRF would trust any X-Forwarded-For a client sends
}
SPECTACULAR_SETTINGS = {
    "TITLE": "WebGPT feedback platform API",
    "DESCRIPTION": "Questions, demonstrations, answers, feedback batches, labeling tasks and exports.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema lists every endpoint and field: signed-in users only (the docs page loads it with the
    # session, so it works once signed in).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI's files come from our own static files (drf-spectacular-sidecar): the CSP allows 'self' only.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "EpisodeStatusEnum": "annotation.models.EpisodeStatus",
        "ExportStatusEnum": "annotation.models.ExportStatus",
        "TrainingRunKindEnum": "training.models.RunKind",
        "ModelKindEnum": "training.models.CHECKPOINT_KINDS",
    },
}

# --- Training (training/) -------------------------------------------------------------------------------
# The model store: a local folder holding the converted base model and the runs being trained; with local
# storage also the finished runs (runs/run-N). Several machines: STORAGE_BACKEND=s3, or a shared file system.
MODEL_STORE_DIR = Path(env_str("MODEL_STORE_DIR") or VAR_DIR / "models")
# CPU threads per training job (0 = torch's default: one per core). Run the `training` queue with
# concurrency 1; on a shared machine fewer threads avoid contention.
TRAINING_THREADS = env_int("TRAINING_THREADS", 0, minimum=0)
# The most data-parallel processes one training run may ask its worker for (training.runs.processes):
# the worker's GPUs, or on a CPU worker its cores (each process then takes a share of the threads).
TRAINING_MAX_PROCESSES = env_int("TRAINING_MAX_PROCESSES", 8, minimum=1)

# --- Sampling (training/sampling/runs.py, training/sampling/jobs.py) --------------------------------------
# Episodes the local backend steps together (one batch per round); more use more memory, not more cores.
SAMPLING_BATCH = env_int("SAMPLING_BATCH", 8, minimum=1)
# CPU threads per sampling job (0 = torch's default). Run the `sampling` queue with concurrency 1.
SAMPLING_THREADS = env_int("SAMPLING_THREADS", 0, minimum=0)
# OpenAI-compatible endpoints (vLLM, TGI, llama.cpp's server, hosted APIs), chosen by name when a run is
# requested: a request never carries a URL. JSON: {"name": {"base_url": ..., "model": ..., "api_key_env":
# "VARIABLE_NAME", "policy": "prompted" | "bc", "timeout_s": 60, "max_parallel": 8}}; keys are read from the
# named variables by the worker at run time and never stored or shown.
try:
    SAMPLING_ENDPOINTS = parse_endpoints(env_str("SAMPLING_ENDPOINTS") or "{}")
except ValueError as exc:
    raise ImproperlyConfigured(f"SAMPLING_ENDPOINTS: {exc}") from None

# --- The browsing environment ----------------------------------------------------------------------
CORPUS_INDEX_DIR = Path(env_str("CORPUS_INDEX_DIR") or VAR_DIR / "corpora")
DEFAULT_CORPUS = env_str("DEFAULT_CORPUS") or "freshwiki"
# Corpus imports from the console (browser/import_requests.py): the largest upload (.jsonl, .zim, .zip),
# the most a .zip may hold unpacked, and the only folder a server path may name (unset: uploads only).
CORPUS_IMPORT_MAX_BYTES = env_int("CORPUS_IMPORT_MAX_BYTES", 500 * 1024 * 1024, minimum=1)
CORPUS_IMPORT_MAX_UNZIPPED_BYTES = env_int("CORPUS_IMPORT_MAX_UNZIPPED_BYTES", 2 * 1024**3, minimum=1)
CORPUS_IMPORT_ROOT = Path(env_str("CORPUS_IMPORT_ROOT")) if env_str("CORPUS_IMPORT_ROOT") else None
# Zip-bomb and memory limits (browser/import_requests.py checks a .zip's table of contents, the worker
# counts the bytes it really unpacks; the corpus readers hold page files to the same 64 MiB built in).
# 64 MiB per file bounds the worker's memory for one page (read whole; a long Wikipedia article is about
# 2 MB of HTML); 100:1 is well above what real pages compress to (HTML about 5-10:1) and far below
# deflate's ~1000:1 (checked for each member and the whole archive from 1 MiB unpacked up); 100,000
# entries keep the table of contents zipfile parses into memory small (larger corpora come as JSONL, ZIM
# or a server folder, all streamed).
CORPUS_IMPORT_MAX_FILE_BYTES = env_int("CORPUS_IMPORT_MAX_FILE_BYTES", 64 * 1024**2, minimum=1)
CORPUS_IMPORT_MAX_ZIP_RATIO = env_int("CORPUS_IMPORT_MAX_ZIP_RATIO", 100, minimum=1)
CORPUS_IMPORT_MAX_ZIP_ENTRIES = env_int("CORPUS_IMPORT_MAX_ZIP_ENTRIES", 100_000, minimum=1)
# When no active demonstration batch has a question left, demonstrators get questions of the bc split
# (searched in DEFAULT_CORPUS). The demo (`make run`) turns this off: its 100-page corpus cannot answer the
# TriviaQA/NQ questions of the bc split, so its pool is the demo batch, written for that corpus.
DEMONSTRATION_SPLIT_FALLBACK = env_bool("DEMONSTRATION_SPLIT_FALLBACK", True)
# Live-web search providers (browser/sources.py, docs/search-providers.md): each is offered once configured.
SEARXNG_URL = (env_str("SEARXNG_URL") or "").rstrip("/") or None  # e.g. http://127.0.0.1:8888
BRAVE_API_KEY = env_str("BRAVE_API_KEY")  # or BRAVE_API_KEY_FILE
BRAVE_API_URL = env_str("BRAVE_API_URL") or "https://api.search.brave.com/res/v1/web/search"
for _name, _url in (("SEARXNG_URL", SEARXNG_URL), ("BRAVE_API_URL", BRAVE_API_URL)):
    if _url and not _url.startswith(("http://", "https://")):
        raise ImproperlyConfigured(f"{_name}: expected an http:// or https:// address, got {_url!r}")
# Reuse of live answers (browser/web_cache.py): day (the same UTC day), forever (the newest of any day), off.
WEB_CACHE = (env_str("WEB_CACHE") or "day").strip().lower()
if WEB_CACHE not in {"day", "forever", "off"}:
    raise ImproperlyConfigured(f"WEB_CACHE: expected day, forever or off, got {WEB_CACHE!r}")
# The page fetcher for live pages (browser/fetch, docs/fetching.md). Loopback stays refused: only tests
# set FETCH_ALLOW_LOOPBACK, in code, to reach their own servers on 127.0.0.1.
FETCH_CONNECT_TIMEOUT = env_int("FETCH_CONNECT_TIMEOUT", 5, minimum=1)
FETCH_TOTAL_TIMEOUT = env_int("FETCH_TOTAL_TIMEOUT", 20, minimum=1)
FETCH_MAX_BYTES = env_int("FETCH_MAX_BYTES", 5 * 1024 * 1024, minimum=1)
FETCH_CHECK_ROBOTS = env_bool("FETCH_CHECK_ROBOTS", True)
FETCH_MIN_INTERVAL = env_int("FETCH_MIN_INTERVAL", 1, minimum=0)  # seconds between fetches from one host
# Passed to browser.engine.settings.BrowserSettings; the defaults there are explained in its docstring.
BROWSER = {
    "max_actions": env_int("BROWSER_MAX_ACTIONS", 100, minimum=1),
    "max_quote_chars": env_int("BROWSER_MAX_QUOTE_CHARS", 1500, minimum=1),
    "window_lines": env_int("BROWSER_WINDOW_LINES", 20, minimum=1),
    "line_width": env_int("BROWSER_LINE_WIDTH", 80, minimum=20),
    "blocklist": tuple(env_list("BROWSER_BLOCKLIST", ["reddit.com", "quora.com"])),
}

LOG_LEVEL = (env_str("LOG_LEVEL") or "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(
        f"LOG_LEVEL: expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got {LOG_LEVEL!r}"
    )
# json: one object per line with the request id (or the Celery task id), for a log shipper; text: for people.
LOG_FORMAT = (env_str("LOG_FORMAT") or ("text" if DEBUG else "json")).strip().lower()
if LOG_FORMAT not in {"json", "text"}:
    raise ImproperlyConfigured(f"LOG_FORMAT: expected json or text, got {LOG_FORMAT!r}")
LOGGING = logging_config(LOG_FORMAT, LOG_LEVEL)

# --- Operations (webgpt_site/ops/) ----------------------------------------------------------------------
# /metrics answers Prometheus when it sends "Authorization: Bearer <METRICS_TOKEN>", and signed-in
# researchers; everyone else gets 404. Unset: researchers only.
METRICS_TOKEN = env_str("METRICS_TOKEN") or None  # or METRICS_TOKEN_FILE
if METRICS_TOKEN and (len(METRICS_TOKEN) < 32 or not METRICS_TOKEN.isascii() or " " in METRICS_TOKEN):
    raise ImproperlyConfigured("METRICS_TOKEN: must be at least 32 characters, ASCII, without spaces")
