"""The keys derived from ``MCP_DJANGO["REQUEST_STATE_KEY"]``, for everything this app signs.

Each configured secret gives, by HKDF-SHA256 with an info string per use, the
keys that sign and seal ``requestState`` (:mod:`mcp_django.request_state`), the
key that signs legacy session ids (:mod:`mcp_django.protocol.legacy`) and the key
that hashes principals, so a token made for one use never passes for another.
The first secret signs; every one verifies, so a secret can be rotated by
putting the new one first. Without a configured secret each process draws one
at random (``ephemeral``): nothing it signed survives a restart or verifies in
another process.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from . import base64url
from .conf import mcp_settings

_EPHEMERAL_SECRET = os.urandom(32)


def derive_key(secret: bytes, info: bytes) -> bytes:
    """A 32-byte key for one use (``info``) of ``secret``."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"mcp-django", info=info).derive(secret)


@dataclass(frozen=True)
class Key:
    """What one configured secret signs with, under the id tokens name it by."""

    kid: str
    mac_key: bytes  # requestState, signed
    aead: AESGCM  # requestState, sealed
    session_key: bytes  # legacy session ids


class KeyRing:
    """Keys derived from the configured secrets; the first one signs, every one verifies."""

    def __init__(self, secrets: list[bytes] | None) -> None:
        self.ephemeral = not secrets
        self.keys: list[Key] = []
        for secret in secrets or [_EPHEMERAL_SECRET]:
            mac_key = derive_key(secret, b"mcp-django requestState hmac-sha256 v1")
            enc_key = derive_key(secret, b"mcp-django requestState aes-256-gcm v1")
            kid = base64url.encode(hashlib.sha256(b"kid" + mac_key).digest()[:6])
            # Derived from the requestState MAC key with an info string of its own: a
            # session id can never pass for a requestState, nor the reverse.
            session_key = derive_key(mac_key, b"mcp-django legacy session v1")
            self.keys.append(Key(kid, mac_key, AESGCM(enc_key), session_key))
        self.by_kid = {k.kid: k for k in self.keys}
        # One principal key per secret: a state or session made before a rotation
        # names its principal with the old secret's key, and must still match.
        self.principal_keys = [derive_key(s, b"mcp-django principal v1") for s in secrets or [_EPHEMERAL_SECRET]]

    @property
    def signing(self) -> Key:
        """The key new tokens are made with."""
        return self.keys[0]


_ring_cache: tuple[Any, KeyRing] | None = None


def keyring() -> KeyRing:
    """The ring for the current settings (made anew when ``REQUEST_STATE_KEY`` changes)."""
    global _ring_cache
    secrets = mcp_settings.REQUEST_STATE_KEY
    if _ring_cache is None or _ring_cache[0] != secrets:
        _ring_cache = (secrets, KeyRing(secrets))
    return _ring_cache[1]


def principal_digest(principal: str) -> str:
    """A keyed hash of the principal (under the signing key): tokens never name the user."""
    return principal_digests(principal)[0]


def principal_digests(principal: str) -> tuple[str, ...]:
    """The principal's keyed hash under every key of the ring, the signing key's first."""
    material = principal.encode()
    return tuple(
        base64url.encode(hmac.new(key, material, hashlib.sha256).digest()[:16]) for key in keyring().principal_keys
    )


def principal_matches(claimed: str, principal: str | tuple[str, ...]) -> bool:
    """Whether ``claimed`` names the principal under some key of the ring (constant time each)."""
    digests = (principal,) if isinstance(principal, str) else principal
    found = False
    for digest in digests:
        found |= hmac.compare_digest(claimed.encode(), digest.encode())
    return found
