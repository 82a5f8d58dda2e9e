"""A DPoP client for the tests (RFC 9449), on jwcrypto: a key, its proofs, and an httpx2 auth
that sends a bound token with a fresh proof on every request (and retries once with the
server's nonce when it asks for one), so the official Python SDK's client speaks DPoP."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Generator
from typing import Any

import httpx2
from jwcrypto.common import base64url_encode
from jwcrypto.jwk import JWK
from jwcrypto.jws import JWS


class DPoPKey:
    """A client's key pair and the proofs it signs."""

    def __init__(self, kty: str = "EC", alg: str = "ES256") -> None:
        if kty == "EC":
            self.key = JWK.generate(kty="EC", crv="P-256")
        elif kty == "OKP":
            self.key = JWK.generate(kty="OKP", crv="Ed25519")
        else:
            self.key = JWK.generate(kty="RSA", size=2048)
        self.alg = alg

    @property
    def jkt(self) -> str:
        return str(self.key.thumbprint())

    def proof(
        self,
        method: str,
        url: str,
        token: str | None = None,
        *,
        iat: float | None = None,
        jti: str | None = None,
        nonce: str | None = None,
        header: dict[str, Any] | None = None,
        claims: dict[str, Any] | None = None,
    ) -> str:
        """A proof for ``method`` ``url`` (and ``token``: its ``ath``); ``header``/``claims`` override."""
        body: dict[str, Any] = {
            "jti": jti or str(uuid.uuid4()),
            "htm": method,
            "htu": url,
            "iat": int(time.time() if iat is None else iat),
        }
        if token is not None:
            body["ath"] = base64url_encode(hashlib.sha256(token.encode()).digest())
        if nonce is not None:
            body["nonce"] = nonce
        body.update(claims or {})
        protected = {"typ": "dpop+jwt", "alg": self.alg, **(header or {})}
        if "jwk" not in protected:
            protected["jwk"] = self.key.export_public(as_dict=True)
        jws = JWS(json.dumps(body))
        jws.add_signature(self.key, alg=protected["alg"], protected=json.dumps(protected))
        return str(jws.serialize(compact=True))


class DPoPAuth(httpx2.Auth):
    """``Authorization: DPoP <token>`` and a new proof on each request."""

    def __init__(self, key: DPoPKey, token: str) -> None:
        self.key = key
        self.token = token
        self.nonce: str | None = None
        self.proofs = 0

    def _sign(self, request: httpx2.Request) -> None:
        self.proofs += 1
        request.headers["Authorization"] = f"DPoP {self.token}"
        request.headers["DPoP"] = self.key.proof(request.method, str(request.url), self.token, nonce=self.nonce)

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        self._sign(request)
        response = yield request
        if response.status_code == 401 and "use_dpop_nonce" in response.headers.get("www-authenticate", ""):
            self.nonce = response.headers.get("dpop-nonce")
            self._sign(request)
            yield request
