"""The legacy revisions (2025-11-25 and earlier): handshake, sessions, elicitations fitted to
the session's revision, and what the server says about itself (also in 2026-07-28's ``server/discover``).

A session id is its signed record (docs/legacy.md). What changes during a session lives in the
session cache, under an epoch the id carries: a cache that lost its state (a restarted Redis)
ends every session opened before. Each cache call is bounded by ``SESSION_CACHE_TIMEOUT`` (a
failure is a 503), behind a circuit breaker (:mod:`mcp_django.breaker`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import __version__, extensions
from ..breaker import CacheBreaker
from ..conf import mcp_settings
from ..icons import IconBase, revision_has_icons
from ..keyring import b64decode, b64encode, keyring
from .jsonrpc import INTERNAL_ERROR, InvalidParams, MCPError, dumps, loads
from .revisions import LATEST_LEGACY, LEGACY_VERSIONS, ClientCapabilities, Era

logger = logging.getLogger("mcp_django")


# -- what the server says about itself (here and in 2026-07-28's server/discover) -------


def server_info(version: str | None = None, icons: IconBase | None = None) -> dict[str, Any]:
    """The server's Implementation; from 2025-11-25 on, with description, website and icons."""
    info: dict[str, Any] = {"name": mcp_settings.SERVER_NAME, "version": __version__}
    if mcp_settings.SERVER_TITLE:
        info["title"] = mcp_settings.SERVER_TITLE
    if version is not None and revision_has_icons(version):
        if mcp_settings.SERVER_DESCRIPTION:
            info["description"] = mcp_settings.SERVER_DESCRIPTION
        if mcp_settings.SERVER_WEBSITE_URL:
            info["websiteUrl"] = mcp_settings.SERVER_WEBSITE_URL
        if mcp_settings.SERVER_ICONS and icons is not None:
            described = icons.describe(mcp_settings.SERVER_ICONS)
            if described:
                info["icons"] = described
    return info


