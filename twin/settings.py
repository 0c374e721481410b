"""Settings, all read from the environment.

With ``DATABASE_URL`` unset the twin uses SQLite under ``var/``; with
``REDIS_URL`` unset the embedded Redis of ``twin.embedded`` (reading the settings
starts nothing: the processes that need a broker start it, see there). So a fresh
machine needs no services, and docker-compose or CI point the same code at
PostgreSQL and a real Redis.
"""
from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

import dj_database_url
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from twin.core.localnet import telemetry_queue
from twin.embedded import embedded_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TWIN_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("TWIN_DEBUG", False)
SECRET_KEY = os.environ.get("TWIN_SECRET_KEY") or os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if DEBUG or os.environ.get("TWIN_ALLOW_INSECURE_KEY") == "1":
        SECRET_KEY = "insecure-development-key-do-not-deploy"
    else:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "TWIN_SECRET_KEY is not set: export a random string (the demo and test "
            "commands generate one), or set TWIN_DEBUG=1 for a throwaway development key"
        )

ALLOWED_HOSTS = env_list("TWIN_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("TWIN_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "channels",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "twin.core",
    "twin.hardware",
    "twin.jobs",
    "twin.facility",
    "twin.telemetry",
    "twin.scenarios",
    "twin.live",
    "twin.web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Redis or the database away: 503 + Retry-After JSON instead of a 500 page.
    "twin.core.unavailable.ServiceUnavailableMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Under /api/: a body over DATA_UPLOAD_MAX_MEMORY_SIZE is 413 JSON, not an HTML 400.
    "twin.core.api.middleware.ApiErrorsMiddleware",
    # Under /api/: a query parameter or body value the schema does not allow is a 400.
    "twin.core.api.strict.StrictRequestMiddleware",
]

ROOT_URLCONF = "twin.urls"
ASGI_APPLICATION = "twin.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------
VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    # Persistent connections (60 s) for the workers; the ASGI server runs each request
    # in a thread of its own, where they would pile up to the server's connection limit
    # under concurrent ingest ("too many clients"), so twin/asgi.py sets 0 (Django's docs
    # advise against persistent connections under ASGI).
    DATABASES = {"default": dj_database_url.parse(
        DATABASE_URL, conn_max_age=int(os.environ.get("TWIN_DB_CONN_MAX_AGE", 60)))}
    if DATABASES["default"]["ENGINE"].endswith("postgresql"):
        # An unreachable server fails the request (503) in seconds instead of hanging it.
        DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
            "connect_timeout", int(os.environ.get("TWIN_DB_CONNECT_TIMEOUT_S", 3)))
        # A pool of connections per process (Django's psycopg pool), set by the web
        # processes (twin/asgi.py): each request borrows one and gives it back, so the
        # server never opens more than TWIN_DB_POOL_MAX per process, however many
        # requests run at once, and none pays a connect. 0 (the workers): no pool.
        DB_POOL_MAX = int(os.environ.get("TWIN_DB_POOL_MAX", 0))
        if DB_POOL_MAX > 0:
            DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them instead
            DATABASES["default"]["OPTIONS"]["pool"] = {
                "min_size": min(int(os.environ.get("TWIN_DB_POOL_MIN", 2)), DB_POOL_MAX),
                "max_size": DB_POOL_MAX,
                # Waiting this long for a free connection (or for the server) fails
                # the request with 503, as an unreachable server does.
                "timeout": float(os.environ.get("TWIN_DB_POOL_TIMEOUT_S", 3)),
            }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("TWIN_SQLITE_PATH", str(VAR_DIR / "twin.sqlite3")),
            # WAL lets the web server read while a worker writes; IMMEDIATE
            # transactions take the write lock up front instead of failing late.
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
            # A file, not :memory:, so a real Celery worker can share the test DB.
            "TEST": {"NAME": str(VAR_DIR / "test-twin.sqlite3")},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis, celery, channels ---------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL") or embedded_url()

