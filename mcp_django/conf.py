"""The ``MCP_DJANGO`` settings dict, read through one object: ``mcp_settings.NAME``.

Every setting is one line of ``SETTINGS``: its default and the coercer that checks
and converts the project's value. To add a setting, add its line there (with a
comment saying what it does), a row to the table in docs/index.md, and read it as
``mcp_settings.NAME``; the system checks then report a wrong value for it at
``manage.py check`` (and at ``migrate``, ``runserver``), and a misspelt key is
reported with the nearest known name.

A coercer takes the project's value and returns what the code uses, or raises
``InvalidSetting`` with a message saying what was expected. Values are read from
``django.conf.settings`` (so ``override_settings`` works), coerced on first use and
kept as plain attributes: the request path reads them. They are dropped whenever
Django reports that ``MCP_DJANGO`` changed. Nothing is written back into settings.
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

__all__ = ["DEPRECATED", "mcp_settings"]


class InvalidSetting(ValueError):
    """A value a coercer refuses; the message says what was expected."""

    check_id = "mcp_django.E010"


class InvalidOrigin(InvalidSetting):
    check_id = "mcp_django.E011"


class UnimportableClass(InvalidSetting):
    check_id = "mcp_django.E007"


class InvalidAudit(InvalidSetting):
    check_id = "mcp_django.E008"


class InvalidEndpoints(InvalidSetting):
    check_id = "mcp_django.E013"


class InvalidPipeline(InvalidSetting):
    check_id = "mcp_django.E020"


class InvalidExceptionHandler(InvalidSetting):
    check_id = "mcp_django.E021"


class InvalidExtensions(InvalidSetting):
    check_id = "mcp_django.E022"


class InvalidLimits(InvalidSetting):
    check_id = "mcp_django.E050"


class WeakKey(InvalidSetting):
    check_id = "mcp_django.E017"


# The shortest REQUEST_STATE_KEY accepted, in bytes (HMAC-SHA256's and AES-256's key size).
MIN_KEY_BYTES = 32


def _described(value: Any) -> str:
    """A refused value for the message: its type, then its repr (cut short)."""
    return f"{type(value).__name__} {value!r}"[:120]


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


def optional_text(value: Any) -> str | None:
    return None if value is None else text(value)


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

    An empty or short secret is refused (E017), not taken as "unset": ``os.environ[...]``
    of a variable exported empty (``export KEY=$(a command that failed)``) must stop the
    deployment, not seal every state with keys derived from something else, or from nothing
    anyone chose. With a list, an old short key would still verify forged states.
    """
    if value is None:
        return None
    values = value if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise WeakKey("is an empty list: give it a secret, or None to derive the keys from SECRET_KEY")
    out = []
    for i, item in enumerate(values):
        if not isinstance(item, (str, bytes)):
            raise InvalidSetting(f"must be a str or bytes secret, or a list of them, not {_described(item)}")
        secret = item.encode() if isinstance(item, str) else bytes(item)
        if len(secret) < MIN_KEY_BYTES:
            where = f"key at position {i}" if isinstance(value, (list, tuple)) else "key"
            what = "empty (an environment variable exported empty?)" if not secret else f"{len(secret)} bytes"
            raise WeakKey(
                f"{where} is {what}: at least {MIN_KEY_BYTES} bytes are needed "
                "(python manage.py mcp_generate_key prints one; None derives the keys from SECRET_KEY)"
            )
        out.append(secret)
    return out


def classes(value: Any) -> list[type]:
    out = []
    for item in _sequence(value, "dotted paths of DRF authentication classes"):
        if isinstance(item, type):
            out.append(item)
            continue
        if not isinstance(item, str):
            raise InvalidSetting(f"must list dotted paths of classes, not {_described(item)}")
        try:
            out.append(import_string(item))
        except ImportError as exc:
            raise UnimportableClass(f"names {item!r}, which cannot be imported: {exc}") from None
    return out


