"""One settings module, read from environment variables with safe defaults.

Without REDIS_URL, Celery tasks run in-process; without DATABASE_URL, SQLite in ./data.
"""

import os
import warnings
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def bundled(name: str) -> Path:
    """templates/ or static/: in the clone beside the apps; in an installed package (the wheel maps
    them into benchviewer/, pyproject.toml) inside it, nothing of the clone needed."""
    installed = Path(__file__).resolve().parent / name
    return installed if installed.is_dir() else BASE_DIR / name


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).lower() in ("1", "true", "yes", "on")


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


DEBUG = env_bool("DEBUG", False)
# PRODUCTION=1 turns on every HTTPS-only setting below; `manage.py check --deploy` is clean with it.
PRODUCTION = env_bool("PRODUCTION", False)
DEV_SECRET_KEY = "benchviewer-insecure-dev-key-set-SECRET_KEY-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY", DEV_SECRET_KEY)
if PRODUCTION and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured("set SECRET_KEY when PRODUCTION=1")
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
DATA_DIR = Path(os.environ.get("DATA_DIR", BASE_DIR / "data"))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "trials",
    "comparisons",
    "shares",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.limits.RequestLimitMiddleware",  # 413/414 before anything reads the body
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files, with DEBUG off too (`make demo`)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "core.roles.WriteAccessMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

# No inline script anywhere: agent output is untrusted, and this makes an escaping slip inert.
# Styles allow 'unsafe-inline' because plotly.js injects its own <style> at run time.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", PRODUCTION)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = PRODUCTION
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

ROOT_URLCONF = "benchviewer.urls"
WSGI_APPLICATION = "benchviewer.wsgi.application"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [bundled("templates")],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.roles.template_rights",
                "shares.context_processors.share_lifetimes",  # the Share control's expiry choices
            ],
        },
    },
]

database_url = os.environ.get("DATABASE_URL", f"sqlite:///{DATA_DIR / 'benchviewer.sqlite3'}")
# DB_CONN_MAX_AGE: a connection kept between requests (a new PostgreSQL one is a server process with cold
# caches: 3-14 ms a request, docs/configuration.md), checked before a request uses it (a restart in between).
DATABASES = {
    "default": dj_database_url.parse(
        database_url,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 0),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # A file, not memory, for tests too: a Celery worker process must see the same database.
    # One file per test run, so two runs at once do not share it.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("TEST_SQLITE_PATH", str(DATA_DIR / f"test-{os.getpid()}.sqlite3"))
    }
    # WAL lets the dashboard read while an import writes; a busy timeout instead of "locked".
    # 16 kB pages (for a new database; an existing one keeps its own): steps hold kilobytes
    # to megabytes of text, and imports of big trajectories were 13-20% faster than with 4 kB.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA page_size=16384; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# plotly.js is vendored in static/plotly/ (a partial bundle of the traces we draw, built by
# scripts/plotly/build.sh, with a .gz and .br that WhiteNoise sends to browsers that accept them).
STATICFILES_DIRS = [bundled("static")]

# WhiteNoise serves them from the app folders (no collectstatic needed) or, after collectstatic,
# from STATIC_ROOT; a proxy or CDN in front may serve STATIC_ROOT instead.
WHITENOISE_USE_FINDERS = True
warnings.filterwarnings("ignore", message="No directory at: .*staticfiles")  # STATIC_ROOT is optional

# Raw imported bytes live in a Django storage (local folder by default; S3 via django-storages).
BLOB_STORAGE_BACKEND = os.environ.get("BLOB_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage")
if BLOB_STORAGE_BACKEND == "django.core.files.storage.FileSystemStorage":
    BLOB_STORAGE_OPTIONS = {"location": str(DATA_DIR / "blobs")}
