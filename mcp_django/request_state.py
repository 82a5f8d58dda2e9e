"""Sealing and verifying ``requestState``, untrusted input: its format and every check are in
docs/request-state.md. Every refusal is the same ``-32602``; the reason goes to the audit log."""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import msgspec
from django.core.signals import setting_changed

from . import protected_resource
from .conf import EndpointSettings, mcp_settings
from .keyring import b64decode, b64encode, keyring, principal_matches
from .protocol.jsonrpc import INVALID_PARAMS, MCPError, canonical

if TYPE_CHECKING:
    from django.http import HttpRequest

VERSION = "v1"
REFUSED_MESSAGE = "the requestState is not valid"
# Params that change between rounds of one request, so out of its digest.
_UNBOUND_PARAMS = frozenset({"_meta", "inputResponses", "requestState"})
_NONCE = 12
_TAG = 16


class Reason(StrEnum):
    MALFORMED = "malformed"
    BAD_SIGNATURE = "bad_signature"
    UNKNOWN_KEY = "unknown_key"
    EXPIRED = "expired"
    WRONG_METHOD = "wrong_method"
    WRONG_TARGET = "wrong_target"
    WRONG_PRINCIPAL = "wrong_principal"
    WRONG_PARAMS = "wrong_params"
    WRONG_AUDIENCE = "wrong_audience"
    TOO_LARGE = "too_large"
    ROUND_CAP = "round_cap"


class StateRefused(MCPError):
    """A requestState that must not reach the handler. ``reason`` is for the log only."""

    def __init__(self, reason: Reason, message: str = REFUSED_MESSAGE) -> None:
        super().__init__(INVALID_PARAMS, message)
        self.reason = reason


def encode_token(payload: bytes) -> str:
    """Sign (or, with ``ENCRYPT_REQUEST_STATE``, seal) ``payload`` with the ring's signing key."""
    key = keyring().signing
    if mcp_settings.ENCRYPT_REQUEST_STATE:
        head = f"{VERSION}.{key.kid}"
        nonce = os.urandom(_NONCE)
        return f"{head}.{b64encode(nonce + key.aead.encrypt(nonce, payload, head.encode()))}"
    signed = f"{VERSION}.{key.kid}.{b64encode(payload)}"
    return f"{signed}.{b64encode(key.mac(signed.encode()))}"


def decode_token(token: object) -> bytes:
    """The payload of a token some key of the ring made, or :class:`StateRefused`."""
    if not isinstance(token, str):
        raise StateRefused(Reason.MALFORMED)
    if len(token) > mcp_settings.MAX_REQUEST_STATE_BYTES:
        raise StateRefused(Reason.TOO_LARGE)
    parts = token.split(".")
    encrypted = mcp_settings.ENCRYPT_REQUEST_STATE
    if parts[0] != VERSION or len(parts) != (3 if encrypted else 4):
        raise StateRefused(Reason.MALFORMED)
    key = keyring().by_kid.get(parts[1])
    if key is None:
        raise StateRefused(Reason.UNKNOWN_KEY)
    try:
        if encrypted:
            sealed = b64decode(parts[2])
            if len(sealed) < _NONCE + _TAG:
                raise StateRefused(Reason.MALFORMED)
            try:
                return key.aead.decrypt(sealed[:_NONCE], sealed[_NONCE:], f"{parts[0]}.{parts[1]}".encode())
            except Exception:
                raise StateRefused(Reason.BAD_SIGNATURE) from None
        # The signed text is the token up to its last dot: "<version>.<kid>.<payload>".
        expected = key.mac(token[: len(token) - len(parts[3]) - 1].encode())
        # Compared as encode_token spells it; otherwise the strict decode picks the refusal.
        if not hmac.compare_digest(parts[3].encode("utf-8", "surrogatepass"), b64encode(expected).encode()):
            b64decode(parts[3])
            raise StateRefused(Reason.BAD_SIGNATURE)
        # The MAC covers the payload's text as encode_token spelled it: no second spelling check.
        return b64decode(parts[2], canonical=False)
    except ValueError:  # a part that is not strict base64url
        raise StateRefused(Reason.MALFORMED) from None


class Claims(msgspec.Struct, kw_only=True):
    """What a requestState carries and what it is bound to (short names: the payload's keys)."""

    method: str = msgspec.field(name="m")
    target: str = msgspec.field(name="t")
    principal: str = msgspec.field(name="p")
    digest: str = msgspec.field(name="d")
    round: int = msgspec.field(default=0, name="r")
    # key -> {"q": digest of the question asked, "a": the client's raw answer}
    answers: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict, name="a")
    # key -> digest of the question this round asked; the retry's answers must match these
    asked: dict[str, str] = msgspec.field(default_factory=dict, name="q")
    state: dict[str, str] = msgspec.field(default_factory=dict, name="s")
    issued_at: int = msgspec.field(default=0, name="iat")
    expires_at: int = msgspec.field(default=0, name="exp")
    # The endpoint that issued it (see :func:`audience`).
    audience: str = msgspec.field(default="", name="aud")


