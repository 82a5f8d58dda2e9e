"""The ``MCP_DJANGO`` settings dict, read through one object: ``mcp_settings.NAME``.

Every setting is one line of :class:`MCPSettings`: its default and the coercer that converts
the project's value or raises ``InvalidSetting`` (a system check reports it). A new setting
also needs its row in docs/index.md. Values are kept until Django reports a change.
"""

from __future__ import annotations

import difflib
import inspect
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar
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


def did_you_mean(unknown: list[Any], known: Any) -> str:
    guesses = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
        if close:
            guesses.append(f"{key!r}: did you mean {close[0]!r}?")
    return f" ({'; '.join(guesses)})" if guesses else ""


def _unknown(given: Any, known: Any) -> str:
    """The keys of ``given`` that are not ``known``, with a "did you mean" ("" when none)."""
    unknown = sorted(set(given) - set(known), key=str)
    return f"{', '.join(map(str, unknown))}{did_you_mean(unknown, known)}" if unknown else ""


# -- coercers ---------------------------------------------------------------------------


def _coercer(accepts: Callable[[Any], Any], must: str, convert: Callable[[Any], T]) -> Callable[[Any], T]:
    """The coercer of one value: ``convert(value)`` when ``accepts(value)``, else "must {must}, not <the value>"."""

    def coerce(value: Any) -> T:
        if not accepts(value):
            raise InvalidSetting(f"must {must}, not {_described(value)}")
        return convert(value)

    coerce.__annotations__["return"] = convert if isinstance(convert, type) else Any  # what get_type_hints reads
    return coerce


def _number(value: Any, kinds: tuple[type, ...] = (int,)) -> bool:
    # bool is an int in Python, and True rounds is surely a mistake.
    return isinstance(value, kinds) and not isinstance(value, bool)


boolean = _coercer(lambda v: isinstance(v, bool), "be True or False", bool)
positive_int = _coercer(lambda v: _number(v) and v >= 1, "be a whole number above 0", int)
non_negative_int = _coercer(lambda v: _number(v) and v >= 0, "be a whole number, 0 or more", int)
seconds = _coercer(
    lambda v: _number(v, (int, float)) and v >= 0, "be a number of seconds (an int or a float, 0 or more)", float
)
text = _coercer(lambda v: isinstance(v, str) and v, "be a non-empty str", str)


def optional(coerce: Callable[[Any], T]) -> Callable[[Any], T | None]:
    """``coerce``, with None allowed too."""
    return lambda value: None if value is None else coerce(value)


def one_of(*choices: str) -> Callable[[Any], str]:
    return _coercer(lambda v: v in choices, f"be one of {', '.join(map(repr, choices))}", str)


def _sequence(value: Any, what: str) -> list[Any]:
    # A str is a sequence too, and would be read one character at a time.
    if not isinstance(value, (list, tuple)):
        raise InvalidSetting(f"must be a list of {what}, not {_described(value)}")
    return list(value)


def list_of(what: str, coerce: Callable[[Any], T]) -> Callable[[Any], list[T]]:
    """A list (or tuple) of ``what``, each item converted by ``coerce``."""
    return lambda value: [coerce(item) for item in _sequence(value, what)]


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


def _class(item: Any) -> type:
    if not isinstance(item, (type, str)):
        raise InvalidSetting(f"must list dotted paths of classes, not {_described(item)}")
    return item if isinstance(item, type) else _imported(item, "mcp_django.E007")


classes = list_of("dotted paths of DRF authentication classes", _class)


def _function(item: Any, takes: str, check_id: str, names: tuple[str, ...] = ()) -> Callable[..., Any]:
    """A dotted path (or the callable itself) to a function called with two arguments (by these
    ``names``, when given)."""
    found = _imported(item, check_id) if isinstance(item, str) else item
    if not callable(found):
        raise InvalidSetting(f"must name callables taking {takes}, not {_described(item)}", check_id)
    try:
        signature = inspect.signature(found)
    except ValueError:
        return found  # no signature to read (a builtin): called as it is
    try:
        signature.bind(None, None)
    except TypeError:
        raise InvalidSetting(f"names {item!r}, which does not take {takes}", check_id) from None
    if not set(names) <= set(signature.parameters):
        raise InvalidSetting(f"names {item!r}, whose arguments are not named {' and '.join(names)}", check_id)
    return found


def _stage(item: Any) -> Callable[..., Any]:
    """A ``PIPELINE`` stage, ``stage(call, call_next)``: the two are passed by name."""
    return _function(item, "(call, call_next)", "mcp_django.E020", ("call", "call_next"))


