"""DPoP (RFC 9449): access tokens bound to a key the client proves, on each request, that it holds.

The authentication classes of OAuth access tokens and of MCP tokens call :func:`enforce` once a
token is valid; the checks and why each is there: docs/authorization.md, "DPoP"."""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.exceptions import DisallowedHost

from ..breaker import Breaker
from ..conf import EndpointSettings, mcp_settings
from ..keyring import b64decode, b64encode, derive_key, keyring
from ..protected_resource import canonical_resource, refuse
from ..protocol.jsonrpc import Unavailable
from ..tokens.models import token_checksum

TYP = "dpop+jwt"
# A proof is a few hundred bytes (with an RSA key a little over a kilobyte).
MAX_PROOF_BYTES = 8 * 1024
MAX_JTI_CHARS = 256
# While the replay cache is away, one request this often asks it again (the others are answered 503 at once).
RETRY_SECONDS = 0.25

INVALID_PROOF = "invalid_dpop_proof"
USE_NONCE = "use_dpop_nonce"


class ProofRefused(Exception):
    """A proof (or its absence) the request cannot pass with: the RFC's ``error`` and why."""

    def __init__(self, error: str, description: str, nonce: str | None = None) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.nonce = nonce


def credentials(request: Any) -> tuple[Any, str, str] | None:
    """``(Django's request, "bearer" | "dpop", token)`` from the ``Authorization`` of ``request``
    (DRF's); None for another scheme, and for DPoP where the endpoint's ``DPOP`` is off."""
    django_request = getattr(request, "_request", request)
    scheme, _, value = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    scheme = scheme.lower()
    if scheme not in ("bearer", "dpop") or (scheme == "dpop" and mode(django_request) == "off"):
        return None
    return django_request, scheme, value.strip()


def mode(request: Any) -> str:
    """The ``DPOP`` setting of the endpoint ``request`` (Django's) reached."""
    return str(mcp_settings.for_request(request).DPOP)


# A websocket's upgrade is the http(s) request it began as (the URL a token's audience names).
_UPGRADED = {"ws": "http", "wss": "https"}


def normalized_url(url: Any) -> str | None:
    """``url`` as ``htu`` is compared (RFC 9449 section 4.3): without query or fragment, in
    canonical form, the empty path written ``/``. None when it is no http(s) URL."""
    if not isinstance(url, str):
        return None
    base = url.split("#", 1)[0].split("?", 1)[0]
    scheme, sep, rest = base.partition("://")
    found = canonical_resource(f"{_UPGRADED.get(scheme.lower(), scheme)}://{rest}" if sep else base)
    if found is None:
        return None
    return found if "/" in found.split("://", 1)[1] else found + "/"


def _nonce_keys() -> list[bytes]:
    # From the key ring: every instance makes and checks the same nonces without shared state.
    return [derive_key(key.mac_key, b"mcp-django dpop nonce v1") for key in keyring().keys]


def _nonce_for(period: int, key: bytes) -> str:
    stamp = struct.pack(">Q", period)
    return b64encode(stamp + hmac.new(key, stamp, hashlib.sha256).digest()[:16])