# Every Redis client on a request path fails fast when Redis is away (the request
# then answers 503, twin.core.unavailable) and reconnects by itself when it returns.
REDIS_CONNECT_TIMEOUT_S = float(os.environ.get("TWIN_REDIS_CONNECT_TIMEOUT_S", 1.0))
REDIS_SOCKET_TIMEOUT_S = float(os.environ.get("TWIN_REDIS_SOCKET_TIMEOUT_S", 2.0))
# /healthz/ and the live read endpoints first PING Redis on a connection of their own
# with this timeout (twin.core.unavailable.check_redis): a frozen Redis is a 503 within
# a second, while the clients doing the work keep the longer timeout above (the large
# pipelines of a million-card tick must not time out).
REDIS_PROBE_TIMEOUT_S = float(os.environ.get("TWIN_REDIS_PROBE_TIMEOUT_S", 0.5))

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = int(os.environ.get("TWIN_TASK_TIME_LIMIT", 3600))
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30
# Two queues, each with its own workers (scripts/demo, docker-compose.yml): jobs
# (scenario runs, builds, reapers) on the default queue, and telemetry (draining
# the ingest stream, ticks, alert evaluation, scrapes) on its own, so no number
# of heavy runs can starve the live state or its stale alerts.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("TWIN_CELERY_QUEUE", "twin")
TWIN_TELEMETRY_QUEUE = (os.environ.get("TWIN_CELERY_TELEMETRY_QUEUE")
                        or telemetry_queue(CELERY_TASK_DEFAULT_QUEUE))
CELERY_TASK_ROUTES = {"twin.telemetry.*": {"queue": TWIN_TELEMETRY_QUEUE}}
# Broker loss (a Redis restart): workers and beat keep retrying for ever instead
# of exiting after 100 tries; sockets time out so a half-open connection is
# noticed; a running late-ack task keeps running (its message is redelivered only
# if it never acks, and the job runner then leaves a finished job alone).
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_BROKER_CONNECTION_TIMEOUT = 2.0
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 2.0,
    "socket_timeout": 10.0,
    "socket_keepalive": True,
    "health_check_interval": 10,
    "retry_on_timeout": True,
}
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# A worker that survives the broker loss itself (twin.celery.Consumer says how).
CELERY_WORKER_CONSUMER = "twin.celery:Consumer"
# A worker's CPU priority, applied on ``celeryd_init`` before the pool forks
# (``twin.core.priority``; compose and the demo give it to the telemetry worker only).
# Kept raw here: a bad value fails that worker's start with one line, not every command.
TWIN_WORKER_NICE = os.environ.get("TWIN_WORKER_NICE", "").strip()
# Publishing (the web server queuing a job, beat its entries) gives up within
# about a second: the caller answers 503 or logs, and the next tick tries again.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0,
                                    "interval_step": 0.2, "interval_max": 0.5}
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = 2.0
CELERY_REDIS_SOCKET_TIMEOUT = 10.0
CELERY_REDIS_RETRY_ON_TIMEOUT = True
CELERY_REDIS_BACKEND_HEALTH_CHECK_INTERVAL = 10
CELERY_RESULT_BACKEND_ALWAYS_RETRY = True
CELERY_RESULT_BACKEND_MAX_RETRIES = 20
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    # Telemetry: ticks (stale cards, trailing frames, a stuck stream), scrapes, retention.
    "telemetry-tick": {"task": "twin.telemetry.tick_all", "schedule": 1.0},
    "telemetry-scrape": {"task": "twin.telemetry.scrape_due", "schedule": 5.0},
    # Facility readings over Redfish (twin.facility.redfish): each source at its interval.
    "telemetry-redfish": {"task": "twin.telemetry.poll_redfish", "schedule": 5.0},
    "telemetry-cleanup": {"task": "twin.telemetry.cleanup", "schedule": 3600.0},
    # Agents silent after a rotation of their token: an alert naming each.
    "telemetry-watch-agents": {"task": "twin.telemetry.watch_agents", "schedule": 10.0},
    # Scenario runs: fail the ones whose worker died (twin.scenarios.runner.reap).
    "scenarios-reap": {"task": "twin.scenarios.reap", "schedule": 30.0},
    # Cluster builds: the same for builds (twin.hardware.runner.reap).
    "builds-reap": {"task": "twin.hardware.reap_builds", "schedule": 30.0},
    # Jobs on the twin: complete the ones past their expected duration, place the queue.
    "jobs-finish": {"task": "twin.jobs.finish_due", "schedule": 10.0},
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py >= 8 reads with a 5 s socket timeout by default, and
            # channels_redis blocks 5 s in BZPOPMIN: every idle consumer died
            # with TimeoutError (channels_redis#422). Give reads more room.
            # A connect timeout so a consumer learns at once that Redis is away
            # (it closes the socket with 4503: the client reconnects with backoff).
            # One immediate retry on a connection error, as twin.telemetry's own
            # client does: it replaces a pooled connection that a Redis restart
            # broke, so the first socket after the restart joins its group instead
            # of being closed with 4503 once per stale connection.
            "hosts": [{"address": REDIS_URL, "socket_timeout": 15,
                       "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_S,
                       "retry": AsyncRetry(NoBackoff(), 1,
                                           supported_errors=(RedisConnectionError,))}],
            "prefix": os.environ.get("TWIN_CHANNEL_PREFIX", "twin"),
        },
    }
}