else:  # S3 (django-storages): the bucket from here; credentials from boto3's own AWS_* variables
    BLOB_STORAGE_OPTIONS = {
        option: os.environ[variable]
        for option, variable in [
            ("bucket_name", "AWS_STORAGE_BUCKET_NAME"),
            ("endpoint_url", "AWS_S3_ENDPOINT_URL"),
            ("region_name", "AWS_S3_REGION_NAME"),
            ("location", "BLOB_STORAGE_PREFIX"),  # a key prefix inside the bucket
        ]
        if os.environ.get(variable)
    }
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(DATA_DIR / "media")},
    },
    "blobs": {"BACKEND": BLOB_STORAGE_BACKEND, "OPTIONS": BLOB_STORAGE_OPTIONS},
    # collectstatic writes a .gz of each text file too (the vendored plotly.js has its own already).
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
FILE_UPLOAD_TEMP_DIR = None
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# Request limits (benchviewer/limits.py): a body over its view's limit is a 413, unread.
MAX_BODY_BYTES = env_int("MAX_BODY_BYTES", DATA_UPLOAD_MAX_MEMORY_SIZE)
MAX_REQUEST_LINE_BYTES = env_int("MAX_REQUEST_LINE_BYTES", 4000)  # below gunicorn's 4,094-byte request line
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# Import limits: a single file, an archive's expanded size and its compression ratio.
IMPORT_MAX_FILE_BYTES = env_int("IMPORT_MAX_FILE_BYTES", 1024 * 1024 * 1024)
IMPORT_MAX_EXPANDED_BYTES = env_int("IMPORT_MAX_EXPANDED_BYTES", 4 * 1024 * 1024 * 1024)
IMPORT_MAX_ARCHIVE_RATIO = env_int("IMPORT_MAX_ARCHIVE_RATIO", 200)
IMPORT_MAX_ARCHIVE_MEMBERS = env_int("IMPORT_MAX_ARCHIVE_MEMBERS", 200_000)
IMPORT_MAX_RUN_ROWS = env_int("IMPORT_MAX_RUN_ROWS", 100_000)  # a run file's rows read as trials (TB1 results.json)
# The largest upload request (streamed to disk as it arrives; bigger is a 413 before any byte is read).
IMPORT_MAX_UPLOAD_BYTES = env_int("IMPORT_MAX_UPLOAD_BYTES", IMPORT_MAX_EXPANDED_BYTES)
# A job's trials are written in batches of up to this many bytes of their files (held in memory, parsed).
IMPORT_BATCH_BYTES = env_int("IMPORT_BATCH_BYTES", 8 * 1024 * 1024)
IMPORT_SPOOL_DIR = DATA_DIR / "spool"

# Live runs (trials/live/): a running trial no event has reached for this long is shown as stalled.
LIVE_STALL_SECONDS = env_int("LIVE_STALL_SECONDS", 120)
# Items one POST of events and steps may carry (a runner sends more in several).
LIVE_MAX_ITEMS = env_int("LIVE_MAX_ITEMS", 10_000)
# Bytes one POST of events and steps may carry; a longer body is a 413 before it is read.
LIVE_MAX_BODY_BYTES = env_int("LIVE_MAX_BODY_BYTES", 16 * 1024 * 1024)
# The longest OTLP body POST /v1/traces reads (after gzip): an exporter batch is far smaller.
OTLP_MAX_BODY_BYTES = env_int("OTLP_MAX_BODY_BYTES", 16 * 1024 * 1024)
# The most spans one POST /v1/traces may carry: what the request path writes well inside gunicorn's
# 30 s (about 2,000 spans a second measured, bench/README.md); 16 MiB holds 500,000 tiny ones.
OTLP_MAX_SPANS_PER_REQUEST = env_int("OTLP_MAX_SPANS_PER_REQUEST", 10_000)
# False: PostgreSQL flushes the commit of an accepted OTLP body within ~0.6 s, after the answer
# (docs/configuration.md: what a database crash may lose); an app crash loses nothing either way.
OTLP_DURABLE_ACCEPT = env_bool("OTLP_DURABLE_ACCEPT", False)
# Seconds a web process keeps a token POST /v1/traces authenticated (core/roles.py): a token revoked
# elsewhere stops working within this; 0: every request asks the database.
OTLP_TOKEN_CACHE_SECONDS = env_int("OTLP_TOKEN_CACHE_SECONDS", 10)
OTLP_MAX_ERROR_CHARS = 4000  # partial_success.error_message: the refused spans named, cut here

