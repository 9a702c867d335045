"""Settings for the KernelBench leaderboard, read from the environment with local defaults.

A fresh checkout runs as it is: SQLite under var/, a secret key generated into var/secret_key,
DEBUG off. Production overrides live in config/settings_production.py.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from config.env import env_bool, env_int, env_list, env_optional_int, env_str, secret_key_from_file
from config.queues import next_redis_db, rq_queues

BASE_DIR = Path(__file__).resolve().parent.parent
# Everything local and private (database, secret key, uploads) lives under VAR_DIR, created with
# mode 0700 so that evaluated kernels (run as an unprivileged user) cannot read it.
VAR_DIR = Path(env_str("KB_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)

SECRET_KEY = env_str("SECRET_KEY") or secret_key_from_file(VAR_DIR / "secret_key")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

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
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_rq",
    "problems",
    "leaderboard",
]

MIDDLEWARE = [
    "leaderboard.ops.metrics.RequestMetricsMiddleware",  # first, so that it times and counts every request
    "config.middleware.limit_request_body",  # before anything reads a body: 413 over REQUEST_BODY_MAX_BYTES
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.private_per_user",  # before sessions: sees their Set-Cookie; per-user answers private
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.middleware.content_security_policy",
    "config.middleware.reject_control_characters",  # NUL in a query parameter: 400 on pages and API
    "leaderboard.api.throttling.WriteRateMiddleware",  # the API's write limit for page and admin writes
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Workers and the web server write concurrently: wait for locks instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

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
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
# plotly.js comes from the installed plotly package (leaderboard/staticfinders.py): no CDN, no copy in git.
# A host that serves no pages (a GPU host running workers and commands) may go without plotly:
# SERVES_PAGES=0 drops the check that it is installed.
SERVES_PAGES = env_bool("SERVES_PAGES", True)
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "leaderboard.staticfinders.PlotlyFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "config.storage.ForgivingManifestStorage"},
}
# Serve straight from the finders what collectstatic has not gathered yet (see config/storage.py).
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = VAR_DIR / "uploads"

# --- evaluation queues and workers (docs/workers.md) -------------------------------------------
# A worker host sets these in its env file; each process reads them once, at start.
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
# One RQ queue per hardware class (`eval-<hardware slug>`, Hardware.queue_name); a worker on an H200
# host listens to eval-h200, and so on. Listed queues show on the django-rq dashboard; an unlisted
# hardware's queue still works (config/queues.py).
EVAL_QUEUES = env_list("EVAL_QUEUES", ["eval-cpu", "eval-h200", "eval-h100", "eval-l40s"])
EVAL_JOB_TIMEOUT = env_int("EVAL_JOB_TIMEOUT", 1800)  # RQ's hard limit on one job, seconds
RQ_QUEUES = rq_queues(REDIS_URL, EVAL_QUEUES, EVAL_JOB_TIMEOUT)
# `evalworker` (and django-rq's own `rqworker`) run this worker class.
RQ = {"WORKER_CLASS": "leaderboard.evaluations.rq_worker.EvalWorker"}
RQ_SHOW_ADMIN_LINK = True
# The scoring library's budget for one kernel, build included; under the RQ job limit.
EVAL_TIMEOUT_S = env_int("EVAL_TIMEOUT_S", max(30, min(900, EVAL_JOB_TIMEOUT // 2)))
EVAL_MAX_ATTEMPTS = env_int("EVAL_MAX_ATTEMPTS", 3)  # attempts before an evaluation is failed
EVAL_RETRY_BACKOFF_S = env_int("EVAL_RETRY_BACKOFF_S", 30)  # first retry delay; doubles each retry
EVAL_HEARTBEAT_S = env_int("EVAL_HEARTBEAT_S", 10)  # heartbeat period of a running attempt
EVAL_STALE_AFTER_S = env_int("EVAL_STALE_AFTER_S", 60)  # heartbeat age after which an attempt is abandoned
EVAL_SWEEP_INTERVAL_S = env_int("EVAL_SWEEP_INTERVAL_S", 30)  # sweep period
# The sweep leaves QUEUED rows younger than this alone (their on-commit enqueue may be in flight).
EVAL_QUEUED_GRACE_S = env_int("EVAL_QUEUED_GRACE_S", 15)
# Per-user quotas (leaderboard/evaluations/quotas.py; commands run by the server's admins are exempt):
# evaluations one user may have queued or running at once (a verify asking for more is refused
# whole, 429), and UTF-8 bytes of kernel source one user may have stored (409 beyond it).
EVAL_MAX_PENDING_PER_USER = env_int("EVAL_MAX_PENDING_PER_USER", 2000)
KERNEL_SOURCE_MAX_BYTES_PER_USER = env_int("KERNEL_SOURCE_MAX_BYTES_PER_USER", 500_000_000)
# Dotted path of the function that scores a kernel (the integration tests inject a cheap fake).
EVAL_FUNCTION = env_str("EVAL_FUNCTION") or "leaderboard.evaluations.gpu_turn.evaluate_in_turn"
# Hardware kinds ("gpu", "cpu") whose evaluations store the verdict at once and run the reviewer's
# instruments later, in a follow-up job on `instruments-<slug>`, which the same workers take only
# when every evaluation queue is empty (leaderboard/evaluations/follow_up.py). On a GPU they cost
# more than the verdict's timing; on the CPU (development, CI) they are cheap and stay inline.
EVAL_INSTRUMENTS_LATER = frozenset(env_list("EVAL_INSTRUMENTS_LATER", ["gpu"]))
# Passed to the scoring library when set; None leaves the library's own default.
EVAL_CORRECTNESS_TRIALS = env_optional_int("EVAL_CORRECTNESS_TRIALS")
EVAL_TIMING_TRIALS = env_optional_int("EVAL_TIMING_TRIALS")
# CPU cores the timed processes of an evaluation are pinned to, all to the same one, so that kernel
# and reference launch from equally fast cores (docs/measurements.md, "Fidelity"). On a GPU host: one
# core per GPU in GPU order (the worker of GPU i times on the i-th; builds keep off them and their SMT
# siblings); empty: chosen from the CPU topology (leaderboard/evaluations/cores.py, docs/workers.md
# "Cores on a GPU host"). On a host without GPUs: the cores as given; empty: no pinning.
EVAL_CPUS = tuple(int(core) for core in env_list("EVAL_CPUS", []))
EVAL_SIZE_SCALE = env_optional_int("EVAL_SIZE_SCALE")  # problem sizes (KB_SCALE of the catalogue): 16 on an H200
# A worker starts no evaluation while its scratch folder or build cache has less free than this (MB);
# the evaluation waits, and /healthz and queue_status say why (leaderboard/evaluations/host_space.py).
EVAL_MIN_FREE_MB = env_int("EVAL_MIN_FREE_MB", 1024)
# A worker host stops claiming after this many evaluations in a row (distinct ones) ended in its
# infrastructure errors, for EVAL_HOST_SICK_S, then tries one again; a failed write probe of its
# scratch folder or build cache stops it at once. The attempts it burned are given back
# (leaderboard/evaluations/host_space.py).
EVAL_HOST_FAILURE_LIMIT = env_int("EVAL_HOST_FAILURE_LIMIT", 3)
EVAL_HOST_SICK_S = env_int("EVAL_HOST_SICK_S", 600)
# The name a worker host reports its health under (/healthz, queue_status). Empty: its hostname.
EVAL_HOST_NAME = env_str("EVAL_HOST_NAME", "")
# Memory of each sandboxed process tree (proportional set size). Unset: the library's default, from the
# host's memory and worker count (evaluation.sandbox.limits.default_memory_limit_mb reads the same variable).
EVAL_MEMORY_LIMIT_MB = env_optional_int("EVAL_MEMORY_LIMIT_MB")
# Worker processes one `evalworker` runs. Unset: what the host runs well (one per GPU it may use, one
# per 4 CPU cores: evaluation.sandbox.limits.workers_for; docs/workers.md has the measurements).
EVAL_WORKERS = env_optional_int("EVAL_WORKERS")
# Workers per GPU when EVAL_WORKERS is unset. With more than one, they take turns on the GPU
# (leaderboard/evaluations/gpu_turn.py): one evaluates while the next one's sandboxed processes start
# (docs/workers.md, "Workers taking turns on a GPU").
EVAL_WORKERS_PER_GPU = max(1, env_int("EVAL_WORKERS_PER_GPU", 1))
# Look-ahead builds on a GPU host (docs/workers.md, "Builds ahead of the GPUs"): each GPU worker's
# builder compiles the kernels of the next EVAL_BUILD_AHEAD queued evaluations in EVAL_BUILD_WORKERS
# sandboxed CPU processes (None: from the host's cores and GPUs; 0: no builder, each job builds its own).
EVAL_BUILD_WORKERS = env_optional_int("EVAL_BUILD_WORKERS")
EVAL_BUILD_AHEAD = env_int("EVAL_BUILD_AHEAD", 8)
# The build cache, which kernels write to and which would otherwise keep whatever they leave and
# grow without bound: a build that leaves more than EVAL_BUILD_ENTRY_MAX_MB in its entry is not
# published; each worker host's sweeper evicts entries unused for EVAL_BUILD_CACHE_MAX_AGE_DAYS,
# then the least recently used until the cache holds EVAL_BUILD_CACHE_MAX_MB (evaluation.builds.cache_evict).
EVAL_BUILD_ENTRY_MAX_MB = env_int("EVAL_BUILD_ENTRY_MAX_MB", 2048)
EVAL_BUILD_CACHE_MAX_MB = env_int("EVAL_BUILD_CACHE_MAX_MB", 50_000)
EVAL_BUILD_CACHE_MAX_AGE_DAYS = env_int("EVAL_BUILD_CACHE_MAX_AGE_DAYS", 30)

# Cap on one kernel's source, in bytes (uploads, API and forms all use it).
KERNEL_SOURCE_MAX_BYTES = env_int("KERNEL_SOURCE_MAX_BYTES", 1_000_000)
# Caps on uploads (API tables, whole-run zips); see leaderboard/ingest/archives.py for what each bounds.
API_TABLE_MAX_BYTES = env_int("API_TABLE_MAX_BYTES", 5_000_000)
RUN_UPLOAD_MAX_BYTES = env_int("RUN_UPLOAD_MAX_BYTES", 50_000_000)
RUN_RESULTS_MAX_BYTES = env_int("RUN_RESULTS_MAX_BYTES", 20_000_000)
RUN_UNCOMPRESSED_MAX_BYTES = env_int("RUN_UNCOMPRESSED_MAX_BYTES", 200_000_000)
RUN_MAX_ENTRIES = env_int("RUN_MAX_ENTRIES", 20_000)
RUN_MAX_COMPRESSION_RATIO = env_int("RUN_MAX_COMPRESSION_RATIO", 200)  # any one member of a zip
# A zip's members together inflate to at most this many times the zip's size (kernel sources
# compress about 4:1; a 246 KB zip of members each under the per-member cap inflated 800:1 to 200 MB).
RUN_MAX_ARCHIVE_RATIO = env_int("RUN_MAX_ARCHIVE_RATIO", 50)
# Work budgets on request bodies, so that no body costs the server far more work than its size.
# A JSON body's object keys, counted while parsing (a 20,000-kernel run with its results has about
# 200,000).
JSON_MAX_KEYS = env_int("JSON_MAX_KEYS", 500_000)
# An API body's bytes where the route sets no cap of its own (uploads, tables and submissions do:
# leaderboard/api/parsers.py), checked before parsing.
API_BODY_MAX_BYTES = env_int("API_BODY_MAX_BYTES", 100_000)
# Any request body, pages and admin included: refused from Content-Length before anything reads it.
REQUEST_BODY_MAX_BYTES = env_int("REQUEST_BODY_MAX_BYTES", RUN_UPLOAD_MAX_BYTES + 1_000_000)
# Imported, unverified kernels faster than this go to the review queue.
REVIEW_SPEEDUP_THRESHOLD = float(env_str("REVIEW_SPEEDUP_THRESHOLD", "3.0"))
# Kernels whose published speedup (someone else's figure: PublishedFigure) is above this go to the
# review queue, as a claim, and again once measured here: the scoring library's flag threshold
# (evaluation.results.types.EvaluationConfig.speedup_flag_threshold, 10x) unless set otherwise.
REVIEW_PUBLISHED_SPEEDUP_THRESHOLD = float(env_str("REVIEW_PUBLISHED_SPEEDUP_THRESHOLD", "10.0"))
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 50_000_000)
FILE_UPLOAD_MAX_MEMORY_SIZE = 5_000_000

# The problem set the boards (overview, levels, the leaderboard API) open on: a slug or name.
# Empty: the set with the most measured or imported runs (leaderboard/reads/board/featured.py).
FEATURED_PROBLEM_SET = env_str("FEATURED_PROBLEM_SET", "")

# ?page_size= on API lists: at most this many rows a page (larger asks get this many).
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 500)

# How many reverse proxies of ours stand in front of gunicorn (site/nginx/: one). Limits key anonymous
# clients by the X-Forwarded-For entry the outermost of them wrote; 0 ignores the header (gunicorn
# bound to clients directly). More than there are lets a client choose its own key.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0)
# Failed sign-ins per username (whatever the address) before that username is refused for the
# window (leaderboard/ops/sign_in_limit.py); the write limit above also counts sign-ins per address.
SIGN_IN_FAILURE_LIMIT = env_int("SIGN_IN_FAILURE_LIMIT", 10)
SIGN_IN_FAILURE_WINDOW_S = env_int("SIGN_IN_FAILURE_WINDOW_S", 900)
# Checked passwords per username and window, from all addresses together, before the username is
# refused for every address, the owner's too: the most guesses many addresses get (docs/workers.md).
SIGN_IN_GUESS_CEILING = env_int("SIGN_IN_GUESS_CEILING", 5 * SIGN_IN_FAILURE_LIMIT)
AUTHENTICATION_BACKENDS = [
    "leaderboard.ops.sign_in_limit.SignInLimitBackend",  # first: refuses a locked username before any password check
    "django.contrib.auth.backends.ModelBackend",
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.DjangoModelPermissionsOrAnonReadOnly"],
    "DEFAULT_PAGINATION_CLASS": "leaderboard.api.pagination.BoundedPageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Strict JSON (duplicate keys, NaN and deep nesting are 400s) on every JSON route.
    "DEFAULT_PARSER_CLASSES": [
        "leaderboard.api.parsers.StrictJSONParser",
        "leaderboard.api.parsers.BoundedFormParser",
        "leaderboard.api.parsers.BoundedMultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["leaderboard.api.throttling.WriteRateThrottle"],
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,  # for any DRF throttle that keeps DRF's get_ident
    "DEFAULT_THROTTLE_RATES": {
        "writes": env_str("API_WRITE_RATE", "120/min"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "KernelBench leaderboard API",
    "DESCRIPTION": "Read the leaderboard, problems, kernels and evaluations; ingest scores and runs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# The write limit counts in the cache, so every process must share it: Redis when CACHE_REDIS_URL
# (or else REDIS_URL) is set in the environment; local memory (one count per process) only when
# neither is. Anonymous visitors can make the cache grow, so in production it lives in a Redis of
# its own with maxmemory and allkeys-lru (site/compose.yaml), and the queue's Redis (REDIS_URL,
# noeviction) never loses a job to a full cache; `check --deploy` warns when they are one (kb.W012).
# Only the web process uses the cache: worker hosts need no CACHE_REDIS_URL.
CACHE_REDIS_URL = env_str("CACHE_REDIS_URL") or env_str("REDIS_URL")
# The security counters (the write limit, the failed sign-in limit: leaderboard/ops/counters.py)
# must never be evicted, or anonymous traffic that fills the cache lifts them (2,000 anonymous
# board requests evicted an admin's sign-in lockout):
# they live in the "counters" cache, on the queue's Redis (REDIS_URL, noeviction), in the next
# database number (so that clearing them never touches the queue), unless COUNTERS_REDIS_URL names
# another Redis that never evicts. They are few, small and expire with their windows.
COUNTERS_REDIS_URL = env_str("COUNTERS_REDIS_URL") or (
    next_redis_db(env_str("REDIS_URL")) if env_str("REDIS_URL") else ""
)


def _redis_cache(url: str, prefix: str, backend: str = "django.core.cache.backends.redis.RedisCache") -> dict:
    return {
        "BACKEND": backend,
        "LOCATION": url,
        "KEY_PREFIX": prefix,
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }


CACHES = {
    "default": _redis_cache(CACHE_REDIS_URL, "kb")
    if CACHE_REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # A limit never costs a write: while that Redis is down each process counts on its own
    # (leaderboard/ops/counters.py), and says so once in its log.
    "counters": _redis_cache(COUNTERS_REDIS_URL, "kb-counters", "leaderboard.ops.counters.CountersRedisCache")
    if COUNTERS_REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "counters"},
}

# Boards (docs/performance.md, "Boards under writes"): requests are served the last complete build of
# a board; a new result shows within BOARD_FRESHNESS_SECONDS (the window shared caches may keep a
# board too), and a board is rebuilt in the background at most once every BOARD_REBUILD_SECONDS.
BOARD_FRESHNESS_SECONDS = env_int("BOARD_FRESHNESS_SECONDS", 5)
# Whether the site runs the boards' background re-scorer (`manage.py refresh_boards`): writers (the
# web, the GPU workers, imports) then only mark the runs they change, and it re-scores them in
# batches; pages make up only marks older than BOARD_FRESHNESS_SECONDS. Off (a site of one process,
# the tests), each write re-scores its runs after its commit. Set it for every process of the site.
BOARD_RESCORER = env_bool("BOARD_RESCORER", False)
BOARD_REBUILD_SECONDS = env_int("BOARD_REBUILD_SECONDS", 2)
# A board with no kept build is built in the request that asks for it; a request that finds another
# building it waits at most this long (milliseconds) for that build, then is answered "being built"
# (503, Retry-After): only a database too slow to serve pages takes that long (leaderboard/reads/board/served.py).
BOARD_BUILD_BUDGET_MS = env_int("BOARD_BUILD_BUDGET_MS", 20_000)
# The site's address as visitors reach it: the links in the API boards the background re-scorer keeps
# built (leaderboard/ops/kept_boards.py: no visitor's request is there to name the host).
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000")

LOGIN_URL = "review-sign-in"
# Where a sign-in lands when `next` is missing or unsafe (Django's default, /accounts/profile/, is a 404).
LOGIN_REDIRECT_URL = "/"
# The Content-Security-Policy header (config/middleware.py); empty: none. Production sets it.
CONTENT_SECURITY_POLICY = env_str("CONTENT_SECURITY_POLICY", "")

# prometheus_client's multi-process mode: where each gunicorn worker writes its metrics (set by
# site/gunicorn.conf.py; prometheus_client itself reads the same variable). Empty: one process,
# /metrics shows the process that answers.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
# Who may read /metrics (per-view request counts show admin activity) and /healthz's timings and
# errors (others get the status alone): a request with `Authorization: Bearer <METRICS_TOKEN>`
# (when set), or, with METRICS_ALLOW_PRIVATE, one whose client address (leaderboard/ops/clients.py)
# is in PRIVATE_NETWORKS. Behind a proxy set TRUSTED_PROXY_COUNT, else every request seems to come
# from the proxy's private address.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
METRICS_ALLOW_PRIVATE = env_bool("METRICS_ALLOW_PRIVATE", True)
PRIVATE_NETWORKS = env_list(
    "PRIVATE_NETWORKS", ["127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"]
)

# "plain" (one line of text a record) or "json" (one JSON object a record, leaderboard/ops/logs.py).
LOG_FORMAT = env_str("LOG_FORMAT", "plain")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "leaderboard.ops.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json" if LOG_FORMAT == "json" else "plain"}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
