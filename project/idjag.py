"""Enterprise-managed authorization (SEP-990): the RFC 7523 jwt-bearer grant with an ID-JAG.

A company's identity provider issues its signed-in user an Identity Assertion JWT
Authorization Grant (draft-ietf-oauth-identity-assertion-authz-grant): a JWT of type
``oauth-id-jag+jwt`` naming the user (``sub``, ``email``), this authorization server
(``aud``), the MCP client (``client_id``) and the MCP server (``resource``). The client
presents it at the token endpoint with ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``
and its own credentials, and gets an access token for that user with no consent screen:
the company's policy, at its identity provider, was the consent.

Checked here, each against a threat:

- the signature, by a key of the issuer's JWKS, for an issuer in ``settings.ID_JAG_ISSUERS``
  (``{issuer: {"jwks_uri": url} or {"jwks": {...}}}``): a forged or foreign assertion;
- ``typ`` ``oauth-id-jag+jwt``: an ID token or other JWT of the same provider passed off as a grant;
- ``aud`` this server's issuer: an assertion meant for another authorization server;
- ``client_id`` the client that authenticated (confidential clients only): one client using
  an assertion issued to another;
- ``resource`` present, and the one the client asks for: a token for a server the company
  did not approve;
- ``exp`` (and ``iat`` not in the future): an old assertion;
- ``jti`` never seen before, until the assertion expires (the shared cache): a replay;
- the user: ``settings.ID_JAG_USER`` (a dotted path; :func:`user_for_assertion` by default)
  maps the claims to an active account, or refuses.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.request
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils.module_loading import import_string
from oauthlib.oauth2.rfc6749 import errors
from oauthlib.oauth2.rfc6749.grant_types.base import GrantTypeBase

from mcp_django.protected_resource import canonical_resource

logger = logging.getLogger("project")

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TYP = "oauth-id-jag+jwt"
ALGORITHMS = ["RS256", "PS256", "ES256", "ES384", "EdDSA"]
# Clock skew allowed on exp and iat.
LEEWAY = 30
# A JWKS document: fetched within this many seconds, at most this many bytes, kept this long.
JWKS_TIMEOUT = 5
JWKS_MAX_BYTES = 64 * 1024
JWKS_SECONDS = 300

_jwks: dict[str, tuple[float, Any]] = {}


def _keys(issuer: str) -> Any:
    """The JWK set trusted for ``issuer`` (a jwcrypto JWKSet); None for an issuer not trusted."""
    from jwcrypto.jwk import JWKSet

    trusted = getattr(settings, "ID_JAG_ISSUERS", {}).get(issuer)
    if not isinstance(trusted, dict):
        return None
    if "jwks" in trusted:
        return JWKSet.from_json(json.dumps(trusted["jwks"]))
    url = trusted["jwks_uri"]
    found = _jwks.get(url)
    if found is not None and found[0] > time.monotonic():
        return found[1]
    with urllib.request.urlopen(url, timeout=JWKS_TIMEOUT) as answer:
        body = answer.read(JWKS_MAX_BYTES + 1)
    if len(body) > JWKS_MAX_BYTES:
        raise ValueError(f"the JWKS at {url} is larger than {JWKS_MAX_BYTES} bytes")
    keys = JWKSet.from_json(body.decode())
    _jwks[url] = (time.monotonic() + JWKS_SECONDS, keys)
    return keys


def user_for_assertion(claims: dict[str, Any], issuer: str) -> Any:
    """The default mapping (``settings.ID_JAG_USER``): the one active user whose email is the
    assertion's ``email``; None (refused) when there is none or more than one."""
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        return None
    found = list(get_user_model()._default_manager.filter(email__iexact=email, is_active=True)[:2])
    return found[0] if len(found) == 1 else None


def _refuse(description: str, request: Any) -> errors.InvalidGrantError:
    return errors.InvalidGrantError(description=description, request=request)


ISSUER_KEY = "mcp_django.issuer"


def issuer_of(request: Any) -> str:
    """This authorization server's issuer (what ``aud`` must be), as the token view found it
    (project.authserver.TokenView: the token endpoint's absolute URL, without ``/token/``)."""
    return str(request.headers.get(ISSUER_KEY, ""))