def _function(item: Any, takes: str, error: type[InvalidSetting]) -> Callable[..., Any]:
    """A dotted path (or the callable itself) to a function called with two arguments."""
    found = item
    if isinstance(item, str):
        try:
            found = import_string(item)
        except ImportError as exc:
            raise error(f"names {item!r}, which cannot be imported: {exc}") from None
    if not callable(found):
        raise error(f"must name callables taking {takes}, not {_described(item)}")
    try:
        inspect.signature(found).bind(None, None)
    except TypeError:
        raise error(f"names {item!r}, which does not take {takes}") from None
    except ValueError:
        pass  # no signature to read (a builtin): called as it is
    return found


def stages(value: Any) -> list[Callable[..., Any]]:
    """``PIPELINE``: dotted paths of stages ``stage(call, call_next)``, outermost first; the two
    are passed by name (mcp_django.pipeline.link)."""
    found = []
    for item in _sequence(value, "dotted paths of pipeline stages"):
        stage = _function(item, "(call, call_next)", InvalidPipeline)
        try:
            names = set(inspect.signature(stage).parameters)
        except ValueError:
            names = {"call", "call_next"}
        if not {"call", "call_next"} <= names:
            raise InvalidPipeline(f"names {item!r}, whose arguments are not named call and call_next")
        found.append(stage)
    return found


def exception_handler(value: Any) -> Callable[..., Any]:
    """``EXCEPTION_HANDLER``: the dotted path of ``handler(exc, call)``."""
    return _function(value, "(exc, call)", InvalidExceptionHandler)