def new_nonce(now: float | None = None) -> str:
    """A nonce good for this period of ``DPOP_NONCE_SECONDS`` and the next."""
    seconds = mcp_settings.DPOP_NONCE_SECONDS
    return _nonce_for(int((now or time.time()) // seconds), _nonce_keys()[0])


def nonce_valid(nonce: Any, now: float | None = None) -> bool:
    seconds = mcp_settings.DPOP_NONCE_SECONDS
    if not isinstance(nonce, str) or len(nonce) > 64:
        return False
    try:
        (period,) = struct.unpack(">Q", b64decode(nonce)[:8])
    except Exception:
        return False
    current = int((now or time.time()) // seconds)
    if period not in (current, current - 1):
        return False
    return any(hmac.compare_digest(_nonce_for(period, key), nonce) for key in _nonce_keys())


_replay_cache = Breaker(
    "the DPoP replay cache (SESSION_CACHE)", retry=RETRY_SECONDS, meanwhile="DPoP requests are answered 503"
)
# Its threads start with the first proof a shared cache records.
_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp-dpop-replay")


def first_use(jkt: str, jti: str) -> bool:
    """Record the proof ``jti`` of the key ``jkt``: False when it was recorded before (a replay); :class:`Unavailable`
    when the shared cache does not answer within ``SESSION_CACHE_TIMEOUT``, or failed a moment ago."""
    cache = caches[mcp_settings.SESSION_CACHE]
    # Remembered while a proof with this jti could still pass the iat check, and a second more.
    timeout = int(2 * mcp_settings.DPOP_PROOF_WINDOW) + 1
    # A jti is unique per key (section 11.1); hashed, so any text makes a valid cache key.
    key = "mcp_django:dpop:jti:" + hashlib.sha256(f"{jkt}\0{jti}".encode()).hexdigest()
    if isinstance(cache, LocMemCache):
        return bool(cache.add(key, 1, timeout))  # this process's memory: nothing to wait for
    if not _replay_cache.admit():
        raise Unavailable("the DPoP replay cache")
    try:
        added = _executor.submit(cache.add, key, 1, timeout).result(timeout=mcp_settings.SESSION_CACHE_TIMEOUT)
    except Exception as exc:  # a TimeoutError when it did not answer in time
        _replay_cache.failed(exc)
        raise Unavailable("the DPoP replay cache") from None
    _replay_cache.closed()
    return bool(added)


def header_proof(request: Any) -> str:
    proof = request.META.get("HTTP_DPOP")
    if not proof:
        raise ProofRefused(INVALID_PROOF, "A DPoP-bound token needs a DPoP proof in the DPoP header.")
    # Django joins repeated headers with commas; a compact JWS has none (section 4.3, check 1).
    if "," in proof or len(proof) > MAX_PROOF_BYTES:
        raise ProofRefused(INVALID_PROOF, "Send exactly one DPoP proof.")
    return str(proof).strip()


def verify(request: Any, proof: str, *, access_token: str | None = None, jkt: str | None = None) -> str:
    """Check ``proof`` for ``request`` (Django's) as RFC 9449 section 4.3 says; its key's thumbprint.

    ``access_token``: the token whose hash must be ``ath``; ``jkt``: the thumbprint it is bound
    to. Raises :class:`ProofRefused`, or :class:`Unavailable` (the ``jti`` cannot be recorded).
    """
    from jwcrypto.common import JWException
    from jwcrypto.jwk import JWK
    from jwcrypto.jws import JWS

    settings: EndpointSettings = mcp_settings.for_request(request)
    algorithms = list(settings.DPOP_ALGORITHMS)
    jws = JWS()
    try:
        if proof.count(".") != 2:
            raise ValueError("not a compact JWS")
        jws.deserialize(proof)
        header = jws.jose_header
        if header.get("typ") != TYP:
            raise ProofRefused(INVALID_PROOF, f'The DPoP proof\'s typ must be "{TYP}".')
        alg = header.get("alg")
        if alg not in algorithms:
            raise ProofRefused(INVALID_PROOF, f"The DPoP proof's alg must be one of {', '.join(algorithms)}.")
        public = header.get("jwk")
        if not isinstance(public, dict):
            raise ProofRefused(INVALID_PROOF, "The DPoP proof's header has no jwk.")
        key = JWK(**public)
        if key.has_private or key.get("kty") not in ("EC", "RSA", "OKP"):
            raise ProofRefused(INVALID_PROOF, "The DPoP proof's jwk must be an asymmetric public key.")
        jws.allowed_algs = [alg]
        jws.verify(key, alg=alg)
        claims = json.loads(jws.payload)
    except ProofRefused:
        raise
    except (JWException, ValueError, TypeError, KeyError, AttributeError, UnicodeError):
        raise ProofRefused(INVALID_PROOF, "The DPoP proof is not a JWT signed by its jwk.") from None
    if not isinstance(claims, dict):
        raise ProofRefused(INVALID_PROOF, "The DPoP proof's payload is not a JSON object.")
    jti, htm, htu, iat = claims.get("jti"), claims.get("htm"), claims.get("htu"), claims.get("iat")
    if not isinstance(jti, str) or not jti or len(jti) > MAX_JTI_CHARS:
        raise ProofRefused(INVALID_PROOF, "The DPoP proof needs a jti.")
    if htm != request.method:
        raise ProofRefused(INVALID_PROOF, "The DPoP proof's htm is not this request's method.")
    try:
        url = normalized_url(request.build_absolute_uri(request.path))  # as the client sent it
    except DisallowedHost:
        url = None  # a forwarded host ALLOWED_HOSTS does not name: no URL a proof may sign
    if normalized_url(htu) is None or normalized_url(htu) != url:
        raise ProofRefused(INVALID_PROOF, "The DPoP proof's htu is not this request's URL.")
    if mcp_settings.DPOP_NONCE_SECONDS and not nonce_valid(claims.get("nonce")):
        raise ProofRefused(USE_NONCE, "This server requires a nonce it issued in the DPoP proof.", nonce=new_nonce())
    if isinstance(iat, bool) or not isinstance(iat, (int, float)):
        raise ProofRefused(INVALID_PROOF, "The DPoP proof needs an iat.")
    if abs(time.time() - iat) > settings.DPOP_PROOF_WINDOW:
        raise ProofRefused(INVALID_PROOF, "The DPoP proof's iat is too far from the server's clock.")
    if access_token is not None:
        ath = b64encode(hashlib.sha256(access_token.encode("ascii", "replace")).digest())
        if not hmac.compare_digest(str(claims.get("ath", "")), ath):
            raise ProofRefused(INVALID_PROOF, "The DPoP proof's ath is not the access token's hash.")
    found = str(key.thumbprint())  # RFC 7638, SHA-256: what cnf.jkt holds
    if jkt is not None and not hmac.compare_digest(found, jkt):
        raise ProofRefused(INVALID_PROOF, "The DPoP proof is not signed by the key the access token is bound to.")
    if not first_use(found, jti):
        raise ProofRefused(INVALID_PROOF, "The DPoP proof was used before.")
    return found


def enforce(drf_request: Any, request: Any, scheme: str, token: str, jkt: str) -> None:
    """Raise DRF's ``AuthenticationFailed`` (the RFC's error on ``drf_request``) unless a token
    found valid may be used as it came: ``scheme`` (:func:`credentials`) with ``jkt``, the
    thumbprint it is bound to ("" for a bearer token). ``request``: Django's."""
    setting = mode(request)
    if scheme == "bearer":
        if jkt:
            # Section 7.2: a bound token is never good as a bearer token (that is the point).
            refuse(drf_request, "This access token is DPoP-bound: send it as DPoP, with a proof.", scheme="DPoP")
        if setting == "required":
            refuse(drf_request, "This endpoint accepts only DPoP-bound access tokens.", scheme="DPoP")
        return
    if not jkt:
        refuse(drf_request, "This access token is not DPoP-bound: send it as a Bearer token.", scheme="DPoP")
    # A websocket's connection holds (the token's checksum, its key's thumbprint) from its upgrade on.
    connection = getattr(request, "mcp_connection", None)
    held = (token_checksum(token), jkt)
    if connection is not None and getattr(connection, "dpop_binding", None) == held:
        return  # checked at the connection's upgrade; the same token and key since
    try:
        verify(request, header_proof(request), access_token=token, jkt=jkt)
    except ProofRefused as exc:
        nonce = [("dpop-nonce", exc.nonce)] if exc.nonce else None
        refuse(drf_request, exc.description, exc.error, scheme="DPoP", headers=nonce)
    if connection is not None:
        connection.dpop_binding = held
