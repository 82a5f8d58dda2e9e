"""The ``MCP_DJANGO`` settings dict, read through one object: ``mcp_settings.NAME``.

Every setting is one line of :class:`MCPSettings`: its default and the coercer that checks
and converts the project's value (or raises ``InvalidSetting`` saying what was expected),
whose return type is the setting's. To add one, add its line there and a row to the table
in docs/index.md: the system checks then report a wrong value or a misspelt key.
Values are read from ``django.conf.settings`` on first use and kept until Django reports
that ``MCP_DJANGO`` changed.
"""

from __future__ import annotations

import difflib
import inspect
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar, overload
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

__all__ = ["DEPRECATED", "mcp_settings"]

T = TypeVar("T")


class InvalidSetting(ValueError):
    """A value a coercer refuses: the message says what was expected, ``check_id`` which check reports it."""

    def __init__(self, message: str, check_id: str = "mcp_django.E010") -> None:
        super().__init__(message)
        self.check_id = check_id


# The shortest REQUEST_STATE_KEY accepted, in bytes (HMAC-SHA256's and AES-256's key size).
MIN_KEY_BYTES = 32


def _described(value: Any) -> str:
    """A refused value for the message: its type, then its repr (cut short)."""
    return f"{type(value).__name__} {value!r}"[:120]


def _did_you_mean(unknown: list[Any], known: Any) -> str:
    guesses = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
        if close:
            guesses.append(f"{key!r}: did you mean {close[0]!r}?")
    return f" ({'; '.join(guesses)})" if guesses else ""


# -- coercers ---------------------------------------------------------------------------


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidSetting(f"must be True or False, not {_described(value)}")
    return value


def _whole(value: Any, minimum: int) -> int:
    # bool is an int in Python, and True rounds is surely a mistake.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "a whole number above 0" if minimum > 0 else "a whole number, 0 or more"
        raise InvalidSetting(f"must be {what}, not {_described(value)}")
    return value


def positive_int(value: Any) -> int:
    return _whole(value, 1)


def non_negative_int(value: Any) -> int:
    return _whole(value, 0)


def seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidSetting(f"must be a number of seconds (an int or a float, 0 or more), not {_described(value)}")
    return float(value)


def text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidSetting(f"must be a non-empty str, not {_described(value)}")
    return value


def optional(coerce: Callable[[Any], T]) -> Callable[[Any], T | None]:
    """``coerce``, with None allowed too."""
    return lambda value: None if value is None else coerce(value)


def one_of(*choices: str) -> Callable[[Any], str]:
    def coerce(value: Any) -> str:
        if value not in choices:
            raise InvalidSetting(f"must be one of {', '.join(map(repr, choices))}, not {_described(value)}")
        return value

    return coerce


def _sequence(value: Any, what: str) -> list[Any]:
    # A str is a sequence too, and would be read one character at a time.
    if not isinstance(value, (list, tuple)):
        raise InvalidSetting(f"must be a list of {what}, not {_described(value)}")
    return list(value)


def secrets(value: Any) -> list[bytes] | None:
    """One secret or a list (the first seals, every one verifies); None: keys derived from SECRET_KEY.

    An empty or short secret is refused (E017), not taken as "unset": a variable exported
    empty by a failed command must stop the deployment, and an old short key in a list
    would still verify forged states.
    """
    if value is None:
        return None
    values = value if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise InvalidSetting(
            "is an empty list: give it a secret, or None to derive the keys from SECRET_KEY", "mcp_django.E017"
        )
    out = []
    for i, item in enumerate(values):
        if not isinstance(item, (str, bytes)):
            raise InvalidSetting(f"must be a str or bytes secret, or a list of them, not {_described(item)}")
        secret = item.encode() if isinstance(item, str) else bytes(item)
        if len(secret) < MIN_KEY_BYTES:
            where = f"key at position {i}" if isinstance(value, (list, tuple)) else "key"
            what = "empty (an environment variable exported empty?)" if not secret else f"{len(secret)} bytes"
            raise InvalidSetting(
                f"{where} is {what}: at least {MIN_KEY_BYTES} bytes are needed "
                "(python manage.py mcp_generate_key prints one; None derives the keys from SECRET_KEY)",
                "mcp_django.E017",
            )
        out.append(secret)
    return out