def server_described(era: Era, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (``initialize``'s or ``server/discover``'s) with the server's capabilities and instructions."""
    caps: dict[str, Any] = {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        # Both eras: resources/subscribe (legacy) and resourceSubscriptions (subscriptions/listen).
        "resources": {"subscribe": True, "listChanged": True},
        "completions": {},
    }
    if era == Era.LEGACY:
        caps["logging"] = {}
    result["capabilities"] = extensions.capabilities(era, caps)
    if mcp_settings.INSTRUCTIONS:
        result["instructions"] = mcp_settings.INSTRUCTIONS
    return result


_TOKEN_PREFIX = "s1"
# Tokens longer than this are refused before any decoding (a header, after all).
_MAX_TOKEN = 8192
# clientInfo is dropped from the token rather than let it grow without bound.
_MAX_CLIENT_INFO = 1024


# The first revision whose clients expect SSE priming events and early closes (SEP-1699):
# older ones parse every event's data and do not reconnect (the TypeScript server agrees).
PRIMING_SINCE = "2025-11-25"


def primes(record: SessionRecord) -> bool:
    """Whether this session's SSE streams open with a priming event and may be closed early."""
    return record.version >= PRIMING_SINCE


@dataclass(frozen=True)
class SessionRecord:
    """What a legacy session fixed at ``initialize``."""

    version: str
    capabilities: ClientCapabilities
    client_info: dict[str, Any] | None
    principal: str  # the keyed hash of the principal (auth.Principal.digest)
    sid: str = field(default_factory=lambda: b64encode(os.urandom(12)))
    expires_at: int = 0
    # The session cache's epoch when the session opened (see the module's docstring).
    epoch: str = ""
    # The endpoint that opened it (its Registry's name): no other endpoint knows the session.
    endpoint: str = "default"


async def open_record(params: Any, principal: str, endpoint: str = "default") -> SessionRecord:
    """:func:`read_initialize`, under the session cache's epoch (written by the first process needing one)."""
    record = read_initialize(params, principal, endpoint)
    epoch = await cache_breaker.use(lambda cache: cache.get_or_set(_EPOCH, b64encode(os.urandom(9)), None))
    return dataclasses.replace(record, epoch=str(epoch))


def read_initialize(params: Any, principal: str, endpoint: str = "default") -> SessionRecord:
    """The session an ``initialize`` request opens, or -32602 for malformed params."""
    if not isinstance(params, dict):
        raise InvalidParams("initialize needs params")
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise InvalidParams("params.protocolVersion must be a string")
    caps = params.get("capabilities", {})
    if not isinstance(caps, dict):
        raise InvalidParams("params.capabilities must be an object")
    info = params.get("clientInfo")
    return SessionRecord(
        # The client's version when we speak it, else our latest (the client may then leave).
        version=requested if requested in LEGACY_VERSIONS else LATEST_LEGACY,
        capabilities=ClientCapabilities(caps),
        client_info=info if isinstance(info, dict) else None,
        principal=principal,
        # Bounded: an ended session is remembered in the cache only this long.
        expires_at=int(time.time()) + mcp_settings.SESSION_LIFETIME,
        endpoint=endpoint,
    )


class SessionControl(Protocol):
    """What a legacy call may change of its session (``Call.control``), kept by the transport."""

    async def open(self, call: Any) -> SessionRecord: ...  # -32602 malformed, -32600 open already

    async def set_log_level(self, level: str) -> None: ...

    async def subscribe(self, uri: str, on: bool) -> None: ...

    async def cancel(self, request_id: Any) -> None: ...


# -- sealed session ids --------------------------------------------------------------------


def seal_session(record: SessionRecord) -> str:
    key = keyring().signing
    info = record.client_info
    if info is not None and len(dumps(info)) > _MAX_CLIENT_INFO:
        info = None
    payload = b64encode(
        dumps(
            {
                "s": record.sid,
                "v": record.version,
                "c": record.capabilities.raw,
                "i": info,
                "p": record.principal,
                "exp": record.expires_at,
                "e": record.epoch,
                # Only another endpoint than the default names itself (the default's ids are unchanged).
                **({"n": record.endpoint} if record.endpoint != "default" else {}),
            }
        )
    )
    head = f"{_TOKEN_PREFIX}.{key.kid}.{payload}"
    mac = hmac.new(key.session_key, head.encode(), hashlib.sha256).digest()
    return f"{head}.{b64encode(mac)}"


def open_session(token: str) -> SessionRecord | None:
    """The record a session id carries; None for anything we did not issue, or that expired."""
    if len(token) > _MAX_TOKEN:
        return None
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != _TOKEN_PREFIX:
        return None
    key = keyring().by_kid.get(parts[1])
    if key is None:
        return None
    try:
        expected = hmac.new(key.session_key, ".".join(parts[:3]).encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(b64decode(parts[3]), expected):
            return None
        data = loads(b64decode(parts[2]))
        record = SessionRecord(
            version=data["v"],
            capabilities=ClientCapabilities(data["c"]),
            client_info=data["i"],
            principal=data["p"],
            sid=data["s"],
            expires_at=data["exp"],
            epoch=data.get("e", ""),
            endpoint=data.get("n", "default"),
        )
    except (ValueError, KeyError, TypeError):
        return None
    valid = record.version in LEGACY_VERSIONS and isinstance(record.expires_at, int) and time.time() < record.expires_at
    return record if valid else None


# -- what changes during a session: the shared store ----------------------------------------


def _key(sid: str, what: str) -> str:
    return f"mcp_django:session:{sid}:{what}"


_EPOCH = "mcp_django:sessions:epoch"


cache_breaker = CacheBreaker(
    "the session store", lambda: mcp_settings.SESSION_CACHE, lambda: mcp_settings.SESSION_CACHE_TIMEOUT, _EPOCH
)


async def session_status(record: SessionRecord) -> tuple[bool, str | None]:
    """(ended, log level) of a session, in one cache round trip. A session opened
    under another epoch than the cache's has ended: the cache lost its state."""
    sid = record.sid
    found = await cache_breaker.use(lambda cache: cache.get_many([_key(sid, "ended"), _key(sid, "level"), _EPOCH]))
    ended = bool(found.get(_key(sid, "ended"))) or found.get(_EPOCH) != record.epoch
    return ended, found.get(_key(sid, "level"))


async def set_state(record: SessionRecord, what: str, value: Any) -> None:
    """Keep the session's ``level``, ``ended``, or ``get`` (its current standalone GET stream:
    a message goes to one stream only) until the session expires."""
    await cache_breaker.use(lambda cache: cache.set(_key(record.sid, what), value, timeout=_remaining(record)))


def _uri_key(sid: str, uri: str) -> str:
    # Hashed: URIs may be long or hold characters some cache backends refuse in keys.
    return _key(sid, "sub:" + hashlib.sha256(uri.encode()).hexdigest()[:32])


def too_many_subscriptions() -> MCPError:
    limit = mcp_settings.MAX_SUBSCRIPTIONS
    return InvalidParams(
        f"too many subscriptions: at most {limit} at once (unsubscribe from one first)", {"maxSubscriptions": limit}
    )


async def set_subscribed(record: SessionRecord, uri: str, on: bool) -> None:
    """Remember (or forget) that the session wants ``notifications/resources/updated`` for ``uri``.

    A session holds at most ``MAX_SUBSCRIPTIONS`` (counted in the cache, so every
    worker sees the same count); every key expires with the session.
    """
    key, count = _uri_key(record.sid, uri), _key(record.sid, "subs")
    timeout = _remaining(record)

    def change(cache: Any) -> bool:  # False: one too many
        if not on:
            if cache.delete(key):
                cache.decr(count)
        elif cache.add(key, True, timeout=timeout):  # else subscribed already: it counts once
            cache.add(count, 0, timeout=timeout)
            if cache.incr(count) > mcp_settings.MAX_SUBSCRIPTIONS:
                cache.delete(key)
                cache.decr(count)
                return False
        return True

    if not await cache_breaker.use(change):
        raise too_many_subscriptions()


async def subscribers(streams: Iterable[tuple[str, str]], uri: str) -> set[tuple[str, str]]:
    """Of these (session id, GET stream token) pairs, those to tell that ``uri`` changed:
    the session subscribed to it, and the stream is the session's current one."""
    streams = list(streams)
    keys = [k for sid, _token in streams for k in (_uri_key(sid, uri), _key(sid, "get"))]
    found = await cache_breaker.use(lambda cache: cache.get_many(keys))
    return {
        (sid, token) for sid, token in streams if found.get(_uri_key(sid, uri)) and found.get(_key(sid, "get")) == token
    }


def _remaining(record: SessionRecord) -> int:
    return max(1, record.expires_at - int(time.time()) + 1)


# -- elicitations fitted to the session's revision ------------------------------------------
# A 2025-06-18 client rejects a whole request that uses 2025-11-25's additions, so for it ``mode``
# is dropped, ``default`` kept only on booleans and a titled single-select (``oneOf``) said as
# ``enum`` + ``enumNames``; what has no older form (a multi-select) is refused, named, before sending.

# The first revision whose elicitation schemas are sent unchanged.
NATIVE_SINCE = "2025-11-25"

# What a 2025-06-18 primitive schema may carry, by type (its PrimitiveSchemaDefinition).
_ALLOWED = {
    "string": {"type", "title", "description", "minLength", "maxLength", "format", "enum", "enumNames"},
    "number": {"type", "title", "description", "minimum", "maximum"},
    "integer": {"type", "title", "description", "minimum", "maximum"},
    "boolean": {"type", "title", "description", "default"},
}
_FORMATS = {"email", "uri", "date", "date-time"}
_SCHEMA_KEYS = ("type", "properties", "required")


def fit_elicitation(params: dict[str, Any], version: str) -> dict[str, Any]:
    """``params`` of an ``elicitation/create`` as a session on ``version`` can read them."""
    if version >= NATIVE_SINCE:
        return params
    if params.get("mode", "form") != "form":
        raise MCPError(INTERNAL_ERROR, f"URL elicitation needs protocol 2025-11-25; this session speaks {version}")
    out = {k: v for k, v in params.items() if k != "mode"}
    schema = params.get("requestedSchema")
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return out
    unsupported: list[str] = []
    fitted: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        try:
            fitted[name] = _fit_property(prop)
        except ValueError as exc:
            unsupported.append(f"{name} ({exc})")
    if unsupported:
        raise MCPError(
            INTERNAL_ERROR,
            f"this elicitation form cannot be sent to a {version} client: {', '.join(unsupported)} "
            "needs protocol 2025-11-25",
            {"protocolVersion": version, "unsupported": sorted(unsupported)},
        )
    out["requestedSchema"] = {k: fitted if k == "properties" else v for k, v in schema.items() if k in _SCHEMA_KEYS}
    return out


def _fit_property(prop: Any) -> dict[str, Any]:
    if not isinstance(prop, dict):
        raise ValueError("not a schema object")
    json_type = prop.get("type")
    if json_type == "array":
        raise ValueError("a multi-select enum")
    if json_type == "string" and isinstance(prop.get("oneOf"), list):
        # A titled single-select (SEP-1330): the older enum + enumNames says the same.
        options = prop["oneOf"]
        if not all(isinstance(o, dict) and isinstance(o.get("const"), str) for o in options):
            raise ValueError("a oneOf whose options are not string consts")
        prop = {k: v for k, v in prop.items() if k != "oneOf"}
        prop["enum"] = [o["const"] for o in options]
        prop["enumNames"] = [str(o.get("title", o["const"])) for o in options]
    allowed = _ALLOWED.get(json_type) if isinstance(json_type, str) else None
    if allowed is None:
        raise ValueError(f"type {json_type!r}")
    out = {k: v for k, v in prop.items() if k in allowed}
    if out.get("format") is not None and out["format"] not in _FORMATS:
        del out["format"]
    return out
