"""The keys derived from ``MCP_DJANGO["REQUEST_STATE_KEY"]``, for everything this app signs.

Each secret gives, by HKDF-SHA256 with an info string per use, the keys for ``requestState``,
legacy session ids and principal hashes, so a token made for one use never passes for another.
The first secret signs and every one verifies (rotate by putting the new one first). Without a
configured secret they derive from ``SECRET_KEY`` and ``SECRET_KEY_FALLBACKS`` (a salted HMAC)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.crypto import salted_hmac
from django.utils.http import urlsafe_base64_encode

from .conf import mcp_settings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# Our own salt: nothing else keyed on SECRET_KEY can pass for one of ours, nor the reverse.
SECRET_KEY_SALT = "mcp_django.keyring.default"


def derive_key(secret: bytes, info: bytes, *, salt: bytes = b"mcp-django") -> bytes:
    """A 32-byte key for one use (``info``) of ``secret``: HKDF-SHA256 (RFC 5869), one expand block.

    A replica of cryptography's ``HKDF`` (tests/test_keyring.py holds the two to the same bytes),
    kept for memory: importing cryptography costs 7.4 MiB of RSS, so only a sealed requestState
    (``ENCRYPT_REQUEST_STATE``) imports it (tests/test_lazy_start.py)."""
    prk = hmac.new(salt or bytes(32), secret, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


# base64url without padding (RFC 4648, section 5), the alphabet of every token this app issues.
b64encode = urlsafe_base64_encode


def b64decode(text: str, *, canonical: bool = True) -> bytes:
    """The bytes ``text`` spells, or ``ValueError`` unless it is :func:`b64encode`'s spelling of them.

    Python's decoder accepts several spellings of the same bytes; an edited token must never
    verify. ``canonical=False`` skips the check for a text a verified MAC already covers."""
    data = base64.urlsafe_b64decode(text.encode("ascii") + b"=" * (-len(text) % 4))
    if canonical and (not text or b64encode(data) != text):
        raise ValueError("not canonical base64url")
    return data


def keyed_mac(key: bytes) -> Callable[[bytes], bytes]:
    """HMAC-SHA256 under ``key``, as a function of the message, the key absorbed once
    (``hmac.new`` per message redoes the key schedule: about two thirds of a short token's MAC)."""
    prepared = hmac.new(key, digestmod=hashlib.sha256)

    def mac(message: bytes) -> bytes:
        one = prepared.copy()  # the prepared state is never updated: safe from any thread
        one.update(message)
        return one.digest()

    return mac


@dataclass(frozen=True)
class Key:
    """What one configured secret signs with, under the id tokens name it by."""

    kid: str
    mac_key: bytes  # requestState, signed
    enc_key: bytes = field(repr=False)  # requestState, sealed (AES-256-GCM)
    session_key: bytes  # legacy session ids
    # HMAC-SHA256 under mac_key (requestState, signed), its key schedule done once.
    mac: Callable[[bytes], bytes] = field(repr=False, compare=False)

    @cached_property
    def aead(self) -> AESGCM:
        """AES-256-GCM under ``enc_key``: cryptography is imported by the first sealed state."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        return AESGCM(self.enc_key)


def secrets_from_secret_key(secret_key: str | bytes, fallbacks: list[str | bytes]) -> list[bytes]:
    """The default secrets: one per Django secret key, ``SECRET_KEY`` first (it signs)."""
    return [
        salted_hmac(SECRET_KEY_SALT, "REQUEST_STATE_KEY", secret=key, algorithm="sha256").digest()
        for key in [secret_key, *fallbacks]
    ]


class KeyRing:
    """Keys derived from the configured secrets; the first one signs, every one verifies."""

    def __init__(self, secrets: list[bytes]) -> None:
        self.keys: list[Key] = []
        for secret in secrets:
            mac_key = derive_key(secret, b"mcp-django requestState hmac-sha256 v1")
            enc_key = derive_key(secret, b"mcp-django requestState aes-256-gcm v1")
            kid = b64encode(hashlib.sha256(b"kid" + mac_key).digest()[:6])
            # An info string of its own: a session id never passes for a requestState.
            session_key = derive_key(mac_key, b"mcp-django legacy session v1")
            self.keys.append(Key(kid, mac_key, enc_key, session_key, keyed_mac(mac_key)))
        self.by_kid = {k.kid: k for k in self.keys}
        # One principal key per secret: a state made before a rotation must still match.
        self.principal_keys = [derive_key(s, b"mcp-django principal v1") for s in secrets]
        self.principal_macs = [keyed_mac(key) for key in self.principal_keys]
        # The key new tokens are made with (an attribute: read once a round, a property was a call).
        self.signing: Key = self.keys[0]


_ring_cache: tuple[Any, KeyRing] | None = None


def keyring() -> KeyRing:
    """The ring for the current settings (made anew when the secrets they name change)."""
    global _ring_cache
    configured = mcp_settings.REQUEST_STATE_KEY
    cached = _ring_cache
    if configured and cached is not None and cached[0][0] is configured:
        # The setting's object is kept until MCP_DJANGO changes: several calls a round, none rebuilding the source.
        return cached[1]
    fallbacks = () if configured else tuple(settings.SECRET_KEY_FALLBACKS)
    source = (configured, None if configured else settings.SECRET_KEY, fallbacks)
    if _ring_cache is None or _ring_cache[0] != source:
        secrets = configured or secrets_from_secret_key(settings.SECRET_KEY, list(fallbacks))
        _ring_cache = (source, KeyRing(secrets))
    return _ring_cache[1]


def principal_digests(principal: str) -> tuple[str, ...]:
    """The principal's keyed hash under every key of the ring, the signing key's first (the one
    new tokens carry): tokens never name the user."""
    material = principal.encode()
    return tuple(b64encode(mac(material)[:16]) for mac in keyring().principal_macs)


def principal_matches(claimed: str, principal: str | tuple[str, ...]) -> bool:
    """Whether ``claimed`` names the principal under some key of the ring (constant time each)."""
    digests = (principal,) if isinstance(principal, str) else principal
    # Every digest compared (a list, not any()'s short cut), each in constant time.
    try:
        # Digests are ASCII, compared as they are (compare_digest takes ASCII str).
        return any([hmac.compare_digest(claimed, digest) for digest in digests])
    except TypeError:  # a claim that is not ASCII names nobody, but is compared all the same
        return any([hmac.compare_digest(claimed.encode(), digest.encode()) for digest in digests])