def verify(assertion: str, request: Any) -> dict[str, Any]:
    """The claims of ``assertion`` once every check above has passed; raises ``InvalidGrantError``."""
    from jwcrypto.common import JWException
    from jwcrypto.jws import JWS

    jws = JWS()
    try:
        jws.deserialize(assertion)
        header = jws.jose_header
        unverified = json.loads(jws.objects["payload"])
    except (JWException, ValueError, TypeError, KeyError):
        raise _refuse("The assertion is not a JWT.", request) from None
    if header.get("typ") != TYP:
        raise _refuse(f'The assertion\'s typ must be "{TYP}".', request)
    if header.get("alg") not in ALGORITHMS:
        raise _refuse("The assertion's alg is not an accepted asymmetric algorithm.", request)
    issuer = unverified.get("iss") if isinstance(unverified, dict) else None
    try:
        keys = _keys(issuer) if isinstance(issuer, str) else None
    except Exception as exc:
        logger.warning("could not read the JWKS of the identity provider %s: %s", issuer, exc)
        raise errors.TemporarilyUnavailableError(description="The identity provider's keys are unavailable.") from None
    if keys is None:
        raise _refuse("The assertion's issuer is not a trusted identity provider.", request)
    try:
        jws.allowed_algs = [header["alg"]]
        jws.verify(keys, alg=header["alg"])
        claims = json.loads(jws.payload)
    except (JWException, ValueError, TypeError, KeyError):
        raise _refuse("The assertion's signature is not its issuer's.", request) from None
    now = time.time()
    if claims.get("aud") != issuer_of(request) and issuer_of(request) not in (claims.get("aud") or []):
        raise _refuse("The assertion is not for this authorization server (aud).", request)
    if claims.get("client_id") != request.client_id:
        raise _refuse("The assertion was issued to another client (client_id).", request)
    resource = claims.get("resource")
    if not isinstance(resource, str) or canonical_resource(resource) is None:
        raise _refuse("The assertion names no resource.", request)
    asked = request.resource
    if asked and canonical_resource(str(asked)) != canonical_resource(resource):
        raise _refuse("The assertion is for another resource.", request)
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool) or exp + LEEWAY < now:
        raise _refuse("The assertion has expired.", request)
    if isinstance(iat, (int, float)) and not isinstance(iat, bool) and iat - LEEWAY > now:
        raise _refuse("The assertion was issued in the future.", request)
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise _refuse("The assertion has no jti.", request)
    key = "idjag:jti:" + hashlib.sha256(f"{issuer}\0{jti}".encode()).hexdigest()
    if not cache.add(key, 1, int(exp - now) + LEEWAY + 1):
        raise _refuse("The assertion was used before.", request)
    return dict(claims)


class IdentityAssertionGrant(GrantTypeBase):
    """``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` with an ID-JAG as ``assertion``."""

    def create_token_response(self, request: Any, token_handler: Any) -> tuple[dict[str, str], str, int]:
        headers = self._get_default_headers()
        try:
            self.validate_token_request(request)
        except errors.OAuth2Error as e:
            headers.update(e.headers)
            return headers, e.json, e.status_code
        token = token_handler.create_token(request, refresh_token=False)
        for modifier in self._token_modifiers:
            token = modifier(token)
        self.request_validator.save_token(token, request)
        return headers, json.dumps(token), 200

    def validate_token_request(self, request: Any) -> None:
        if request.grant_type != GRANT_TYPE:
            raise errors.UnsupportedGrantTypeError(request=request)
        for param in ("grant_type", "scope", "assertion", "resource"):
            if param in request.duplicate_params:
                raise errors.InvalidRequestError(description=f"Duplicate {param} parameter.", request=request)
        assertion = dict(request.decoded_body or []).get("assertion")
        if not assertion:
            raise errors.InvalidRequestError(description="Missing the assertion parameter.", request=request)
        self.validate_client_confidential(request)
        if not self.request_validator.validate_grant_type(
            request.client_id, request.grant_type, request.client, request
        ):
            raise errors.UnauthorizedClientError(request=request)
        claims = verify(assertion, request)
        hook = import_string(getattr(settings, "ID_JAG_USER", "project.idjag.user_for_assertion"))
        user = hook(claims, claims["iss"])
        if user is None or not user.is_active:
            raise _refuse("No account here answers to the assertion's user.", request)
        request.user = user
        request.resource = claims["resource"]
        if not request.scope and isinstance(claims.get("scope"), str):
            request.scope = claims["scope"]
        self.validate_scopes(request)