def _imported(item: str, check_id: str) -> Any:
    try:
        return import_string(item)
    except ImportError as exc:
        raise InvalidSetting(f"names {item!r}, which cannot be imported: {exc}", check_id) from None


def classes(value: Any) -> list[type]:
    out = []
    for item in _sequence(value, "dotted paths of DRF authentication classes"):
        if not isinstance(item, (type, str)):
            raise InvalidSetting(f"must list dotted paths of classes, not {_described(item)}")
        out.append(item if isinstance(item, type) else _imported(item, "mcp_django.E007"))
    return out


def _function(item: Any, takes: str, check_id: str) -> Callable[..., Any]:
    """A dotted path (or the callable itself) to a function called with two arguments."""
    found = _imported(item, check_id) if isinstance(item, str) else item
    if not callable(found):
        raise InvalidSetting(f"must name callables taking {takes}, not {_described(item)}", check_id)
    try:
        inspect.signature(found).bind(None, None)
    except TypeError:
        raise InvalidSetting(f"names {item!r}, which does not take {takes}", check_id) from None
    except ValueError:
        pass  # no signature to read (a builtin): called as it is
    return found


def stages(value: Any) -> list[Callable[..., Any]]:
    """``PIPELINE``: stages ``stage(call, call_next)``, outermost first; the two are passed by name."""
    found = []
    for item in _sequence(value, "dotted paths of pipeline stages"):
        stage = _function(item, "(call, call_next)", "mcp_django.E020")
        try:
            names = set(inspect.signature(stage).parameters)
        except ValueError:
            names = {"call", "call_next"}
        if not {"call", "call_next"} <= names:
            raise InvalidSetting(f"names {item!r}, whose arguments are not named call and call_next", "mcp_django.E020")
        found.append(stage)
    return found


def exception_handler(value: Any) -> Callable[..., Any]:
    return _function(value, "(exc, call)", "mcp_django.E021")


def extension_modules(value: Any) -> list[str]:
    """``EXTENSIONS``: dotted paths of modules with a ``register()`` (mcp_django.extensions)."""
    out = []
    for item in _sequence(value, "dotted paths of extension modules"):
        if not isinstance(item, str):
            raise InvalidSetting(f"must list dotted paths of modules, not {_described(item)}", "mcp_django.E022")
        try:
            register = import_string(f"{item}.register")
        except ImportError as exc:
            raise InvalidSetting(
                f"names {item!r}, which is no module with a register() function: {exc}", "mcp_django.E022"
            ) from None
        if not callable(register):
            raise InvalidSetting(f"names {item!r}, whose register is not a function", "mcp_django.E022")
        out.append(item)
    return out


def origins(value: Any) -> list[str]:
    out = []
    for item in _sequence(value, 'origins such as "https://app.example"'):
        if item == "*":
            out.append(item)
            continue
        if not isinstance(item, str):
            raise InvalidSetting(f'must list origins such as "https://app.example", not {_described(item)}')
        parts = urlsplit(item)
        # A browser's Origin header is scheme://host[:port]: any other spelling would never match.
        if not parts.scheme or not parts.netloc or parts.path or parts.query or parts.fragment:
            raise InvalidSetting(
                f"has {item!r}, which is not an origin: write it as scheme://host[:port] "
                f'(e.g. "https://{parts.netloc or parts.path.split("/")[0] or "app.example"}"), '
                "without a path or a trailing slash",
                "mcp_django.E011",
            )
        out.append(f"{parts.scheme.lower()}://{parts.netloc.lower()}")
    return out


