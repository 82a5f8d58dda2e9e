"""Sealing and verifying ``requestState``.

The token is untrusted input that comes back from the client. It is either
signed (HMAC-SHA256, payload readable) or sealed (AES-256-GCM, payload secret),
with keys derived from ``MCP_DJANGO["REQUEST_STATE_KEY"]`` (:mod:`mcp_django.keyring`):

    v1.<kid>.<payload>.<mac>        signed
    v1.<kid>.<nonce+ciphertext>     sealed

all parts base64url without padding, decoded strictly (:mod:`mcp_django.base64url`).
Claims bind the token to one request: the method, the target, the principal and
a digest of the params, plus an expiry, and to the endpoint it was issued by (its
audience: the endpoint's resource URL), so two deployments or endpoints that share
a key do not accept each other's states. Every refusal reaches the client as the
same ``-32602``; the reason is kept for the audit log.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from . import base64url, protected_resource
from .conf import EndpointSettings, mcp_settings
from .keyring import keyring, principal_matches
from .protocol.jsonrpc import INVALID_PARAMS, MCPError, canonical, dumps, loads

VERSION = "v1"
REFUSED_MESSAGE = "the requestState is not valid"
# Params that change between rounds of one request and so stay out of its digest.
_UNBOUND_PARAMS = frozenset({"_meta", "inputResponses", "requestState"})


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

    def __init__(self, reason: Reason) -> None:
        super().__init__(INVALID_PARAMS, REFUSED_MESSAGE)
        self.reason = reason


@dataclass
class Claims:
    """What a requestState carries and what it is bound to."""

    method: str
    target: str
    principal: str
    digest: str
    round: int = 0
    # key -> {"q": digest of the question asked, "a": the client's raw answer}
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # key -> digest of the question this round asked; the retry's answers must match these
    asked: dict[str, str] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)
    issued_at: int = 0
    expires_at: int = 0
    # The endpoint that issued it (see :func:`audience`).
    audience: str = ""


def audience(request: Any, endpoint: EndpointSettings | None = None) -> str:
    """The endpoint a state is sealed for and accepted at: its canonical resource URL.

    The endpoint's ``RESOURCE_URL`` when set, else the scheme, host and path the request
    reached (as an OAuth token's audience is): a state issued at one endpoint, or by
    another deployment that shares ``REQUEST_STATE_KEY``, is refused at another.
    ``endpoint``: the settings of the endpoint serving the call (by default, the request's).
    """
    if endpoint is None:
        endpoint = mcp_settings.for_request(request)
    if request is None or ("HTTP_HOST" not in request.META and request.META.get("SERVER_NAME") == "unknown"):
        # No address to bind to (stdio: one local client on a pipe): the configured resource
        # URL, else the empty audience, which no endpoint reached over the network has (and,
        # for another endpoint than the default, its name: each endpoint's states are its own).
        resource = (endpoint.RESOURCE_URL or "").rstrip("/")
        return resource or ("" if endpoint.name == "default" else f"endpoint:{endpoint.name}")
    return protected_resource.resource_url(request, endpoint=endpoint)


def params_digest(params: dict[str, Any]) -> str:
    bound = {k: v for k, v in params.items() if k not in _UNBOUND_PARAMS}
    return base64url.encode(hashlib.sha256(canonical(bound)).digest())


def seal(claims: Claims, *, now: float | None = None) -> str:
    key = keyring().signing
    issued = int(now if now is not None else time.time())
    claims.issued_at = issued
    claims.expires_at = issued + mcp_settings.REQUEST_STATE_LIFETIME
    payload = dumps(
        {
            "m": claims.method,
            "t": claims.target,
            "p": claims.principal,
            "d": claims.digest,
            "r": claims.round,
            "a": claims.answers,
            "q": claims.asked,
            "s": claims.state,
            "iat": claims.issued_at,
            "exp": claims.expires_at,
            "aud": claims.audience,
        }
    )
    head = f"{VERSION}.{key.kid}"
    if mcp_settings.ENCRYPT_REQUEST_STATE:
        nonce = os.urandom(12)
        return f"{head}.{base64url.encode(nonce + key.aead.encrypt(nonce, payload, head.encode()))}"
    body = base64url.encode(payload)
    mac = hmac.new(key.mac_key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{base64url.encode(mac)}"


def unseal(
    token: Any,
    *,
    method: str,
    target: str,
    principal: str | tuple[str, ...],
    digest: str,
    audience: str,
    now: float | None = None,
) -> Claims:
    """Verify a client-supplied requestState, or raise :class:`StateRefused`.

    ``principal`` is the caller's digest, or its digests under every key of the
    ring (:func:`~mcp_django.keyring.principal_digests`): a state sealed before
    a key rotation names its principal with the old key.
    """
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
    head = f"{parts[0]}.{parts[1]}"
    try:
        if encrypted:
            sealed = base64url.decode(parts[2])
            if len(sealed) < 12 + 16:
                raise StateRefused(Reason.MALFORMED)
            try:
                payload = key.aead.decrypt(sealed[:12], sealed[12:], head.encode())
            except Exception:
                raise StateRefused(Reason.BAD_SIGNATURE) from None
        else:
            mac = base64url.decode(parts[3])
            expected = hmac.new(key.mac_key, f"{head}.{parts[2]}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(mac, expected):
                raise StateRefused(Reason.BAD_SIGNATURE)
            payload = base64url.decode(parts[2])
        data = loads(payload)
    except ValueError:
        raise StateRefused(Reason.MALFORMED) from None
    claims = _claims_from(data)
    if (now if now is not None else time.time()) >= claims.expires_at:
        raise StateRefused(Reason.EXPIRED)
    # Each binding is compared in constant time; the order only picks the reason logged.
    if not hmac.compare_digest(claims.method.encode(), method.encode()):
        raise StateRefused(Reason.WRONG_METHOD)
    if not hmac.compare_digest(claims.target.encode(), target.encode()):
        raise StateRefused(Reason.WRONG_TARGET)
    if not principal_matches(claims.principal, principal):
        raise StateRefused(Reason.WRONG_PRINCIPAL)
    if not hmac.compare_digest(claims.digest.encode(), digest.encode()):
        raise StateRefused(Reason.WRONG_PARAMS)
    if not hmac.compare_digest(claims.audience.encode(), audience.encode()):
        raise StateRefused(Reason.WRONG_AUDIENCE)
    return claims


def _claims_from(data: Any) -> Claims:
    """Shape-check a verified payload (a key we hold signed it, but be strict anyway)."""
    try:
        claims = Claims(
            method=data["m"],
            target=data["t"],
            principal=data["p"],
            digest=data["d"],
            round=data["r"],
            answers=data["a"],
            asked=data["q"],
            state=data["s"],
            issued_at=data["iat"],
            expires_at=data["exp"],
            audience=data["aud"],
        )
    except (KeyError, TypeError):
        raise StateRefused(Reason.MALFORMED) from None
    strings = (claims.method, claims.target, claims.principal, claims.digest, claims.audience)
    if (
        not all(isinstance(s, str) for s in strings)
        or not isinstance(claims.round, int)
        or not isinstance(claims.answers, dict)
        or not isinstance(claims.state, dict)
        or not isinstance(claims.asked, dict)
        or not isinstance(claims.expires_at, int)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in claims.state.items())
        or not all(isinstance(v, dict) and "q" in v and "a" in v for v in claims.answers.values())
    ):
        raise StateRefused(Reason.MALFORMED)
    return claims