# --- auth, api ------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# Reads need a login unless this is set (for a public demo); writes always need
# an authenticated user holding the model permission.
TWIN_PUBLIC_READ = env_bool("TWIN_PUBLIC_READ", False)

REST_FRAMEWORK = {
    # Token first: an anonymous request then gets 401 with "WWW-Authenticate: Token"
    # (a script learns what to send) rather than a bare 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # DRF's token scheme for both kinds of key: named tokens (scoped, see-only,
        # revocable; twin.core.tokens) and DRF's one-per-user token from /api/token/.
        "twin.core.api.authentication.TwinTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["twin.core.api.permissions.TwinModelPermissions"],
    "DEFAULT_FILTER_BACKENDS": [
        "twin.core.api.filters.TwinFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "twin.core.api.pagination.TwinPageNumberPagination",
    "PAGE_SIZE": 100,
    # drf-spectacular's, plus every operation's error answers (400 … 503).
    "DEFAULT_SCHEMA_CLASS": "twin.core.api.schema.TwinAutoSchema",
    # A refusal because of what is stored (taken, missing, over budget) is a 409, not a 400.
    "EXCEPTION_HANDLER": "twin.core.api.exceptions.twin_exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # DRF's JSON parser with a nesting limit (deep bodies were a RecursionError: 500).
    "DEFAULT_PARSER_CLASSES": [
        "twin.core.api.parsers.TwinJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Supercluster Twin API",
    "DESCRIPTION": "Inventory, power and scenario runs of an AI supercluster.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Offline machines: Swagger UI and ReDoc come from the sidecar package.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # The API's bodies are JSON. The form encodings DRF also parses are there for the
    # browsable API's HTML forms, and cannot express null or nested values.
    "PARSER_WHITELIST": ["rest_framework.parsers.JSONParser"],
    # Several models have a "status" or "kind" field with different choices: name each enum.
    "ENUM_NAME_OVERRIDES": {
        # also the devices' status (DeviceStatusChoices: the same choices)
        "CardStatusEnum": "twin.hardware.choices.CardStatusChoices.choices",
        "LinkStatusEnum": "twin.hardware.choices.LinkStatusChoices.choices",
        "JobStatusEnum": "twin.core.choices.JobStatusChoices.choices",
        "LinkKindEnum": "twin.hardware.choices.LinkKindChoices.choices",
        "DeviceKindEnum": "twin.hardware.choices.DeviceKindChoices.choices",
        "EndpointKindEnum": "twin.hardware.api.serializers.ENDPOINT_KINDS",
        "CappingShareEnum": "twin.facility.models.capping.SHARES",
        "ElementStatusEnum": "twin.facility.choices.ElementStatusChoices.choices",
    },
}

# --- login throttling (twin.core.throttling) ---------------------------------
# Login attempts (POST /api/token/, /login/, /admin/login/) per client address, shared by
# all three; past it, 429 + Retry-After. The counts are kept in Redis so every web worker
# shares them ("locmem": per process, for a single-process setup without Redis).
TWIN_LOGIN_RATE = os.environ.get("TWIN_LOGIN_RATE", "10/min")
REST_FRAMEWORK["NUM_PROXIES"] = int(os.environ.get("TWIN_NUM_PROXIES", "0"))
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # Aggregates (the cluster summary …) shared by every web process, keyed by a
    # version that every committed write to their tables replaces (twin.core.aggregates).
    "aggregates": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ.get("TWIN_CACHE_PREFIX", "twc") + "-agg",
        "TIMEOUT": float(os.environ.get("TWIN_AGGREGATE_TTL_S", 60)),
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    },
    "throttle": (
        {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"}
        if os.environ.get("TWIN_THROTTLE_CACHE", "redis") == "locmem" else {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.environ.get("TWIN_CACHE_PREFIX", "twc"),
            # A login must not hang on a Redis that is away: the throttle falls back.
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    ),
}

# Largest request body Django will read (bytes); telemetry batches are bounded too.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("TWIN_MAX_BODY_BYTES", 8 * 1024 * 1024))
DATA_UPLOAD_MAX_NUMBER_FIELDS = 20000

# --- telemetry (twin.telemetry) --------------------------------------------
# Redis key prefix of the live state (tests give each session its own).
TELEMETRY_REDIS_PREFIX = os.environ.get("TWIN_TELEMETRY_PREFIX", "tw")
TELEMETRY_INTERVAL_S = 1.0  # the agents' nominal reporting interval
TELEMETRY_STALE_INTERVALS = 5  # a card silent this many intervals is stale
# ... plus the ingest lag, up to this many seconds (0: silence by the clock alone);
# see twin.telemetry.processing.tickparts.
TELEMETRY_LAG_ALLOWANCE_MAX_S = float(os.environ.get("TWIN_TELEMETRY_LAG_ALLOWANCE_S", 60))
# Clusters with more cards tick in shards of at most this many cards, one Celery task
# each, so several worker processes share a tick (twin.telemetry.processing.shards); 0: never.
TELEMETRY_TICK_SHARD_CARDS = int(os.environ.get("TWIN_TICK_SHARD_CARDS", 131_072))
# Ticks (or sharded rounds) per cluster per second, at most (twin.telemetry.config).
TELEMETRY_MAX_TICK_HZ = float(os.environ.get("TWIN_TELEMETRY_MAX_TICK_HZ", 2))
# Drain slots on the ingest stream: at most this many drain tasks run at once (the web
# process claims a free slot when it enqueues, twin.telemetry.enqueue; the workers'
# beat kick walks the same slots), so set it alike in web and workers.
TELEMETRY_DRAINERS = int(os.environ.get("TWIN_TELEMETRY_DRAINERS", 2))
# The web (or scrape) process writes each batch into the live state itself instead of
# queuing it on the stream for a worker: ~2.6-2.9x less CPU per batch
# (benchmarks/ingest_paths.py), no queue while the workers are away, no backpressure
# (twin.telemetry.enqueue). For the largest clusters.
TELEMETRY_APPLY_ON_INGEST = env_bool("TWIN_TELEMETRY_APPLY_ON_INGEST")
# Per-stage timings (wall and CPU) of ingest -> apply -> tick -> group send, logged on
# twin.telemetry.trace and kept in Redis (twin.telemetry.trace); off by default.
TELEMETRY_TRACE = env_bool("TWIN_TELEMETRY_TRACE")
# Requests per web process whose synchronous part runs at once, the agents' ingest paths
# excepted (twin.core.asgi_handler: a batch then competes with at most this many readers
# for the interpreter lock); 0: no limit.
TWIN_WEB_THREADS = int(os.environ.get("TWIN_WEB_THREADS", 0) or 0)
# An agent's replaced token keeps working this long after a rotation (the rotate-token
# action may say otherwise), so the agent can be given the new one without a gap.
TWIN_AGENT_TOKEN_GRACE_S = float(os.environ.get("TWIN_AGENT_TOKEN_GRACE_S", 600))
# An agent silent this long after a rotation of its token gets an alert naming it
# (twin.telemetry.agent_watch, on beat).
TWIN_AGENT_SILENT_S = float(os.environ.get("TWIN_AGENT_SILENT_S", 30))
TELEMETRY_RETENTION_DAYS = int(os.environ.get("TWIN_TELEMETRY_RETENTION_DAYS", 7))
TELEMETRY_MAX_BODY_BYTES = DATA_UPLOAD_MAX_MEMORY_SIZE
# Django's ASGI handler spools a request body to a temporary *disk* file past this
# size (default 2.5 MB); a full columnar batch (65,536 cards ≈ 6.8 MB) stays in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = TELEMETRY_MAX_BODY_BYTES

# --- jobs on the twin (twin.jobs) -------------------------------------------
# The placement policy of a submitted job that names none (simulation.scheduling.POLICIES).
TWIN_JOBS_POLICY = os.environ.get("TWIN_JOBS_POLICY", "topology-aware")
# The AllReduce a placement's prediction prices (bytes): 1 GiB of bf16 gradients.
TWIN_JOBS_ALLREDUCE_BYTES = int(os.environ.get("TWIN_JOBS_ALLREDUCE_BYTES", 1 << 30))
# Largest trace upload (the whole multipart body, bytes): refused with 413 before it is read.
TWIN_TRACE_MAX_BYTES = int(os.environ.get("TWIN_TRACE_MAX_BYTES", 64 * 1024 * 1024))
# Self-healing (twin.jobs.healing): a card silent this long while its rack reports is
# dead (a lost heartbeat). Each cluster's Cluster.self_healing says propose or apply.
TWIN_HEAL_SILENT_S = float(os.environ.get("TWIN_HEAL_SILENT_S", 10.0))

# --- the twin's own /metrics (twin.web.metrics) and alerts out (twin.telemetry.notify) ---
# Who may scrape /metrics: a bearer token, or an address in these networks (loopback).
TWIN_METRICS_TOKEN = os.environ.get("TWIN_METRICS_TOKEN", "")
TWIN_METRICS_ALLOW = env_list("TWIN_METRICS_ALLOW", "127.0.0.1/8,::1/128")
for _network in TWIN_METRICS_ALLOW:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"TWIN_METRICS_ALLOW: {_network!r} is no network; give "
                                   f"addresses or CIDR networks, comma-separated") from None
# Per-rack power series only for clusters up to this many racks.
TWIN_METRICS_MAX_RACKS = int(os.environ.get("TWIN_METRICS_MAX_RACKS", 5000))

# Long-term history in VictoriaMetrics (twin.telemetry.victoria): its base URL, e.g.
# http://victoria:8428. Unset: the 1-minute history stays in the database (TelemetryMinute).
TWIN_VICTORIA_URL = os.environ.get("TWIN_VICTORIA_URL", "").rstrip("/")
# Seconds between two writes of every card's samples (the history's resolution) …
TWIN_VICTORIA_STEP_S = float(os.environ.get("TWIN_VICTORIA_STEP_S", 10))
# … and how long a write or a query may take before it counts as failed (write) or
# answers 503 (query).
TWIN_VICTORIA_TIMEOUT_S = float(os.environ.get("TWIN_VICTORIA_TIMEOUT_S", 3))

# Alerts out: Alertmanager base URLs (their v2 API) and webhook URLs, comma-separated.
TWIN_ALERTMANAGER_URLS = env_list("TWIN_ALERTMANAGER_URLS", "")
TWIN_ALERT_WEBHOOK_URLS = env_list("TWIN_ALERT_WEBHOOK_URLS", "")
# The dashboard's address as receivers should link to it (generatorURL).
TWIN_ALERTS_EXTERNAL_URL = os.environ.get("TWIN_ALERTS_EXTERNAL_URL", "http://localhost:8000")
# Firing alerts are re-sent to Alertmanagers this often (they expire after 4 times it).
TWIN_ALERTS_RESEND_S = float(os.environ.get("TWIN_ALERTS_RESEND_S", 60))
# Resolved alerts older than this are not sent (a receiver added later gets no history).
TWIN_ALERTS_LOOKBACK_S = float(os.environ.get("TWIN_ALERTS_LOOKBACK_S", 86400))
TWIN_ALERTS_TIMEOUT_S = float(os.environ.get("TWIN_ALERTS_TIMEOUT_S", 5))
# How long a measured facility reading (native batch, Redfish) stands in for the model
# (twin.facility.readings): after it, the model's figure again.
FACILITY_READING_TTL_S = float(os.environ.get("TWIN_FACILITY_READING_TTL_S", 60))
TWIN_ALERTS_BEAT_S = float(os.environ.get("TWIN_ALERTS_BEAT_S", 30))
CELERY_BEAT_SCHEDULE["telemetry-notify"] = {"task": "twin.telemetry.notify_alerts",
                                            "schedule": TWIN_ALERTS_BEAT_S}

# --- static, frontend -----------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("TWIN_STATIC_ROOT", BASE_DIR / "staticfiles"))
FRONTEND_DIST = BASE_DIR / "frontend" / "dist"
STATICFILES_DIRS = [FRONTEND_DIST] if FRONTEND_DIST.exists() else []
# Vite's manifest (entry -> hashed files); read from the build output because
# collectstatic skips the dot-directory it lives in.
VITE_MANIFEST = FRONTEND_DIST / ".vite" / "manifest.json"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG


def _vite_hashed(path: str, url: str) -> bool:
    """Vite's content-hashed names (``three-B3IEBDZe.js``) never change content:
    cache them for ever, like the manifest storage's own hashed copies (the
    entry imports its chunks by these names)."""
    return bool(re.match(r"^.+[.-][0-9a-zA-Z_-]{8,12}\..+$", url))


WHITENOISE_IMMUTABLE_FILE_TEST = _vite_hashed

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("TWIN_LOG_LEVEL", "WARNING")},
}