def urls(value: Any) -> list[str]:
    """Absolute URLs, or paths on this server (resolved against each request's host)."""
    out = []
    for item in _sequence(value, 'URLs such as "https://auth.example"'):
        if not isinstance(item, str) or not (item.startswith("/") or urlsplit(item).scheme in ("http", "https")):
            raise InvalidSetting(f'must list http(s) URLs or paths starting with "/", not {_described(item)}')
        out.append(item.rstrip("/") or "/")
    return out


def web_url(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc:
        raise InvalidSetting(f'must be an http(s) URL such as "https://shop.example", not {_described(value)}')
    return value


def icon_list(value: Any) -> tuple[Any, ...]:
    """Icons as the decorators take them (static paths, URLs, dicts); checked here, URLs resolved on use."""
    from .icons import icons

    try:
        return icons(_sequence(value, "icons (static paths, URLs or dicts)"), "SERVER_ICONS")
    except ImproperlyConfigured as exc:
        raise InvalidSetting(str(exc).removeprefix("SERVER_ICONS: ")) from None


def folders(value: Any) -> list[Path]:
    out = []
    for item in _sequence(value, "folders (str or pathlib.Path)"):
        if not isinstance(item, (str, os.PathLike)) or not str(item):
            raise InvalidSetting(f"must list folders as str or pathlib.Path, not {_described(item)}")
        out.append(Path(item))
    return out


def strings(value: Any) -> list[str]:
    out = _sequence(value, "str")
    for item in out:
        if not isinstance(item, str) or not item:
            raise InvalidSetting(f"must list non-empty str values, not {_described(item)}")
    return out


# Asymmetric JWS algorithms a DPoP proof may be signed with (RFC 9449 section 4.2: never
# "none" nor a MAC, whose key the server would have to share).
DPOP_ASYMMETRIC = ("ES256", "ES384", "ES512", "EdDSA", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512")


def dpop_algorithms(value: Any) -> list[str]:
    out = strings(value)
    if not out or any(alg not in DPOP_ASYMMETRIC for alg in out):
        raise InvalidSetting(
            f"must list asymmetric JWS algorithms among {', '.join(DPOP_ASYMMETRIC)}, not {_described(value)}"
        )
    return out


def _keyed(value: Any, known: Any, check_id: str) -> dict[Any, Any]:
    """A dict setting's value (None: empty), refused unless a dict of ``known`` keys: a misspelt
    key would silently leave the default in force."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidSetting(f"must be a dict with the keys {', '.join(known)}, not {_described(value)}", check_id)
    unknown = sorted(set(value) - set(known), key=str)
    if unknown:
        raise InvalidSetting(
            f"has unknown key(s): {', '.join(map(str, unknown))}{_did_you_mean(unknown, known)}; "
            f"the keys are {', '.join(known)}",
            check_id,
        )
    return value


def _sub_settings(
    defaults: dict[str, Any], coercers: dict[str, Callable[[Any], Any]], check_id: str
) -> Callable[[Any], dict[str, Any]]:
    """The coercer of a dict setting whose keys given override ``defaults`` one by one."""

    def coerce(value: Any) -> dict[str, Any]:
        out = dict(defaults)
        for key, raw in _keyed(value, defaults, check_id).items():
            try:
                out[key] = coercers[key](raw)
            except InvalidSetting as exc:
                sep = "" if str(exc).startswith("[") else " "  # ['RATES']['user']: a nested key
                raise InvalidSetting(f"[{key!r}]{sep}{exc}", check_id) from None
        return out

    return coerce


AUDIT_DEFAULTS: dict[str, Any] = {
    # False: write no rows at all (a project may keep only its own signal receivers).
    "ENABLED": True,
    # A row per input_required round (input-request keys and methods).
    "ROUNDS": True,
    # A row per finished tools/call, prompts/get, resources/read (completed, failed, cancelled).
    "CALLS": True,
    # A row per legacy server-to-client request and its outcome.
    "ASKS": True,
    # A row per refused requestState, missing capability or call a limit refused, committed
    # before the client is answered.
    "REFUSALS": True,
    # The most rows the background writer inserts in one statement.
    "BATCH_SIZE": 500,
    # The most rows waiting to be written; rows beyond it are dropped, counted and logged (W020).
    "QUEUE_SIZE": 100_000,
    # False: round, call and ask rows too are committed before the response (one more round
    # trip per call, but nothing written after a test has ended: in-memory SQLite wants this).
    "ASYNC_WRITES": True,
}
audit = _sub_settings(
    AUDIT_DEFAULTS,
    {key: boolean for key in AUDIT_DEFAULTS} | {"BATCH_SIZE": positive_int, "QUEUE_SIZE": positive_int},
    "mcp_django.E008",
)


def rates(value: Any) -> dict[str, Any]:
    """Scope -> :class:`~mcp_django.limits.rates.Rate`; a scope's None switches it off, as in DRF."""
    from .limits.rates import SCOPES, parse

    if not isinstance(value, dict):
        raise InvalidSetting(f"must be a dict of scope -> rate, not {_described(value)}")
    out = {}
    for scope, rate in value.items():
        if scope not in SCOPES:
            raise InvalidSetting(
                f"has the scope {scope!r}{_did_you_mean([scope], SCOPES)}; the scopes are {', '.join(SCOPES)}"
            )
        if rate is not None:
            try:
                out[scope] = parse(rate)
            except ValueError as exc:
                raise InvalidSetting(f"[{scope!r}]: {exc}") from None
    return out


LIMITS_DEFAULTS: dict[str, Any] = {
    # Scope -> rate ("100/min"): "user" (each principal; anonymous callers by address),
    # "token" (each credential), "tool" (each principal on each tool, prompt or resource),
    # "endpoint" (every caller of an endpoint together). See docs/limits.md.
    "RATES": {},
    # DRF throttle classes (dotted paths) asked too, each call: allow_request(request, handler).
    "CLASSES": [],
    # The Django cache the counts are kept in: a shared one (Redis) when several instances serve.
    "CACHE": "default",
    # Seconds a call waits for that cache before WHEN_CACHE_DOWN applies.
    "CACHE_TIMEOUT": 0.75,
    # While the cache is away: "open" serves calls uncounted, "closed" refuses them (503).
    "WHEN_CACHE_DOWN": "open",
    # The most legacy asks one principal may have open at once (None: no cap).
    "MAX_OPEN_ASKS": None,
    # The most MCP tasks one principal may have unfinished (None: no cap).
    "MAX_OPEN_TASKS": None,
}
limits = _sub_settings(
    LIMITS_DEFAULTS,
    {
        "RATES": rates,
        "CLASSES": classes,
        "CACHE": text,
        "CACHE_TIMEOUT": seconds,
        "WHEN_CACHE_DOWN": one_of("open", "closed"),
        "MAX_OPEN_ASKS": optional(positive_int),
        "MAX_OPEN_TASKS": optional(positive_int),
    },
    "mcp_django.E050",
)


# The settings one endpoint may set for itself in MCP_DJANGO["ENDPOINTS"][name]: who may
# call it and how it is an OAuth protected resource. The rest belong to the process.
ENDPOINT_KEYS = (
    "ALLOW_ANONYMOUS",
    "AUTHENTICATION_CLASSES",
    "AUTHORIZATION_SERVERS",
    "RESOURCE_URL",
    "REQUIRED_SCOPES",
    "SCOPES_SUPPORTED",
    "DPOP",
)
# An endpoint's name: in audit rows, session ids and the admin, so short and plain.
ENDPOINT_NAME_MAX = 64


def endpoint_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name an endpoint, or None."""
    if not isinstance(name, str) or not name or len(name) > ENDPOINT_NAME_MAX:
        return f"an endpoint's name is a str of 1 to {ENDPOINT_NAME_MAX} characters, not {_described(name)}"
    if not all(c.isascii() and (c.isalnum() or c in "_-") for c in name):
        return f"an endpoint's name may use only ASCII letters, digits, '_' and '-', not {name!r}"
    return None


def endpoints(value: Any) -> dict[str, dict[str, Any]]:
    """Endpoint name -> its overrides of the ``ENDPOINT_KEYS`` settings, each checked by that setting's coercer."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidSetting(
            f"must be a dict of endpoint name -> dict of settings, not {_described(value)}", "mcp_django.E013"
        )
    out: dict[str, dict[str, Any]] = {}
    for name, overrides in value.items():
        problem = endpoint_name_problem(name)
        if problem is not None:
            raise InvalidSetting(f"has a key that is no endpoint name: {problem}", "mcp_django.E013")
        if not isinstance(overrides, dict):
            raise InvalidSetting(
                f"[{name!r}] must be a dict of settings, not {_described(overrides)}", "mcp_django.E013"
            )
        unknown = sorted(set(overrides) - set(ENDPOINT_KEYS), key=str)
        if unknown:
            raise InvalidSetting(
                f"[{name!r}] has key(s) an endpoint cannot set: {', '.join(map(str, unknown))}"
                f"{_did_you_mean(unknown, ENDPOINT_KEYS)}; an endpoint sets {', '.join(ENDPOINT_KEYS)}",
                "mcp_django.E013",
            )
        out[name] = {}
        for key, raw in overrides.items():
            try:
                out[name][key] = SETTINGS[key].coerce(raw)
            except InvalidSetting as exc:
                # The setting's own check id (an unimportable class stays E007).
                raise InvalidSetting(f"[{name!r}][{key!r}] {exc}", exc.check_id) from None
    return out


# -- the table ---------------------------------------------------------------------------


class Setting(Generic[T]):
    """One setting: its default, and the coercer of the project's value (whose return type is
    the setting's). Read on an :class:`MCPSettings`, coerced once and then kept on it."""

    def __init__(self, default: Any, coerce: Callable[[Any], T]) -> None:
        self.default = default
        self.coerce = coerce

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Setting[T]: ...
    @overload
    def __get__(self, obj: MCPSettings, owner: type) -> T: ...
    def __get__(self, obj: MCPSettings | None, owner: type) -> Setting[T] | T:
        return self if obj is None else obj.coerced(self)


def user_settings() -> dict[str, Any]:
    value = getattr(settings, "MCP_DJANGO", None)
    return value if isinstance(value, dict) else {}


# Old spellings still read, each with a DeprecationWarning when it takes effect: the old key,
# its new spelling and the release that removes it (docs/api.md, "Deprecation policy").
DEPRECATED: dict[str, tuple[str, str]] = {"AUDIT_ROUNDS": ('MCP_DJANGO["AUDIT"]["ROUNDS"]', "0.3.0")}


class MCPSettings:
    """Typed access to ``settings.MCP_DJANGO`` merged over the defaults: one line per setting."""

    # Secret(s) the requestState keys derive from; a list rotates keys (the first seals, every
    # one verifies). None: derived from SECRET_KEY and SECRET_KEY_FALLBACKS.
    REQUEST_STATE_KEY = Setting(None, secrets)
    # Seal requestState with AES-256-GCM (unreadable) instead of signing it with HMAC-SHA256.
    ENCRYPT_REQUEST_STATE = Setting(False, boolean)
    # Seconds a requestState stays valid after it is issued.
    REQUEST_STATE_LIFETIME = Setting(600, non_negative_int)
    # A longer requestState is refused before anything decodes it.
    MAX_REQUEST_STATE_BYTES = Setting(64 * 1024, positive_int)
    # The most input_required rounds one request may take.
    MAX_INPUT_ROUNDS = Setting(10, non_negative_int)
    # Seconds an attempt with a branch parked on an ask waits for its other branches to ask too.
    ROUND_GATHER_TIMEOUT = Setting(2.0, seconds)
    # Serve callers that present no credentials, as the anonymous principal.
    ALLOW_ANONYMOUS = Setting(False, boolean)
    # DRF authentication classes (dotted paths), tried in order.
    AUTHENTICATION_CLASSES = Setting(
        ["mcp_django.auth.SessionAuthentication", "rest_framework.authentication.TokenAuthentication"], classes
    )
    # Seconds an authenticated principal is remembered by its credentials (0: off); over 1,
    # hits check the user's version in SESSION_CACHE. See mcp_django.auth_cache.
    AUTH_CACHE_SECONDS = Setting(1, seconds)
    # The authorization servers whose access tokens the endpoint accepts, named in its
    # protected-resource metadata (RFC 9728). Empty: not an OAuth protected resource.
    AUTHORIZATION_SERVERS = Setting([], urls)
    # The endpoint's canonical URL, the tokens' audience (RFC 8707). None: from each request.
    RESOURCE_URL = Setting(None, optional(text))
    # Scopes every access token must carry to use the endpoint at all (a handler's add to them).
    REQUIRED_SCOPES = Setting([], strings)
    # The scopes the metadata lists (None: REQUIRED_SCOPES and every scope a handler requires).
    SCOPES_SUPPORTED = Setting(None, optional(strings))
    # DPoP (RFC 9449): "off", "allowed" (bound tokens with their proofs, bearer tokens too)
    # or "required" (only bound tokens). See mcp_django.contrib.dpop.
    DPOP = Setting("off", one_of("off", "allowed", "required"))
    # The JWS algorithms a DPoP proof may use (asymmetric only), advertised in the metadata.
    DPOP_ALGORITHMS = Setting(["ES256", "ES384", "EdDSA", "PS256", "RS256"], dpop_algorithms)
    # Seconds a proof's iat may differ from the server's clock, either way; its jti is
    # remembered in SESSION_CACHE for twice this, so a proof is never accepted twice.
    DPOP_PROOF_WINDOW = Setting(300, seconds)
    # Seconds a server-issued DPoP nonce is good for (RFC 9449 section 8); 0: no nonce asked.
    DPOP_NONCE_SECONDS = Setting(0, non_negative_int)
    # Seconds a request waits for the authentication classes before it is answered 503.
    AUTH_TIMEOUT = Setting(10, seconds)
    # Browser origins (scheme://host[:port]) allowed besides the endpoint's own; "*" allows any.
    ALLOWED_ORIGINS = Setting([], origins)
    # The largest request body accepted, in bytes.
    MAX_REQUEST_BYTES = Setting(4 * 1024 * 1024, positive_int)
    # Seconds a client has to send a request's body (slower ones are answered 408 and closed).
    REQUEST_READ_TIMEOUT = Setting(30, seconds)
    # The name of the module discovered in each installed app.
    HANDLER_MODULE = Setting("mcp", text)
    # Folders of skills searched before each installed app's mcp_skills/ (docs/skills.md).
    SKILLS_DIRS = Setting([], folders)
    # What server/discover and initialize say.
    SERVER_NAME = Setting("mcp-django", text)
    SERVER_TITLE = Setting(None, optional(text))
    # In serverInfo for 2025-11-25 and later clients; icons as icons=[...] on handlers.
    SERVER_DESCRIPTION = Setting(None, optional(text))
    SERVER_WEBSITE_URL = Setting(None, web_url)
    SERVER_ICONS = Setting((), icon_list)
    INSTRUCTIONS = Setting(None, optional(text))
    # Caching hints on list results and resources/read (2026-07-28).
    LIST_TTL_MS = Setting(0, non_negative_int)
    CACHE_SCOPE = Setting("private", one_of("private", "public"))
    # Seconds a legacy server-to-client request waits for the client's reply.
    ASK_TIMEOUT = Setting(300, seconds)
    # Threads for short sync work: authentication, permission checks, sync handlers.
    WORKER_THREADS = Setting(32, positive_int)
    # Threads for the thread-sensitive sync code of async handlers (one per call).
    DB_THREADS = Setting(4, positive_int)
    # How many sync handlers of one principal may wait at once on legacy asks (beyond: -32005).
    ASK_THREADS_PER_PRINCIPAL = Setting(16, positive_int)
    # Seconds a legacy call's SSE stream may go unread before the call is cancelled.
    ABANDONED_STREAM_SECONDS = Setting(30, seconds)
    # MCP tasks (docs/tasks.md): their ttlMs (None: unlimited), the pollIntervalMs clients
    # are told, the TASKS backend alias, the seconds a silent worker's run is failed after,
    # and how often a run lost to its infrastructure starts again (by default).
    TASK_TTL_MS = Setting(3_600_000, optional(positive_int))
    TASK_POLL_INTERVAL_MS = Setting(1000, positive_int)
    TASK_BACKEND = Setting("default", text)
    TASK_LEASE_SECONDS = Setting(30, seconds)
    TASK_RETRIES = Setting(2, non_negative_int)
    # Seconds a legacy (2025-11-25 and earlier) Streamable HTTP session lives.
    SESSION_LIFETIME = Setting(86400, positive_int)
    # The most resources one legacy session, websocket or listen stream may subscribe to.
    MAX_SUBSCRIPTIONS = Setting(100, non_negative_int)
    # Seconds between SSE keepalive comments on a quiet legacy stream; 0: none.
    SSE_KEEPALIVE = Setting(15, seconds)
    # Seconds a legacy standalone GET stream may stay eventless before it is closed; 0: no limit.
    STREAM_IDLE_TIMEOUT = Setting(600, seconds)
    # Warn of (and audit) database writes of an attempt that ended with input_required. None: DEBUG.
    REPLAY_GUARD = Setting(None, optional(boolean))
    # The Django cache that shares state between processes (legacy sessions, user versions,
    # DPoP replays): a shared one (Redis) when several instances serve.
    SESSION_CACHE = Setting("default", text)
    # Seconds a request waits for the session cache before it is answered 503.
    SESSION_CACHE_TIMEOUT = Setting(0.75, seconds)
    # Seconds a request waits for one channel-layer operation before it is answered 503.
    CHANNEL_LAYER_TIMEOUT = Setting(0.75, seconds)
    # Which audit rows mcp-django writes (AUDIT_DEFAULTS); signals are sent either way.
    AUDIT = Setting({}, audit)
    # The older spelling of AUDIT["ROUNDS"] (None: not given); deprecated (see DEPRECATED).
    AUDIT_ROUNDS = Setting(None, optional(boolean))
    # gc.freeze() at the ASGI lifespan's startup, so that full collections walk only what requests made.
    GC_FREEZE = Setting(True, boolean)
    # The stages stage(call, call_next) every call goes through, outermost first (docs/pipeline.md).
    PIPELINE = Setting(["mcp_django.tracing.trace", "mcp_django.pipeline.audit"], stages)
    # handler(exc, call) -> (HTTP status, JSON-RPC error response, headers), as DRF's.
    EXCEPTION_HANDLER = Setting("mcp_django.pipeline.exception_handler", exception_handler)
    # The protocol extensions served: modules with a register() (docs/extensions.md).
    EXTENSIONS = Setting(
        ["mcp_django.skills.methods", "mcp_django.tasks.methods", "mcp_django.mcp_ui.methods"], extension_modules
    )
    # Rate limits and caps per user, token, tool and endpoint (docs/limits.md): see LIMITS_DEFAULTS.
    LIMITS = Setting({}, limits)
    # Endpoint name -> its own values of the ENDPOINT_KEYS settings (docs/endpoints.md).
    ENDPOINTS = Setting({}, endpoints)

    def coerced(self, setting: Setting[T]) -> T:
        """``setting``'s value, coerced and kept as a plain attribute (the request path reads it)."""
        name = setting.name
        try:
            value: Any = setting.coerce(user_settings().get(name, setting.default))
        except InvalidSetting as exc:
            raise ImproperlyConfigured(f"MCP_DJANGO[{name!r}] {exc} (check id {exc.check_id}).") from None
        if name == "AUDIT" and self.AUDIT_ROUNDS is not None:
            value["ROUNDS"] = self.AUDIT_ROUNDS  # the older spelling still counts, with a warning
            new, removal = DEPRECATED["AUDIT_ROUNDS"]
            warnings.warn(
                f'MCP_DJANGO["AUDIT_ROUNDS"] is deprecated and will be removed in {removal}: set {new} instead',
                DeprecationWarning,
                stacklevel=3,
            )
        self.__dict__[name] = value
        return value

    def problems(self) -> list[tuple[str, InvalidSetting]]:
        """Every key whose value its coercer refuses, in the table's order."""
        user = user_settings()
        found = []
        for name, setting in SETTINGS.items():
            if name in user:
                try:
                    setting.coerce(user[name])
                except InvalidSetting as exc:
                    found.append((name, exc))
        return found

    def unknown_keys(self) -> list[tuple[str, str]]:
        """Keys of ``MCP_DJANGO`` that are no setting, each with a "did you mean" (or "")."""
        return [(str(key), _did_you_mean([key], SETTINGS)) for key in user_settings() if key not in SETTINGS]

    def endpoint(self, name: str) -> EndpointSettings:
        """The settings as the endpoint ``name`` reads them (one object per name, kept)."""
        found = _endpoint_views.get(name)
        if found is None:
            found = _endpoint_views.setdefault(name, EndpointSettings(name))
        return found

    def for_request(self, request: Any) -> EndpointSettings:
        """The settings of the endpoint a Django request reached (``request.mcp_endpoint``,
        set where mcp-django builds or authenticates it), the default endpoint's otherwise."""
        found = getattr(request, "mcp_endpoint", None)
        return found if isinstance(found, EndpointSettings) else self.endpoint("default")

    def reload(self) -> None:
        self.__dict__.clear()
        for view in _endpoint_views.values():
            view.reload()


SETTINGS: dict[str, Setting[Any]] = {
    name: setting for name, setting in vars(MCPSettings).items() if isinstance(setting, Setting)
}

# Values worked out from an endpoint's settings (name -> derive(endpoint)), kept like its settings
# until they change: what the request path would otherwise work out per call.
DERIVED: dict[str, Callable[[EndpointSettings], Any]] = {}


class EndpointSettings:
    """One endpoint's settings: its ``MCP_DJANGO["ENDPOINTS"][name]`` values of the
    ``ENDPOINT_KEYS``, the project-wide ones otherwise (and for every other setting).

    Read on the request path like ``mcp_settings``: each value is kept once read.
    """

    name: str

    def __init__(self, name: str) -> None:
        self.__dict__["name"] = name

    def __getattr__(self, key: str) -> Any:
        if key not in ENDPOINT_KEYS:
            derive = DERIVED.get(key)
            if derive is None:
                return getattr(mcp_settings, key)
            value = self.__dict__[key] = derive(self)
            return value
        overrides = mcp_settings.ENDPOINTS.get(self.name, {})
        value = overrides[key] if key in overrides else getattr(mcp_settings, key)
        self.__dict__[key] = value
        return value

    def overrides(self, key: str) -> bool:
        """Whether this endpoint sets ``key`` itself."""
        return key in mcp_settings.ENDPOINTS.get(self.name, {})

    def reload(self) -> None:
        name = self.name
        self.__dict__.clear()
        self.__dict__["name"] = name

    def __repr__(self) -> str:
        return f"<EndpointSettings {self.name}>"


_endpoint_views: dict[str, EndpointSettings] = {}
mcp_settings = MCPSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_DJANGO":
        mcp_settings.reload()


setting_changed.connect(_reload)
