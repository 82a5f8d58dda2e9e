"""Sealing and verifying ``requestState``.

The token is untrusted input that comes back from the client. It is either
signed (HMAC-SHA256, payload readable) or sealed (AES-256-GCM, payload secret),
with keys derived by HKDF from ``MCP_DJANGO["REQUEST_STATE_KEY"]``:

    v1.<kid>.<payload>.<mac>        signed
    v1.<kid>.<nonce+ciphertext>     sealed

all parts base64url without padding. Claims bind the token to one request: the
method, the target, the principal and a digest of the params, plus an expiry.
Every refusal reaches the client as the same ``-32602``; the reason is kept for
the audit log.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .conf import mcp_settings
from .protocol.jsonrpc import INVALID_PARAMS, MCPError, canonical, dumps, loads

VERSION = "v1"
REFUSED_MESSAGE = "the requestState is not valid"
_EPHEMERAL_SECRET = os.urandom(32)
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


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict base64url: one spelling per byte string.

    Python's decoder skips characters outside the alphabet and ignores the unused
    low bits of the last character, so several spellings decode alike; an edited
    token must never verify, so anything but the canonical spelling is refused.
    """
    if not text or len(text) % 4 == 1 or not _B64URL.fullmatch(text):
        raise ValueError("not base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not canonical base64url")
    return data


_B64URL = re.compile(r"[A-Za-z0-9_-]+")


def _hkdf(secret: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"mcp-django", info=info).derive(secret)


@dataclass(frozen=True)
class _Key:
    kid: str
    mac_key: bytes
    aead: AESGCM


class KeyRing:
    """Keys derived from the configured secrets; the first one seals, every one verifies."""

    def __init__(self, secrets: list[bytes] | None) -> None:
        self.ephemeral = not secrets
        self.keys: list[_Key] = []
        for secret in secrets or [_EPHEMERAL_SECRET]:
            mac_key = _hkdf(secret, b"mcp-django requestState hmac-sha256 v1")
            enc_key = _hkdf(secret, b"mcp-django requestState aes-256-gcm v1")
            kid = _b64(hashlib.sha256(b"kid" + mac_key).digest()[:6])
            self.keys.append(_Key(kid, mac_key, AESGCM(enc_key)))
        self.by_kid = {k.kid: k for k in self.keys}
        # One principal key per secret: a state or session made before a rotation
        # names its principal with the old secret's key, and must still match.
        self.principal_keys = [_hkdf(s, b"mcp-django principal v1") for s in secrets or [_EPHEMERAL_SECRET]]
        # Legacy session ids are signed with keys of their own (mcp_django.protocol.legacy).
        self.session_keys: dict[str, bytes] = {}


_ring_cache: tuple[Any, KeyRing] | None = None


def keyring() -> KeyRing:
    global _ring_cache
    secrets = mcp_settings.REQUEST_STATE_KEY
    if _ring_cache is None or _ring_cache[0] != secrets:
        _ring_cache = (secrets, KeyRing(secrets))
    return _ring_cache[1]


def principal_digest(principal: str) -> str:
    """A keyed hash of the principal (under the sealing key): the state never names the user."""
    return principal_digests(principal)[0]


def principal_digests(principal: str) -> tuple[str, ...]:
    """The principal's keyed hash under every key of the ring, the sealing key's first."""
    material = principal.encode()
    return tuple(_b64(hmac.new(key, material, hashlib.sha256).digest()[:16]) for key in keyring().principal_keys)


def principal_matches(claimed: str, principal: str | tuple[str, ...]) -> bool:
    """Whether ``claimed`` names the principal under some key of the ring (constant time each)."""
    digests = (principal,) if isinstance(principal, str) else principal
    found = False
    for digest in digests:
        found |= hmac.compare_digest(claimed.encode(), digest.encode())
    return found


def params_digest(params: dict[str, Any]) -> str:
    bound = {k: v for k, v in params.items() if k not in _UNBOUND_PARAMS}
    return _b64(hashlib.sha256(canonical(bound)).digest())


def seal(claims: Claims, *, now: float | None = None) -> str:
    ring = keyring()
    key = ring.keys[0]
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
        }
    )
    head = f"{VERSION}.{key.kid}"
    if mcp_settings.ENCRYPT_REQUEST_STATE:
        nonce = os.urandom(12)
        return f"{head}.{_b64(nonce + key.aead.encrypt(nonce, payload, head.encode()))}"
    body = _b64(payload)
    mac = hmac.new(key.mac_key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(mac)}"


def unseal(
    token: Any,
    *,
    method: str,
    target: str,
    principal: str | tuple[str, ...],
    digest: str,
    now: float | None = None,
) -> Claims:
    """Verify a client-supplied requestState, or raise :class:`StateRefused`.

    ``principal`` is the caller's digest, or its digests under every key of the
    ring (:func:`principal_digests`): a state sealed before a key rotation names
    its principal with the old key.
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
            sealed = _unb64(parts[2])
            if len(sealed) < 12 + 16:
                raise StateRefused(Reason.MALFORMED)
            try:
                payload = key.aead.decrypt(sealed[:12], sealed[12:], head.encode())
            except Exception:
                raise StateRefused(Reason.BAD_SIGNATURE) from None
        else:
            mac = _unb64(parts[3])
            expected = hmac.new(key.mac_key, f"{head}.{parts[2]}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(mac, expected):
                raise StateRefused(Reason.BAD_SIGNATURE)
            payload = _unb64(parts[2])
        data = loads(payload)
    except (ValueError, binascii.Error):
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
        )
    except (KeyError, TypeError):
        raise StateRefused(Reason.MALFORMED) from None
    strings = (claims.method, claims.target, claims.principal, claims.digest)
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