def exception_handler(value: Any) -> Callable[..., Any]:
    return _function(value, "(exc, call)", "mcp_django.E021")


def _extension(item: Any) -> str:
    """An ``EXTENSIONS`` entry: the dotted path of a module with a ``register()`` (mcp_django.extensions)."""
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
    return item


def _origin(item: Any) -> str:
    if item == "*":
        return item
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
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


# An absolute URL, or a path on this server (resolved against each request's host).
_url = _coercer(
    lambda v: isinstance(v, str) and (v.startswith("/") or urlsplit(v).scheme in ("http", "https")),
    'list http(s) URLs or paths starting with "/"',
    lambda v: v.rstrip("/") or "/",
)
web_url = _coercer(
    lambda v: isinstance(v, str) and urlsplit(v).scheme in ("http", "https") and urlsplit(v).netloc,
    'be an http(s) URL such as "https://shop.example"',
    str,
)


def icon_list(value: Any) -> tuple[Any, ...]:
    """Icons as the decorators take them (static paths, URLs, dicts); checked here, URLs resolved on use."""
    from .icons import icons

    try:
        return icons(_sequence(value, "icons (static paths, URLs or dicts)"), "SERVER_ICONS")
    except ImproperlyConfigured as exc:
        raise InvalidSetting(str(exc).removeprefix("SERVER_ICONS: ")) from None


_folder = _coercer(lambda v: isinstance(v, (str, os.PathLike)) and str(v), "list folders as str or pathlib.Path", Path)
strings = list_of("str", _coercer(lambda v: isinstance(v, str) and v, "list non-empty str values", str))


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


def _sub_settings(keys: dict[str, tuple[Any, Callable[[Any], Any]]], check_id: str) -> Callable[[Any], dict[str, Any]]:
    """The coercer of a dict setting (None: empty) of ``keys`` (key -> its default and coercer),
    whose keys given override the defaults one by one; an unknown key is refused, since a
    misspelt one would silently leave the default in force."""
    defaults = {key: default for key, (default, _) in keys.items()}
    names = ", ".join(keys)

    def coerce(value: Any) -> dict[str, Any]:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise InvalidSetting(f"must be a dict with the keys {names}, not {_described(value)}", check_id)
        unknown = _unknown(value, keys)
        if unknown:
            raise InvalidSetting(f"has unknown key(s): {unknown}; the keys are {names}", check_id)
        out = dict(defaults)
        for key, raw in value.items():
            try:
                out[key] = keys[key][1](raw)
            except InvalidSetting as exc:
                sep = "" if str(exc).startswith("[") else " "  # ['RATES']['user']: a nested key
                raise InvalidSetting(f"[{key!r}]{sep}{exc}", check_id) from None
        return out

    return coerce


# The AUDIT keys (docs/audit.md, which says what each does).
audit = _sub_settings(
    {
        "ENABLED": (True, boolean),
        "ROUNDS": (True, boolean),
        "CALLS": (True, boolean),
        "ASKS": (True, boolean),
        "REFUSALS": (True, boolean),  # committed before the client is answered, whatever ASYNC_WRITES says
        "BATCH_SIZE": (500, positive_int),
        "QUEUE_SIZE": (100_000, positive_int),  # rows beyond it are dropped, counted and logged (W020)
        "ASYNC_WRITES": (True, boolean),
    },
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
                f"has the scope {scope!r}{did_you_mean([scope], SCOPES)}; the scopes are {', '.join(SCOPES)}"
            )
        if rate is not None:
            try:
                out[scope] = parse(rate)
            except ValueError as exc:
                raise InvalidSetting(f"[{scope!r}]: {exc}") from None
    return out