def extension_modules(value: Any) -> list[str]:
    """``EXTENSIONS``: dotted paths of modules with a ``register()`` (mcp_django.extensions)."""
    out = []
    for item in _sequence(value, "dotted paths of extension modules"):
        if not isinstance(item, str):
            raise InvalidExtensions(f"must list dotted paths of modules, not {_described(item)}")
        try:
            register = import_string(f"{item}.register")
        except ImportError as exc:
            raise InvalidExtensions(f"names {item!r}, which is no module with a register() function: {exc}") from None
        if not callable(register):
            raise InvalidExtensions(f"names {item!r}, whose register is not a function")
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
        # A browser's Origin header is scheme://host[:port], nothing else: any other
        # spelling would never match, and the origin would be refused.
        if not parts.scheme or not parts.netloc or parts.path or parts.query or parts.fragment:
            raise InvalidOrigin(
                f"has {item!r}, which is not an origin: write it as scheme://host[:port] "
                f'(e.g. "https://{parts.netloc or parts.path.split("/")[0] or "app.example"}"), '
                "without a path or a trailing slash"
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


AUDIT_DEFAULTS: dict[str, Any] = {
    # False: write no rows at all (a project may keep only its own signal receivers).
    "ENABLED": True,
    # A row per input_required round (input-request keys and methods).
    "ROUNDS": True,
    # A row per finished tools/call, prompts/get, resources/read (completed, failed, cancelled).
    "CALLS": True,
    # A row per legacy server-to-client request and its outcome.
    "ASKS": True,
    # A row per refused requestState, per missing-capability refusal and per call a limit
    # refused (docs/limits.md), committed
    # before the client is answered.
    "REFUSALS": True,
    # The most rows the background writer inserts in one statement.
    "BATCH_SIZE": 500,
    # The most rows waiting to be written (queued, or kept while the database is
    # unreachable). Rows beyond it are dropped, counted and logged (check W020).
    "QUEUE_SIZE": 100_000,
    # True: round, call and ask rows are queued and written after the response.
    # False: they too are committed before the response, like refusals: one more
    # database round trip per call, but nothing is written once a test has ended
    # (a test suite on in-memory SQLite, whose flush between tests cannot wait
    # for a concurrent writer, wants this).
    "ASYNC_WRITES": True,
}
_AUDIT_COERCERS: dict[str, Callable[[Any], Any]] = {"BATCH_SIZE": positive_int, "QUEUE_SIZE": positive_int}


def _keyed(value: Any, defaults: dict[str, Any], invalid: type[InvalidSetting]) -> dict[str, Any]:
    """A dict setting's value (None: empty), refused (``invalid``) unless a dict of known keys."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(f"must be a dict with the keys {', '.join(defaults)}, not {_described(value)}")
    # A misspelt key would silently leave the default in force (rounds still written, say).
    unknown = sorted(set(value) - set(defaults), key=str)
    if unknown:
        raise invalid(
            f"has unknown key(s): {', '.join(map(str, unknown))}{_did_you_mean(unknown, defaults)}; "
            f"the keys are {', '.join(defaults)}"
        )
    return value


def audit(value: Any) -> dict[str, Any]:
    """Keys given override ``AUDIT_DEFAULTS`` one by one."""
    value = _keyed(value, AUDIT_DEFAULTS, InvalidAudit)
    out = dict(AUDIT_DEFAULTS)
    for key, raw in value.items():
        try:
            out[key] = _AUDIT_COERCERS.get(key, boolean)(raw)
        except InvalidSetting as exc:
            raise InvalidAudit(f"[{key!r}] {exc}") from None
    return out


LIMITS_DEFAULTS: dict[str, Any] = {
    # Scope -> rate ("100/min"): "user" (each principal; anonymous callers by address),
    # "token" (each credential the principal came with), "tool" (each principal on each tool,
    # prompt or resource), "endpoint" (every caller of an endpoint together). Counted for
    # tools/call, prompts/get and resources/read (docs/limits.md).
    "RATES": {},
    # DRF throttle classes (dotted paths) asked too, each call: allow_request(request, handler),
    # with request.user and request.auth the caller's. They keep their own counts (DRF's cache).
    "CLASSES": [],
    # The Django cache the counts are kept in: a shared one (Redis) when several instances serve.
    "CACHE": "default",
    # Seconds a call waits for that cache before the outage choice below applies.
    "CACHE_TIMEOUT": 0.75,
    # While the cache is away (an error, or no answer within CACHE_TIMEOUT): "open" serves calls
    # uncounted, "closed" refuses them (503). Either way at once, behind a breaker.
    "WHEN_CACHE_DOWN": "open",
    # The most legacy server-to-client requests (asks) one principal may have open at once
    # (None: no cap); one more fails at once.
    "MAX_OPEN_ASKS": None,
    # The most MCP tasks one principal may have unfinished (None: no cap); a tools/call that
    # would create one more is refused.
    "MAX_OPEN_TASKS": None,
}


def limits(value: Any) -> dict[str, Any]:
    """Keys given override ``LIMITS_DEFAULTS`` one by one; rates become :class:`~mcp_django.limits.rates.Rate`."""
    from .limits.rates import SCOPES, parse

    value = _keyed(value, LIMITS_DEFAULTS, InvalidLimits)
    coercers: dict[str, Callable[[Any], Any]] = {
        "CLASSES": classes,
        "CACHE": text,
        "CACHE_TIMEOUT": seconds,
        "WHEN_CACHE_DOWN": one_of("open", "closed"),
        "MAX_OPEN_ASKS": lambda v: None if v is None else positive_int(v),
        "MAX_OPEN_TASKS": lambda v: None if v is None else positive_int(v),
    }
    out = {**LIMITS_DEFAULTS, "RATES": {}}
    for key, raw in value.items():
        if key == "RATES":
            if not isinstance(raw, dict):
                raise InvalidLimits(f"['RATES'] must be a dict of scope -> rate, not {_described(raw)}")
            for scope, rate in raw.items():
                if scope not in SCOPES:
                    raise InvalidLimits(
                        f"['RATES'] has the scope {scope!r}{_did_you_mean([scope], SCOPES)}; "
                        f"the scopes are {', '.join(SCOPES)}"
                    )
                if rate is None:
                    continue  # a scope switched off, as DRF's DEFAULT_THROTTLE_RATES allows
                try:
                    out["RATES"][scope] = parse(rate)
                except ValueError as exc:
                    raise InvalidLimits(f"['RATES'][{scope!r}]: {exc}") from None
            continue
        try:
            out[key] = coercers[key](raw)
        except InvalidSetting as exc:
            raise InvalidLimits(f"[{key!r}] {exc}") from None
    return out


# The settings one endpoint may set for itself in MCP_DJANGO["ENDPOINTS"][name]: who may
# call it and how it is an OAuth protected resource. The rest (keys, limits, the audit
# log, the caches) belong to the process and are shared by every endpoint.
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
        raise InvalidEndpoints(f"must be a dict of endpoint name -> dict of settings, not {_described(value)}")
    out: dict[str, dict[str, Any]] = {}
    for name, overrides in value.items():
        problem = endpoint_name_problem(name)
        if problem is not None:
            raise InvalidEndpoints(f"has a key that is no endpoint name: {problem}")
        if not isinstance(overrides, dict):
            raise InvalidEndpoints(f"[{name!r}] must be a dict of settings, not {_described(overrides)}")
        unknown = sorted(set(overrides) - set(ENDPOINT_KEYS), key=str)
        if unknown:
            raise InvalidEndpoints(
                f"[{name!r}] has key(s) an endpoint cannot set: {', '.join(map(str, unknown))}"
                f"{_did_you_mean(unknown, ENDPOINT_KEYS)}; an endpoint sets {', '.join(ENDPOINT_KEYS)}"
            )
        coerced = {}
        for key, raw in overrides.items():
            try:
                coerced[key] = SETTINGS[key].coerce(raw)
            except InvalidSetting as exc:
                # The setting's own check id (an unimportable class stays E007).
                raise type(exc)(f"[{name!r}][{key!r}] {exc}") from None
        out[name] = coerced
    return out


# Asymmetric JWS algorithms a DPoP proof may be signed with (RFC 9449 section 4.2: never
# "none" nor a MAC, whose key the server would have to share).
DPOP_ASYMMETRIC = ("ES256", "ES384", "ES512", "EdDSA", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512")


def dpop_algorithms(value: Any) -> list[str]:
    out = strings(value)
    wrong = [alg for alg in out if alg not in DPOP_ASYMMETRIC]
    if wrong or not out:
        raise InvalidSetting(
            f"must list asymmetric JWS algorithms among {', '.join(DPOP_ASYMMETRIC)}, not {_described(value)}"
        )
    return out


def _did_you_mean(unknown: list[Any], known: Any) -> str:
    import difflib

    guesses = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
        if close:
            guesses.append(f"{key!r}: did you mean {close[0]!r}?")
    return f" ({'; '.join(guesses)})" if guesses else ""


# -- the table ---------------------------------------------------------------------------


class Setting(NamedTuple):
    default: Any
    coerce: Callable[[Any], Any]


SETTINGS: dict[str, Setting] = {
    # Secret(s) the requestState keys are derived from. A list rotates keys: the
    # first seals, every one verifies. None: derived from SECRET_KEY (and
    # SECRET_KEY_FALLBACKS, which verify), the same in every process of the project.
    "REQUEST_STATE_KEY": Setting(None, secrets),
    # Seal requestState with AES-256-GCM (the client cannot read it) instead of
    # signing it with HMAC-SHA256 (readable, tamper-evident).
    "ENCRYPT_REQUEST_STATE": Setting(False, boolean),
    # Seconds a requestState stays valid after it is issued.
    "REQUEST_STATE_LIFETIME": Setting(600, non_negative_int),
    # A longer requestState is refused before anything decodes it.
    "MAX_REQUEST_STATE_BYTES": Setting(64 * 1024, positive_int),
    # The most input_required rounds one request may take.
    "MAX_INPUT_ROUNDS": Setting(10, non_negative_int),
    # The most seconds an attempt (2026-07-28) waits, once one branch of the handler is
    # parked on an unanswered ask, for its other branches to ask too or finish, so that
    # they share the round. Busy branches are waited for; the bound is for a branch that
    # waits for what only the next round brings (another branch's answer), which nothing
    # else ends. A handler with one branch never waits.
    "ROUND_GATHER_TIMEOUT": Setting(2.0, seconds),
    # Serve callers that present no credentials, as the anonymous principal.
    "ALLOW_ANONYMOUS": Setting(False, boolean),
    # DRF authentication classes (dotted paths), tried in order.
    "AUTHENTICATION_CLASSES": Setting(
        ["mcp_django.auth.SessionAuthentication", "rest_framework.authentication.TokenAuthentication"], classes
    ),
    # Seconds an authenticated principal is remembered by its credentials (0: off). Up to 1:
    # process-local (no shared store read per request); a change is seen on the next
    # request where a signal reports it, within these seconds otherwise. Longer (an
    # opt-in): hits check the user's version in SESSION_CACHE, so signalled changes are
    # seen at once everywhere, but a change made without signals (QuerySet.update(),
    # raw SQL) only after up to these seconds. See mcp_django.auth_cache.
    "AUTH_CACHE_SECONDS": Setting(1, seconds),
    # MCP authorization (OAuth 2.1): the issuers of the authorization servers whose access
    # tokens this endpoint accepts, named in /.well-known/oauth-protected-resource (RFC 9728).
    # Empty: no such document (the endpoint is not an OAuth protected resource).
    "AUTHORIZATION_SERVERS": Setting([], urls),
    # The endpoint's canonical URL, the audience tokens must be issued for (RFC 8707).
    # None: derived from each request (scheme, Host and the endpoint's path).
    "RESOURCE_URL": Setting(None, optional_text),
    # Scopes every OAuth access token must carry to use the endpoint at all, asked for in
    # the 401's challenge (a handler's scopes=[...] add to them for that handler).
    "REQUIRED_SCOPES": Setting([], strings),
    # The scopes the protected-resource metadata lists (None: REQUIRED_SCOPES and every
    # scope a handler requires).
    "SCOPES_SUPPORTED": Setting(None, lambda v: None if v is None else strings(v)),
    # DPoP (RFC 9449, docs/authorization.md): "off", "allowed" (a DPoP-bound token is accepted
    # with its proof, a bearer token too) or "required" (only DPoP-bound tokens, each request
    # with a proof). Checked by mcp_django.contrib.dpop for OAuth and MCP tokens.
    "DPOP": Setting("off", one_of("off", "allowed", "required")),
    # The JWS algorithms a DPoP proof may use (asymmetric only), advertised in the metadata.
    "DPOP_ALGORITHMS": Setting(["ES256", "ES384", "EdDSA", "PS256", "RS256"], dpop_algorithms),
    # Seconds a proof's iat may differ from the server's clock, either way; its jti is
    # remembered in SESSION_CACHE for twice this, so a proof is never accepted twice.
    "DPOP_PROOF_WINDOW": Setting(300, seconds),
    # Seconds a server-issued DPoP nonce is good for (RFC 9449 section 8); 0: no nonce asked.
    "DPOP_NONCE_SECONDS": Setting(0, non_negative_int),
    # Seconds a request waits for the authentication classes (their database queries)
    # before it is answered 503: a hung database must not hold requests forever.
    "AUTH_TIMEOUT": Setting(10, seconds),
    # Browser origins (scheme://host[:port]) allowed besides the endpoint's own; "*" allows any.
    "ALLOWED_ORIGINS": Setting([], origins),
    # The largest request body accepted, in bytes.
    "MAX_REQUEST_BYTES": Setting(4 * 1024 * 1024, positive_int),
    # Seconds a client has to send a request's body (slower ones are answered 408 and closed).
    "REQUEST_READ_TIMEOUT": Setting(30, seconds),
    # The name of the module discovered in each installed app.
    "HANDLER_MODULE": Setting("mcp", text),
    # Folders of skills served besides each installed app's mcp_skills/ folder, searched
    # first (docs/skills.md): <folder>/<skill-path>/SKILL.md and the skill's other files.
    "SKILLS_DIRS": Setting([], folders),
    # What server/discover and initialize say.
    "SERVER_NAME": Setting("mcp-django", text),
    "SERVER_TITLE": Setting(None, optional_text),
    # Sent to 2025-11-25 and later clients in serverInfo: what the server is for, its
    # home page, and its icons (static paths, URLs or dicts, as icons=[...] on handlers).
    "SERVER_DESCRIPTION": Setting(None, optional_text),
    "SERVER_WEBSITE_URL": Setting(None, web_url),
    "SERVER_ICONS": Setting((), icon_list),
    "INSTRUCTIONS": Setting(None, optional_text),
    # Caching hints on list results and resources/read (2026-07-28).
    "LIST_TTL_MS": Setting(0, non_negative_int),
    "CACHE_SCOPE": Setting("private", one_of("private", "public")),
    # Seconds a legacy server-to-client request waits for the client's reply.
    "ASK_TIMEOUT": Setting(300, seconds),
    # Threads for short sync work: authentication, permission checks, sync handlers.
    "WORKER_THREADS": Setting(32, positive_int),
    # Threads for the thread-sensitive sync code of async handlers (their ORM calls,
    # sync_to_async): each call keeps one for all of it, and each keeps its connection.
    "DB_THREADS": Setting(4, positive_int),
    # How many sync handlers of one principal may wait at once for a client's answer
    # (legacy asks). A waiting thread does not count against WORKER_THREADS; one ask
    # beyond this bound fails at once with JSON-RPC error -32005.
    "ASK_THREADS_PER_PRINCIPAL": Setting(16, positive_int),
    # Seconds a legacy call's SSE stream may go unread (the client dropped it and did
    # not resume with Last-Event-ID) before the call is cancelled and its thread freed.
    "ABANDONED_STREAM_SECONDS": Setting(30, seconds),
    # MCP tasks (docs/tasks.md). TASK_TTL_MS: how long a task is kept from its creation
    # (its ttlMs; None: unlimited); TASK_POLL_INTERVAL_MS: the pollIntervalMs clients are
    # told; TASK_BACKEND: the alias in Django's TASKS setting the work is enqueued on;
    # TASK_LEASE_SECONDS: a running task whose worker has not said it is alive for this
    # long is failed (the worker died). TASK_RETRIES: how many times a run lost to its
    # infrastructure (a worker killed, its database connection lost) starts again, for a tool
    # that does not say (``@mcp.tool(task=..., retries=N)``); a handler's own error never is.
    "TASK_TTL_MS": Setting(3_600_000, lambda v: None if v is None else positive_int(v)),
    "TASK_POLL_INTERVAL_MS": Setting(1000, positive_int),
    "TASK_BACKEND": Setting("default", text),
    "TASK_LEASE_SECONDS": Setting(30, seconds),
    "TASK_RETRIES": Setting(2, non_negative_int),
    # Seconds a legacy (2025-11-25 and earlier) Streamable HTTP session lives.
    "SESSION_LIFETIME": Setting(86400, positive_int),
    # The most resources one legacy session (or websocket, or subscriptions/listen
    # request) may be subscribed to at once; one more is refused with -32602.
    "MAX_SUBSCRIPTIONS": Setting(100, non_negative_int),
    # Seconds between SSE keepalive comments on a quiet legacy stream (a call waiting
    # on an ask, the standalone GET stream), so proxies do not cut it; 0: none.
    "SSE_KEEPALIVE": Setting(15, seconds),
    # Seconds a legacy standalone GET stream may carry no event before it is closed
    # (the client reconnects when it still wants one); 0: no limit.
    "STREAM_IDLE_TIMEOUT": Setting(600, seconds),
    # Report database writes made by an attempt that then ended with input_required
    # (they run again on the next round): a warning in the log and an audit row.
    # None: on while DEBUG is, off in production.
    "REPLAY_GUARD": Setting(None, lambda v: None if v is None else boolean(v)),
    # The Django cache that shares state between processes: legacy sessions' (ended,
    # log level) and each user's version for the principal cache. A shared one
    # (Redis) when several instances serve one client.
    "SESSION_CACHE": Setting("default", text),
    # Seconds a legacy request waits for the session cache before it is answered 503
    # (a hung Redis must not hold requests; configure the client's socket timeouts too).
    # Under a second: a healthy Redis answers in milliseconds, a hung one never.
    "SESSION_CACHE_TIMEOUT": Setting(0.75, seconds),
    # Seconds a request waits for one channel-layer operation (a send, a group change)
    # before it is answered 503; the layer's blocking read for messages is not bounded by it.
    "CHANNEL_LAYER_TIMEOUT": Setting(0.75, seconds),
    # The audit log (mcp_django.models.AuditEvent): which rows mcp-django writes, see
    # AUDIT_DEFAULTS. Signals are sent either way.
    "AUDIT": Setting({}, audit),
    # The older spelling of AUDIT["ROUNDS"] (None: not given); deprecated (see DEPRECATED).
    "AUDIT_ROUNDS": Setting(None, lambda v: None if v is None else boolean(v)),
    # At the ASGI lifespan's startup, collect once and move every object that exists then
    # (modules, classes, the registry, settings) out of the cyclic collector's reach with
    # gc.freeze(): its full passes, which a server under load runs every few hundred
    # requests, then walk only what requests made, not the whole process.
    "GC_FREEZE": Setting(True, boolean),
    # The stages every call goes through, outermost first (docs/pipeline.md): dotted paths of
    # functions stage(call, call_next), sync or async, as Django's MIDDLEWARE lists middleware.
    "PIPELINE": Setting(["mcp_django.tracing.trace", "mcp_django.pipeline.audit"], stages),
    # The function that turns a call's error into its answer (docs/pipeline.md), as DRF's
    # EXCEPTION_HANDLER: handler(exc, call) -> (HTTP status, JSON-RPC error response, headers).
    "EXCEPTION_HANDLER": Setting("mcp_django.pipeline.exception_handler", exception_handler),
    # The protocol extensions served (docs/extensions.md): modules whose register() plugs them
    # in on mcp_django.extensions' points. Leave one out and it is not there at all.
    "EXTENSIONS": Setting(
        ["mcp_django.skills.methods", "mcp_django.tasks.methods", "mcp_django.mcp_ui.methods"], extension_modules
    ),
    # Rate limits and caps per user, token, tool and endpoint (docs/limits.md): see LIMITS_DEFAULTS.
    "LIMITS": Setting({}, limits),
    # Several endpoints in one project (docs/endpoints.md): endpoint name (a Registry's) ->
    # its own values of the ENDPOINT_KEYS settings, over the ones above.
    "ENDPOINTS": Setting({}, endpoints),
}

DEFAULTS: dict[str, Any] = {name: setting.default for name, setting in SETTINGS.items()}


def user_settings() -> dict[str, Any]:
    value = getattr(settings, "MCP_DJANGO", None)
    return value if isinstance(value, dict) else {}


# Old spellings still read, each with a DeprecationWarning when it takes effect: the old key,
# its new spelling and the release that removes it (docs/api.md, "Deprecation policy").
DEPRECATED: dict[str, tuple[str, str]] = {"AUDIT_ROUNDS": ('MCP_DJANGO["AUDIT"]["ROUNDS"]', "0.3.0")}


class MCPSettings:
    """Typed access to ``settings.MCP_DJANGO`` merged over the defaults in ``SETTINGS``."""

    # What each setting's coercer returns (tests/test_settings.py holds these names to SETTINGS'):
    # annotations only, so every read still goes through __getattr__.
    REQUEST_STATE_KEY: list[bytes] | None
    ENCRYPT_REQUEST_STATE: bool
    REQUEST_STATE_LIFETIME: int
    MAX_REQUEST_STATE_BYTES: int
    MAX_INPUT_ROUNDS: int
    ROUND_GATHER_TIMEOUT: float
    ALLOW_ANONYMOUS: bool
    AUTHENTICATION_CLASSES: list[type]
    AUTH_CACHE_SECONDS: float
    AUTHORIZATION_SERVERS: list[str]
    RESOURCE_URL: str | None
    REQUIRED_SCOPES: list[str]
    SCOPES_SUPPORTED: list[str] | None
    DPOP: str
    DPOP_ALGORITHMS: list[str]
    DPOP_PROOF_WINDOW: float
    DPOP_NONCE_SECONDS: int
    AUTH_TIMEOUT: float
    ALLOWED_ORIGINS: list[str]
    MAX_REQUEST_BYTES: int
    REQUEST_READ_TIMEOUT: float
    HANDLER_MODULE: str
    SKILLS_DIRS: list[Path]
    SERVER_NAME: str
    SERVER_TITLE: str | None
    SERVER_DESCRIPTION: str | None
    SERVER_WEBSITE_URL: str | None
    SERVER_ICONS: tuple[Any, ...]
    INSTRUCTIONS: str | None
    LIST_TTL_MS: int
    CACHE_SCOPE: str
    ASK_TIMEOUT: float
    WORKER_THREADS: int
    DB_THREADS: int
    ASK_THREADS_PER_PRINCIPAL: int
    ABANDONED_STREAM_SECONDS: float
    TASK_TTL_MS: int | None
    TASK_POLL_INTERVAL_MS: int
    TASK_BACKEND: str
    TASK_LEASE_SECONDS: float
    TASK_RETRIES: int
    SESSION_LIFETIME: int
    MAX_SUBSCRIPTIONS: int
    SSE_KEEPALIVE: float
    STREAM_IDLE_TIMEOUT: float
    REPLAY_GUARD: bool | None
    SESSION_CACHE: str
    SESSION_CACHE_TIMEOUT: float
    CHANNEL_LAYER_TIMEOUT: float
    AUDIT: dict[str, Any]
    AUDIT_ROUNDS: bool | None
    GC_FREEZE: bool
    PIPELINE: list[Callable[..., Any]]
    EXCEPTION_HANDLER: Callable[..., Any]
    EXTENSIONS: list[str]
    LIMITS: dict[str, Any]
    ENDPOINTS: dict[str, dict[str, Any]]

    def __getattr__(self, name: str) -> Any:
        # Only reached when the attribute is not cached yet.
        setting = SETTINGS.get(name)
        if setting is None:
            raise AttributeError(f"MCP_DJANGO has no setting {name!r}")
        try:
            value = setting.coerce(user_settings().get(name, setting.default))
        except InvalidSetting as exc:
            raise ImproperlyConfigured(f"MCP_DJANGO[{name!r}] {exc} (check id {exc.check_id}).") from None
        if name == "AUDIT" and self.AUDIT_ROUNDS is not None:
            value["ROUNDS"] = self.AUDIT_ROUNDS  # the older spelling still counts, with a warning
            new, removal = DEPRECATED["AUDIT_ROUNDS"]
            warnings.warn(
                f'MCP_DJANGO["AUDIT_ROUNDS"] is deprecated and will be removed in {removal}: set {new} instead',
                DeprecationWarning,
                stacklevel=2,
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