class _Issued(Claims, kw_only=True):
    """Claims as a token carries them: every key required (a key we hold signed it, but be strict anyway)."""

    round: int = msgspec.field(name="r")
    answers: dict[str, dict[str, Any]] = msgspec.field(name="a")
    asked: dict[str, str] = msgspec.field(name="q")
    state: dict[str, str] = msgspec.field(name="s")
    issued_at: int = msgspec.field(name="iat")
    expires_at: int = msgspec.field(name="exp")
    audience: str = msgspec.field(name="aud")

    def __post_init__(self) -> None:
        # Run by the decoder, which refuses the payload when this raises.
        for answer in self.answers.values():
            if "q" not in answer or "a" not in answer:
                raise ValueError("an answer needs its question's digest and the answer")


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(_Issued)


# Audiences found by audience_for(), under what names the URL a request reached.
_audiences: dict[tuple[str, ...], str] = {}
_MAX_AUDIENCES = 1024


def audience_for(request: Callable[[], HttpRequest | None], endpoint: EndpointSettings | None, http: Any = None) -> str:
    """The endpoint a state is sealed for and accepted at: its ``RESOURCE_URL``, else the URL the
    request ``request()`` builds reached (as an OAuth token's audience is). That URL depends only on
    the scheme, the path and the ``Host`` and proxy headers, so one answer serves each such set
    (``http``: the transport's ``HttpIn``) until a setting changes, without building the request."""
    resource: str | None = endpoint.RESOURCE_URL if endpoint is not None else None
    if resource:
        return resource.rstrip("/")
    key = None
    if endpoint is not None and http is not None and http.headers.get("host"):
        from .auth import url_headers

        headers = http.headers
        key = (endpoint.name, http.scheme, http.endpoint, *[headers.get(name, "") for name in url_headers()])
        found = _audiences.get(key)
        if found is not None:
            return found
    built = request()
    if endpoint is None:
        endpoint = mcp_settings.for_request(built)
    if built is None or ("HTTP_HOST" not in built.META and built.META.get("SERVER_NAME") == "unknown"):
        # No address (stdio): the resource URL, else "" (no network endpoint has it), else the endpoint's name.
        resource = (endpoint.RESOURCE_URL or "").rstrip("/")
        return resource or ("" if endpoint.name == "default" else f"endpoint:{endpoint.name}")
    found = protected_resource.resource_url(built, endpoint=endpoint)  # DisallowedHost is never kept
    if key is not None:
        if len(_audiences) >= _MAX_AUDIENCES:
            _audiences.clear()
        _audiences[key] = found
    return found


def _forget_audiences(**kwargs: Any) -> None:
    # ALLOWED_HOSTS, FORCE_SCRIPT_NAME, the proxy settings, RESOURCE_URL: any may change the answers.
    _audiences.clear()


setting_changed.connect(_forget_audiences, dispatch_uid="mcp_django.request_state.audiences")


def params_digest(params: dict[str, Any]) -> str:
    # A copy without the unbound params: three pops, not every key of the params filtered;
    # the keys' order does not matter, as canonical() sorts them.
    bound = params.copy()
    for name in _UNBOUND_PARAMS:
        bound.pop(name, None)
    return b64encode(hashlib.sha256(canonical(bound)).digest())


def seal(claims: Claims, *, now: float | None = None) -> str:
    """The token for ``claims``, issued now and valid for ``REQUEST_STATE_LIFETIME`` seconds."""
    issued = int(now if now is not None else time.time())
    claims.issued_at = issued
    claims.expires_at = issued + mcp_settings.REQUEST_STATE_LIFETIME
    return encode_token(_encoder.encode(claims))


def unseal(
    token: object,
    method: str,
    target: str,
    principal: str | tuple[str, ...],
    digest: str,
    audience: str,
    now: float | None = None,
) -> Claims:
    """Verify a client-supplied requestState, or raise :class:`StateRefused` when it expired or was
    issued for another request (the bindings by position: the boundary matching seven keywords cost
    a tenth of the call). ``principal``: the caller's digest, or its digests under every key of the
    ring (a rotation)."""
    payload = decode_token(token)
    try:
        claims = _decoder.decode(payload)
    # A verified payload of the wrong shape: msgspec.DecodeError and UnicodeDecodeError are both ValueErrors.
    except ValueError:
        raise StateRefused(Reason.MALFORMED) from None
    if (time.time() if now is None else now) >= claims.expires_at:
        raise StateRefused(Reason.EXPIRED)
    # Each binding is compared in constant time; the order only picks the reason logged.
    compare = hmac.compare_digest
    pairs = ((claims.method, method), (claims.target, target), (claims.digest, digest), (claims.audience, audience))
    try:
        # ASCII text is compared as it is (compare_digest takes ASCII str): no bytes made of each.
        same = [compare(ours, theirs) for ours, theirs in pairs]
    except TypeError:
        # Text that is not ASCII (a target's or an audience's may be): compared as UTF-8.
        same = [compare(ours.encode(), theirs.encode()) for ours, theirs in pairs]
    if not same[0]:
        raise StateRefused(Reason.WRONG_METHOD)
    if not same[1]:
        raise StateRefused(Reason.WRONG_TARGET)
    if not principal_matches(claims.principal, principal):
        raise StateRefused(Reason.WRONG_PRINCIPAL)
    if not same[2]:
        raise StateRefused(Reason.WRONG_PARAMS)
    if not same[3]:
        raise StateRefused(Reason.WRONG_AUDIENCE)
    return claims
