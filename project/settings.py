"""Settings of the demo project. Deployment settings come from the environment.

DJANGO_DEBUG, DJANGO_SECRET_KEY, ALLOWED_HOSTS (comma-separated), DJANGO_HTTPS (served
over HTTPS behind a TLS proxy: secure cookies, HSTS, the redirect), DATABASE_URL
(sqlite:///path or postgres://user:pass@host:port/name; SQLite by default),
REDIS_URL (a Redis channel layer; in-memory without it), and the MCP_* variables
that fill MCP_DJANGO.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def database_from_url(url: str) -> dict[str, object]:
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        name = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path) or ":memory:"
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": name,
            "CONN_MAX_AGE": int(os.environ.get("DJANGO_CONN_MAX_AGE", "60")),
            "CONN_HEALTH_CHECKS": True,
            # A file shared by the server and the task worker (two processes): a transaction
            # takes the write lock when it starts, and waits for it, rather than failing with
            # "database is locked" when a read inside it turns into a write.
            # WAL with synchronous=NORMAL: a commit appends to the log, with no journal file
            # made, synced and removed each time. The audit writer commits a batch every
            # 20 ms under load, and that journal was half of its CPU a row (bench/HISTORY.md).
            # A crash of the process loses nothing committed; a power cut may lose the last
            # commits (never the file's consistency).
            **(
                {
                    "OPTIONS": {
                        "transaction_mode": "IMMEDIATE",
                        "timeout": 20,
                        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
                    }
                }
                if name != ":memory:"
                else {}
            ),
        }
    if parts.scheme in ("postgres", "postgresql", "pgsql"):
        # DJANGO_DB_POOL_MAX=N: a psycopg pool of at most N connections per process
        # (docs/deployment.md), instead of one persistent connection per thread.
        pool_max = int(os.environ.get("DJANGO_DB_POOL_MAX", "0"))
        # timeout: how long a request may wait for a busy pool. reconnect_timeout: how long
        # the pool keeps retrying one failed connection (backing off 1 s, 2 s, 4 s...)
        # before giving it up; past that, the next request that needs one connects at
        # once, so a database back from an outage is used at once (its 300 s default let
        # the first success wait out the backoff: up to 10 s measured).
        pool = (
            {"pool": {"min_size": 1, "max_size": pool_max, "timeout": 10, "reconnect_timeout": 0.5}} if pool_max else {}
        )
        return {
            # Django's backend, failing at once while the database refuses connections
            # (instead of each request waiting out connect_timeout or the pool's timeout).
            "ENGINE": "mcp_django.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            # A pool lends connections per task: persistent ones would defeat it (Django refuses both).
            "CONN_MAX_AGE": 0 if pool_max else int(os.environ.get("DJANGO_CONN_MAX_AGE", "60")),
            "CONN_HEALTH_CHECKS": True,
            # A database that refuses or hangs costs a request seconds, not forever:
            # connecting gives up after connect_timeout, a statement after statement_timeout.
            "OPTIONS": {
                "connect_timeout": int(os.environ.get("DJANGO_DB_CONNECT_TIMEOUT", "2")),
                "options": f"-c statement_timeout={int(os.environ.get('DJANGO_DB_STATEMENT_TIMEOUT_MS', '30000'))}",
                **pool,
            },
        }
    raise ValueError(f"DATABASE_URL: unsupported scheme {parts.scheme!r}")


DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-insecure-demo-only-change-me-0123456789abcdef")
ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()
]
# Served over HTTPS, a TLS proxy (nginx) in front: what `manage.py check --deploy` asks for
# (docs/deployment.md). The proxy says the scheme in X-Forwarded-Proto (it must set it, never
# pass a client's on), so request.scheme, the endpoint's resource URL and the redirect are right.
if env_bool("DJANGO_HTTPS", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", True)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "oauth2_provider",
    "channels",
    "mcp_django",
    # The database backend of Django's task framework: MCP tasks run in `manage.py mcp_worker`.
    "django_tasks_db",
    # project.conformance (the conformance suite's test_* fixtures) is added by
    # project/conformance/settings.py, which `make conformance` and the tests use.
    "project.demo",
    "django_filters",
    "project.shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS) under uvicorn/daphne: with DEBUG from the apps'
    # static folders, otherwise from STATIC_ROOT after `manage.py collectstatic`.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # The authorization server's parameters never hold a NUL, which PostgreSQL refuses (a 500).
    "mcp_django.contrib.oauth.refuse_nul",
]

ROOT_URLCONF = "project.urls"
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
            ]
        },
    }
]
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

# Django's task framework: MCP tasks (docs/tasks.md) are enqueued here and run by
# `manage.py mcp_worker` (db_worker kept alive through outages), which `make run` starts next to the server.
TASKS: dict[str, dict[str, Any]] = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
# Or RQ on a Redis of its own (django-tasks-rq; its worker: manage.py rqworker --job-class
# django_tasks_rq.Job): MCP_TASKS_RQ_URL=redis://... (docs/tasks.md, tests/test_tasks_rq.py).
if os.environ.get("MCP_TASKS_RQ_URL"):
    INSTALLED_APPS += ["django_rq", "django_tasks_rq"]
    TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend", "QUEUES": ["default"]}}
    RQ_QUEUES = {"default": {"URL": os.environ["MCP_TASKS_RQ_URL"], "DEFAULT_TIMEOUT": 3600}}

DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL")
# Keys in Redis start with this, so several deployments (or test runs) can share one server.
REDIS_PREFIX = os.environ.get("REDIS_PREFIX", "asgi")
CHANNEL_LAYERS = (
    {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # socket_timeout above the layer's 5 s blocking read: an idle read ends
            # quietly on Redis's side instead of raising in the client (redis-py 8's
            # default is 5 s); socket_connect_timeout bounds a Redis that is down.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 10, "socket_connect_timeout": 1}],
                "prefix": REDIS_PREFIX,
            },
        }
    }
    if REDIS_URL
    else {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
)
# Legacy MCP sessions keep their shared state (ended, log level) in the cache:
# with several processes it must be a shared one.
CACHES = (
    {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": REDIS_PREFIX,
            # MCP_DJANGO["SESSION_CACHE_TIMEOUT"] (0.75 s) answers a request first; this bounds
            # how long a thread stays on a hung Redis after that.
            "OPTIONS": {"socket_timeout": 1, "socket_connect_timeout": 1},
        }
    }
    if REDIS_URL
    else {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}

MCP_DJANGO: dict[str, Any] = {
    # Unset: None, the keys derive from SECRET_KEY. Set empty (exported from a command that
    # failed) or short: refused (mcp_django.E017), not taken as unset.
    "REQUEST_STATE_KEY": os.environ.get("MCP_REQUEST_STATE_KEY"),
    "ENCRYPT_REQUEST_STATE": env_bool("MCP_ENCRYPT_REQUEST_STATE", False),
    "REQUEST_STATE_LIFETIME": int(os.environ.get("MCP_REQUEST_STATE_LIFETIME", "600")),
    "MAX_REQUEST_STATE_BYTES": int(os.environ.get("MCP_MAX_REQUEST_STATE_BYTES", str(64 * 1024))),
    # The demo lets anonymous callers in (the app's default is off).
    "ALLOW_ANONYMOUS": env_bool("MCP_ALLOW_ANONYMOUS", True),
    # MCP authorization: the demo is its own OAuth 2.1 authorization server (django-oauth-toolkit,
    # mounted at /o/), and /mcp accepts its access tokens besides sessions and DRF tokens.
    "AUTHORIZATION_SERVERS": ["/o"],
    "REQUIRED_SCOPES": ["mcp"],
    "AUTHENTICATION_CLASSES": [
        "mcp_django.auth.SessionAuthentication",
        # Before the other Bearer class: it answers only for its own mcp_... tokens.
        "mcp_django.tokens.auth.MCPTokenAuthentication",
        "rest_framework.authentication.TokenAuthentication",
        "mcp_django.contrib.oauth.OAuth2Authentication",
    ],
    # DPoP-bound tokens (RFC 9449, docs/authorization.md): "off", "allowed" or "required".
    "DPOP": os.environ.get("MCP_DPOP", "allowed"),
    "AUTH_TIMEOUT": float(os.environ.get("MCP_AUTH_TIMEOUT", "10")),
    "AUTH_CACHE_SECONDS": float(os.environ.get("MCP_AUTH_CACHE_SECONDS", "1")),
    # MCP tasks (docs/tasks.md): how long a task is kept, and how long a silent worker is trusted.
    "TASK_TTL_MS": int(os.environ.get("MCP_TASK_TTL_MS", "3600000")),
    "TASK_LEASE_SECONDS": float(os.environ.get("MCP_TASK_LEASE_SECONDS", "30")),
    # Rate limits and caps (docs/limits.md), as JSON: MCP_LIMITS='{"RATES": {"user": "100/min"}}'.
    "LIMITS": json.loads(os.environ.get("MCP_LIMITS") or "{}"),
    "TASK_RETRIES": int(os.environ.get("MCP_TASK_RETRIES", "2")),
    "SERVER_NAME": "mcp-django-demo",
    "SERVER_TITLE": "mcp-django demo",
    "SERVER_DESCRIPTION": "A small shop and a few demo tools, served over MCP by a Django project.",
    "SERVER_WEBSITE_URL": "https://github.com/mcp-django/mcp-django",
    # A static file: its URL comes from the staticfiles storage (WhiteNoise's in production).
    "SERVER_ICONS": [{"src": "mcp_django/icons/server.svg", "sizes": ["any"]}],
    "INSTRUCTIONS": "A demo Django project served over MCP by mcp-django.",
    # A second endpoint, /staff/mcp (project/shop/staff.py): the staff's tools, for the admin's
    # session or an MCP token only. Not an OAuth protected resource, and never anonymous.
    "ENDPOINTS": {
        "staff": {
            "ALLOW_ANONYMOUS": False,
            "AUTHENTICATION_CLASSES": [
                "mcp_django.auth.SessionAuthentication",
                "mcp_django.tokens.auth.MCPTokenAuthentication",
            ],
            "AUTHORIZATION_SERVERS": [],
            "REQUIRED_SCOPES": [],
        },
    },
}

# The authorization server (django-oauth-toolkit) with what MCP clients need: RFC 8414
# metadata, PKCE with S256 only, dynamic client registration (RFC 7591) open to any client
# (the consent screen is where a person decides), client ID metadata documents, and RFC 8707
# resource indicators (the toolkit records them on the token; mcp-django checks them).
OAUTH2_PROVIDER = {
    "SCOPES": {"mcp": "Use this project's MCP tools", "shop": "Read and change your orders in the demo shop"},
    "DEFAULT_SCOPES": ["mcp"],
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("OAUTH_ACCESS_TOKEN_SECONDS", "3600")),
    # RFC 9700 (check --deploy's oauth2_provider.W006, W007): access and refresh tokens stored
    # as SHA-256 checksums only, and a replayed refresh token revokes its whole family. The
    # COMPLIANT_BCP_RFC9700_REFRESH_TOKEN gate makes turning the protection off an error.
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    # A token is good only at the one resource it was issued for (RFC 8707, exact and in
    # canonical form): the toolkit's default takes a resource as a URL prefix, so a token
    # for the whole origin would be good at /mcp and every other endpoint here.
    "RESOURCE_SERVER_TOKEN_RESOURCE_VALIDATOR": "mcp_django.contrib.oauth.resource_matches",
    # RFC 9700's other recommendations (check --deploy's oauth2_provider.W001, W002, W004, W005):
    # no implicit or password grant (MCP clients use the code flow with PKCE), access tokens in
    # the Authorization header only (never in a URL, which logs keep), and the RFC 9207 iss in
    # every authorization response (a client talking to several servers tells them apart; the
    # mcp SDK's callback handler must hand it back, docs/authorization.md).
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    # What the toolkit does not do itself (project/authserver.py): DPoP-bound tokens, the
    # client-credentials principal and its scopes, the jwt-bearer grant for ID-JAGs.
    "OAUTH2_VALIDATOR_CLASS": "project.authserver.Validator",
    "SCOPES_BACKEND_CLASS": "project.authserver.Scopes",
    "OAUTH2_SERVER_CLASS": "project.authserver.Server",
}
# Client credentials (project/authserver.py Scopes): the scopes each machine client (by client
# id, "*" for any other) may get. Such a client acts for the account that registered it.
OAUTH_CLIENT_CREDENTIALS_SCOPES: dict[str, list[str]] = {"*": ["mcp"]}
# Enterprise-managed authorization (project/idjag.py): the identity providers whose ID-JAGs are
# taken, issuer -> {"jwks_uri": URL} or {"jwks": {...}}, as JSON; and the hook that finds the user.
ID_JAG_ISSUERS: dict[str, dict[str, Any]] = json.loads(os.environ.get("ID_JAG_ISSUERS", "{}"))
ID_JAG_USER = "project.idjag.user_for_assertion"
# oauth2_provider.W008 (http redirect URIs allowed) stays off on purpose: MCP clients are
# mostly native apps that receive the code on a loopback http://127.0.0.1:<port> redirect
# (RFC 8252 section 7.3), which removing "http" would refuse. See docs/authorization.md.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
# The consent screen asks a signed-in user; the admin's login page signs them in.
LOGIN_URL = "/admin/login/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    # psycopg-pool logs each failed reconnection attempt; while the database's breaker is
    # open it has said so once already, so those lines are dropped until it closes.
    # A request with a Host outside ALLOWED_HOSTS (a scanner's, mostly) is one line, not
    # Django's traceback: mcp_django.log_lines.OneLine drops it from Django's own record.
    "filters": {
        "database_outage": {"()": "mcp_django.lifecycle.QuietDuringOutage"},
        "one_line": {"()": "mcp_django.log_lines.OneLine"},
    },
    "loggers": {
        "mcp_django": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "WARNING")},
        "psycopg.pool": {"filters": ["database_outage"]},
        "django.security.DisallowedHost": {"filters": ["one_line"]},
    },
}
