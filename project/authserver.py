"""The demo's authorization server: django-oauth-toolkit, with what MCP clients of 2026 use.

What the toolkit does itself is configured in settings.py (``OAUTH2_PROVIDER``): the
authorization-code flow with PKCE, dynamic registration, client ID metadata documents, and
RFC 9700's hygiene. This module adds what it does not (docs/authorization.md):

- **DPoP-bound tokens** (RFC 9449 section 5): a token request with a ``DPoP`` proof gets a
  token bound to the proof's key (``token_type: DPoP``), recorded in
  :class:`~mcp_django.models.BoundAccessToken` for the resource server, and named by
  introspection (``cnf.jkt``);
- **client credentials** (SEP-1046) for confidential clients registered with that grant:
  the token acts for the application's owner, with only the scopes
  ``settings.OAUTH_CLIENT_CREDENTIALS_SCOPES`` gives the client;
- **enterprise-managed authorization** (SEP-990): the RFC 7523 jwt-bearer grant taking an
  Identity Assertion JWT Authorization Grant (ID-JAG) from an identity provider named in
  ``settings.ID_JAG_ISSUERS`` (:mod:`project.idjag`).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.models import AbstractApplication
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.scopes import SettingsScopes
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import IntrospectTokenView, OAuthServerMetadataView, TokenView
from oauthlib.oauth2 import Server as OAuthlibServer

from mcp_django.conf import mcp_settings
from mcp_django.contrib import dpop
from mcp_django.tokens.models import BoundAccessToken

from . import idjag

# How long a refresh token's binding is kept when refresh tokens never expire (REFRESH_TOKEN_EXPIRE_SECONDS unset).
REFRESH_BINDING_SECONDS = 10 * 365 * 86400

# Set by DPoPTokenView on the request's META (which the toolkit hands oauthlib as its headers),
# as is idjag.ISSUER_KEY: no HTTP header becomes a META key without the HTTP_ prefix, so a
# client cannot set them.
JKT_KEY = "mcp_django.dpop_jkt"


@method_decorator(csrf_exempt, name="dispatch")
class DPoPTokenView(TokenView):
    """The token endpoint: a request with a DPoP proof (signed for this POST, this URL) gets a
    bound token; the issuer's URL goes to the grants that check an ``aud``."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        request.META.pop(JKT_KEY, None)
        # The issuer an ID-JAG's aud must name, as the metadata says it (project.idjag).
        token_path = reverse("oauth2_provider:token")
        request.META[idjag.ISSUER_KEY] = request.build_absolute_uri(token_path).removesuffix("/").removesuffix("/token")
        if "HTTP_DPOP" in request.META:
            try:
                request.META[JKT_KEY] = dpop.verify(request, dpop.header_proof(request))
            except dpop.ProofRefused as exc:
                # RFC 9449 section 5: a 400 with the error, and the nonce to use when asked for one.
                response = JsonResponse({"error": exc.error, "error_description": exc.description}, status=400)
                if exc.nonce:
                    response["DPoP-Nonce"] = exc.nonce
                return response
        return super().post(request, *args, **kwargs)


class DPoPIntrospectTokenView(IntrospectTokenView):
    """RFC 7662 introspection that says a bound token is bound (RFC 9449 section 6.2): ``cnf.jkt``
    and ``token_type: DPoP``, so a resource server elsewhere can hold it to its key."""

    @staticmethod
    def get_token_response(token_value: str | None = None) -> HttpResponse:
        response = IntrospectTokenView.get_token_response(token_value)
        data = json.loads(response.content)
        jkt = BoundAccessToken.jkt_of(token_value) if data.get("active") and token_value else ""
        if not jkt:
            return response
        data.update({"token_type": "DPoP", "cnf": {"jkt": jkt}})
        return JsonResponse(data, status=response.status_code)


class Validator(OAuth2Validator):
    """The toolkit's validator, with bound tokens, client-credentials principals and the ID-JAG grant."""

    def validate_grant_type(
        self, client_id: str, grant_type: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if grant_type == idjag.GRANT_TYPE:
            # An enterprise's client: confidential, registered for the code flow (whose user it
            # would otherwise send to the consent screen).
            return bool(
                client.client_type == AbstractApplication.CLIENT_CONFIDENTIAL
                and client.allows_grant_type(AbstractApplication.GRANT_AUTHORIZATION_CODE)
            )
        return bool(super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs))

    def _create_access_token(self, expires: Any, request: Any, token: Any, source_refresh_token: Any = None) -> Any:
        if request.grant_type == "client_credentials":
            # No person is asked: the machine acts for the account that registered it.
            request.user = request.client.user
        return super()._create_access_token(expires, request, token, source_refresh_token)

    def save_bearer_token(self, token: dict[str, Any], request: Any, *args: Any, **kwargs: Any) -> None:
        super().save_bearer_token(token, request, *args, **kwargs)
        jkt = request.headers.get(JKT_KEY)
        if jkt:
            now = timezone.now()
            BoundAccessToken.bind(token["access_token"], jkt, now + timedelta(seconds=token.get("expires_in", 0)))
            token["token_type"] = "DPoP"
            if token.get("refresh_token"):
                # Section 5: the refresh token is bound to the key too (a public client has no
                # other proof of who refreshes); kept as long as the refresh token may live.
                lifetime = oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS or REFRESH_BINDING_SECONDS
                BoundAccessToken.bind(token["refresh_token"], jkt, now + timedelta(seconds=lifetime))

    def validate_refresh_token(self, refresh_token: str, client: Any, request: Any, *args: Any, **kwargs: Any) -> bool:
        """A bound refresh token is good only with a proof by its key (RFC 9449 section 5)."""
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        bound = BoundAccessToken.jkt_of(refresh_token)
        return not bound or request.headers.get(JKT_KEY) == bound


class Scopes(SettingsScopes):
    """A client-credentials client gets only the scopes ``OAUTH_CLIENT_CREDENTIALS_SCOPES`` names for
    its client id (or for ``"*"``); every other client, every scope of ``OAUTH2_PROVIDER["SCOPES"]``."""

    def get_available_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        everything = list(super().get_available_scopes(application, request, *args, **kwargs))
        if application is None or application.authorization_grant_type != AbstractApplication.GRANT_CLIENT_CREDENTIALS:
            return everything
        allowed = getattr(settings, "OAUTH_CLIENT_CREDENTIALS_SCOPES", {})
        given = allowed.get(application.client_id, allowed.get("*", []))
        return [scope for scope in everything if scope in given]

    def get_default_scopes(self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any) -> list[str]:
        available = self.get_available_scopes(application, request)
        return [
            scope for scope in super().get_default_scopes(application, request, *args, **kwargs) if scope in available
        ]


class Server(OAuthlibServer):
    """oauthlib's server with the jwt-bearer grant for ID-JAGs beside the toolkit's grants."""

    def __init__(self, request_validator: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(request_validator, *args, **kwargs)
        self._grant_types[idjag.GRANT_TYPE] = idjag.IdentityAssertionGrant(request_validator)


class ServerMetadataView(OAuthServerMetadataView):
    """RFC 8414 metadata, with the grants added here and the DPoP algorithms (RFC 9449 section 5.1)."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        data = json.loads(response.content)
        grants = data.setdefault("grant_types_supported", [])
        for grant in ("client_credentials", idjag.GRANT_TYPE):
            if grant not in grants:
                grants.append(grant)
        data["dpop_signing_alg_values_supported"] = list(mcp_settings.DPOP_ALGORITHMS)
        out = JsonResponse(data)
        out["Access-Control-Allow-Origin"] = "*"
        return out