# Celery: Redis when REDIS_URL is set; otherwise tasks run in-process (eager).
REDIS_URL = os.environ.get("REDIS_URL", "")
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_IMPORTS = ("trials.live.tasks",)  # (no app's tasks.py, so autodiscovery would miss it)
# With no broker, an import sent from the upload page or the API runs in a thread of the web
# process, so the request answers at once (the tests turn this off to run imports inline).
IMPORTS_IN_THREAD = CELERY_TASK_ALWAYS_EAGER and env_bool("IMPORTS_IN_THREAD", True)
# An import in that thread with no progress for this many seconds is failed, and the next one runs.
IMPORT_STALL_TIMEOUT = env_int("IMPORT_STALL_TIMEOUT", 600)

# Share links (shares/): off, every share link, old and new, answers 404 and none can be made.
SHARING_ENABLED = env_bool("SHARING_ENABLED", True)
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis hands an unacknowledged message (its whole worker vanished) to another worker after this.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)}
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # a worker keeps reconnecting for as long as Redis is away
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False  # an import needs only the database
# Stranded imports are sent again (trials/imports/recovery.py): by beat every IMPORT_RECOVERY_INTERVAL
# seconds (`celery -A benchviewer beat`, or `worker -B`) and by `manage.py requeue_imports`.
IMPORT_RECOVERY_INTERVAL = env_int("IMPORT_RECOVERY_INTERVAL", 60)
IMPORT_QUEUED_GRACE = env_int("IMPORT_QUEUED_GRACE", 60)  # queued this long with no message: lost
# How long `manage.py import_packs` waits for a database that went away (a restart) before giving up.
IMPORT_COMMAND_DATABASE_WAIT = env_int("IMPORT_COMMAND_DATABASE_WAIT", 300)
# How long a running import waits for a database that went away before it stops (it runs again when it is back).
IMPORT_OUTAGE_WAIT = env_int("IMPORT_OUTAGE_WAIT", 300)
IMPORT_LOCK_DIR = DATA_DIR / "import-locks"  # without PostgreSQL: the file locks of running imports
IMPORT_SENT_MARKER_TTL = env_int("IMPORT_SENT_MARKER_TTL", 7 * 24 * 3600)
CELERY_BEAT_SCHEDULE = {
    "requeue-stale-imports": {
        "task": "trials.tasks.requeue_stale_imports",
        "schedule": float(IMPORT_RECOVERY_INTERVAL),
        "options": {"expires": float(IMPORT_RECOVERY_INTERVAL)},  # a sweep stuck behind imports is dropped
    },
    # Comparisons whose message or worker was lost (comparisons/computing/recovery.py).
    "requeue-stale-comparisons": {
        "task": "comparisons.tasks.requeue_stale_comparisons",
        "schedule": float(IMPORT_RECOVERY_INTERVAL),
        "options": {"expires": float(IMPORT_RECOVERY_INTERVAL)},
    },
    # OTLP bodies accepted whose message or worker was lost (trials/live/batches.py).
    "requeue-stale-otlp-batches": {
        "task": "trials.live.tasks.requeue_stale_otlp_batches",
        "schedule": float(IMPORT_RECOVERY_INTERVAL),
        "options": {"expires": float(IMPORT_RECOVERY_INTERVAL)},
    },
    # Pack objects a killed import stored but never recorded, and half-written copies (trials/imports/blobs.py).
    "sweep-storage": {
        "task": "trials.tasks.sweep_storage_task",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
    # Catches up on step text an import's own indexing task did not reach (trials/search.py).
    "index-step-text": {
        "task": "trials.tasks.index_step_text_task",
        "schedule": float(IMPORT_RECOVERY_INTERVAL),
        "options": {"expires": float(IMPORT_RECOVERY_INTERVAL)},
    },
}

REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes an anonymous call a 401 (not 403),
    # without the browser login dialog that Basic's header would open.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.roles.TokenAuthentication",  # DRF's, the user's groups read in the same query
        "rest_framework.authentication.BasicAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Reading needs a login; writing needs the view's right (core/roles.py).
    "DEFAULT_PERMISSION_CLASSES": ["core.roles.RolePermission"],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Benchviewer API",
    "DESCRIPTION": "Import trial packs and read benchmark evidence.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI from our own static files (works offline, and under the CSP).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "TrialStatusEnum": "trials.models.Trial.Status",
        "ImportStatusEnum": "trials.models.Import.Status",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",  # (the default)
        "core.openapi.document_errors",
    ],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