# The LIMITS keys (docs/limits.md).
limits = _sub_settings(
    {
        "RATES": ({}, rates),  # scope ("user", "token", "tool", "endpoint") -> rate ("100/min")
        "CLASSES": ([], classes),  # DRF throttle classes, asked allow_request(request, handler) each call
        "CACHE": ("default", text),  # a shared one (Redis) when several instances serve
        "CACHE_TIMEOUT": (0.75, seconds),
        # "closed" refuses calls (503), "open" serves them uncounted
        "WHEN_CACHE_DOWN": ("open", one_of("open", "closed")),
        "MAX_OPEN_ASKS": (None, optional(positive_int)),
        "MAX_OPEN_TASKS": (None, optional(positive_int)),
    },
    "mcp_django.E050",
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
        unknown = _unknown(overrides, ENDPOINT_KEYS)
        if unknown:
            raise InvalidSetting(
                f"[{name!r}] has key(s) an endpoint cannot set: {unknown}; an endpoint sets {', '.join(ENDPOINT_KEYS)}",
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
    """One setting: its default, the coercer of the project's value (whose return type is the
    setting's), and whether one endpoint may set it for itself (``ENDPOINT_KEYS``). Read on an
    :class:`MCPSettings`, coerced once and then kept on it as a plain attribute (the request path reads it)."""

    def __init__(self, default: Any, coerce: Callable[[Any], T], *, per_endpoint: bool = False) -> None:
        self.default = default
        self.coerce = coerce
        self.per_endpoint = per_endpoint

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: MCPSettings, owner: type) -> T:
        try:
            value: Any = self.coerce(user_settings().get(self.name, self.default))
        except InvalidSetting as exc:
            raise ImproperlyConfigured(f"MCP_DJANGO[{self.name!r}] {exc} (check id {exc.check_id}).") from None
        if self.name == "AUDIT" and obj.AUDIT_ROUNDS is not None:
            value["ROUNDS"] = obj.AUDIT_ROUNDS  # the older spelling still counts, with a warning
            new, removal = DEPRECATED["AUDIT_ROUNDS"]
            warnings.warn(
                f'MCP_DJANGO["AUDIT_ROUNDS"] is deprecated and will be removed in {removal}: set {new} instead',
                DeprecationWarning,
                stacklevel=2,
            )
        obj.__dict__[self.name] = value
        return value


def user_settings() -> dict[str, Any]:
    value = getattr(settings, "MCP_DJANGO", None)
    return value if isinstance(value, dict) else {}


# Old spellings still read, each with a DeprecationWarning when it takes effect: the old key,
# its new spelling and the release that removes it (docs/api.md, "Deprecation policy").
DEPRECATED: dict[str, tuple[str, str]] = {"AUDIT_ROUNDS": ('MCP_DJANGO["AUDIT"]["ROUNDS"]', "0.3.0")}


class MCPSettings:
    """Typed access to ``settings.MCP_DJANGO`` merged over the defaults: one line per setting."""

    # What each setting means is in docs/index.md's table; the comments here say only why.
    # requestState and legacy sessions
    REQUEST_STATE_KEY = Setting(None, secrets)
    ENCRYPT_REQUEST_STATE = Setting(False, boolean)
    REQUEST_STATE_LIFETIME = Setting(600, non_negative_int)
    MAX_REQUEST_STATE_BYTES = Setting(64 * 1024, positive_int)
    MAX_INPUT_ROUNDS = Setting(10, non_negative_int)
    ROUND_GATHER_TIMEOUT = Setting(2.0, seconds)
    # who may call, and the endpoint as an OAuth protected resource
    ALLOW_ANONYMOUS = Setting(False, boolean, per_endpoint=True)
    AUTHENTICATION_CLASSES = Setting(
        ["mcp_django.auth.SessionAuthentication", "rest_framework.authentication.TokenAuthentication"],
        classes,
        per_endpoint=True,
    )
    AUTH_CACHE_SECONDS = Setting(1, seconds)  # see mcp_django.auth_cache
    AUTHORIZATION_SERVERS = Setting([], list_of('URLs such as "https://auth.example"', _url), per_endpoint=True)
    RESOURCE_URL = Setting(None, optional(text), per_endpoint=True)
    REQUIRED_SCOPES = Setting([], strings, per_endpoint=True)
    SCOPES_SUPPORTED = Setting(None, optional(strings), per_endpoint=True)
    DPOP = Setting("off", one_of("off", "allowed", "required"), per_endpoint=True)  # see mcp_django.contrib.dpop
    DPOP_ALGORITHMS = Setting(["ES256", "ES384", "EdDSA", "PS256", "RS256"], dpop_algorithms)
    DPOP_PROOF_WINDOW = Setting(300, seconds)
    DPOP_NONCE_SECONDS = Setting(0, non_negative_int)
    AUTH_TIMEOUT = Setting(10, seconds)
    ALLOWED_ORIGINS = Setting([], list_of('origins such as "https://app.example"', _origin))
    # requests, handlers and what the server says of itself
    MAX_REQUEST_BYTES = Setting(4 * 1024 * 1024, positive_int)
    REQUEST_READ_TIMEOUT = Setting(30, seconds)
    HANDLER_MODULE = Setting("mcp", text)
    SKILLS_DIRS = Setting([], list_of("folders (str or pathlib.Path)", _folder))
    SERVER_NAME = Setting("mcp-django", text)
    SERVER_TITLE = Setting(None, optional(text))
    SERVER_DESCRIPTION = Setting(None, optional(text))
    SERVER_WEBSITE_URL = Setting(None, optional(web_url))
    SERVER_ICONS = Setting((), icon_list)
    INSTRUCTIONS = Setting(None, optional(text))
    LIST_TTL_MS = Setting(0, non_negative_int)
    CACHE_SCOPE = Setting("private", one_of("private", "public"))
    # threads, and legacy asks
    ASK_TIMEOUT = Setting(300, seconds)
    WORKER_THREADS = Setting(32, positive_int)
    DB_THREADS = Setting(4, positive_int)
    ASK_THREADS_PER_PRINCIPAL = Setting(16, positive_int)
    ABANDONED_STREAM_SECONDS = Setting(30, seconds)
    # MCP tasks (docs/tasks.md)
    TASK_TTL_MS = Setting(3_600_000, optional(positive_int))
    TASK_POLL_INTERVAL_MS = Setting(1000, positive_int)
    TASK_BACKEND = Setting("default", text)
    TASK_LEASE_SECONDS = Setting(30, seconds)
    TASK_RETRIES = Setting(2, non_negative_int)
    # legacy (2025-11-25 and earlier) sessions and streams
    SESSION_LIFETIME = Setting(86400, positive_int)
    MAX_SUBSCRIPTIONS = Setting(100, non_negative_int)
    SSE_KEEPALIVE = Setting(15, seconds)
    STREAM_IDLE_TIMEOUT = Setting(600, seconds)
    REPLAY_GUARD = Setting(None, optional(boolean))  # None: DEBUG's value
    # The cache processes share state through: a shared one (Redis) when several instances serve.
    SESSION_CACHE = Setting("default", text)
    SESSION_CACHE_TIMEOUT = Setting(0.75, seconds)
    CHANNEL_LAYER_TIMEOUT = Setting(0.75, seconds)
    # audit, the pipeline, extensions, limits and endpoints
    AUDIT = Setting({}, audit)
    # The older spelling of AUDIT["ROUNDS"] (None: not given); deprecated (see DEPRECATED).
    AUDIT_ROUNDS = Setting(None, optional(boolean))
    GC_FREEZE = Setting(True, boolean)
    PIPELINE = Setting(
        ["mcp_django.tracing.trace", "mcp_django.pipeline.audit"], list_of("dotted paths of pipeline stages", _stage)
    )
    EXCEPTION_HANDLER = Setting("mcp_django.pipeline.exception_handler", exception_handler)
    EXTENSIONS = Setting(
        ["mcp_django.skills.methods", "mcp_django.tasks.methods", "mcp_django.mcp_ui.methods"],
        list_of("dotted paths of extension modules", _extension),
    )
    LIMITS = Setting({}, limits)
    ENDPOINTS = Setting({}, endpoints)

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

    def endpoint(self, name: str) -> EndpointSettings:
        """The settings as the endpoint ``name`` reads them (one object per name, kept)."""
        found = _endpoint_views.get(name)
        return found if found is not None else _endpoint_views.setdefault(name, EndpointSettings(name))

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
# The settings one endpoint may set for itself in MCP_DJANGO["ENDPOINTS"][name] (per_endpoint=True
# above): who may call it and how it is an OAuth protected resource. The rest belong to the process.
ENDPOINT_KEYS = tuple(name for name, setting in SETTINGS.items() if setting.per_endpoint)

# Values worked out from an endpoint's settings (name -> derive(endpoint)), kept like its settings
# until they change: what the request path would otherwise work out per call.
DERIVED: dict[str, Callable[[EndpointSettings], Any]] = {}


class EndpointSettings:
    """One endpoint's settings: its ``MCP_DJANGO["ENDPOINTS"][name]`` values of the ``ENDPOINT_KEYS``,
    the project-wide ones otherwise; read on the request path, so each value is kept once read."""

    name: str

    def __init__(self, name: str) -> None:
        self.__dict__["name"] = name

    def __getattr__(self, key: str) -> Any:
        if key in ENDPOINT_KEYS:
            overrides = mcp_settings.ENDPOINTS.get(self.name, {})
            value = overrides[key] if key in overrides else getattr(mcp_settings, key)
        elif key in DERIVED:
            value = DERIVED[key](self)
        else:
            return getattr(mcp_settings, key)
        self.__dict__[key] = value
        return value

    def overrides(self, key: str) -> bool:
        """Whether this endpoint sets ``key`` itself."""
        return key in mcp_settings.ENDPOINTS.get(self.name, {})

    def reload(self) -> None:
        self.__dict__ = {"name": self.name}

    def __repr__(self) -> str:
        return f"<EndpointSettings {self.name}>"


_endpoint_views: dict[str, EndpointSettings] = {}
mcp_settings = MCPSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_DJANGO":
        mcp_settings.reload()


setting_changed.connect(_reload)
