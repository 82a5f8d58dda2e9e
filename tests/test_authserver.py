"""The demo's authorization server beyond the code flow: client credentials, DPoP-bound tokens,
ID-JAGs (enterprise-managed authorization) and RFC 9700's hygiene, driven by the official
Python SDK's providers and by raw token requests for each refusal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import httpx2
import mcp.types as types
import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from jwcrypto.jwk import JWK
from jwcrypto.jwt import JWT
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import AccessToken, Application

from mcp_django.tokens.models import BoundAccessToken, token_checksum
from tests.conftest import MODERN, mcp_settings
from tests.dpop_client import DPoPAuth, DPoPKey
from tests.processes import ROOT
from tests.test_dpop import _request
from tests.test_oauth import Memory, _signed_in, code_flow

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cret-of-the-machine-client-0123456789"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def _origin(live_url: str) -> str:
    return live_url.rsplit("/mcp", 1)[0]


def _app(grant: str, owner: str = "ops", **fields: Any) -> Application:
    user = get_user_model().objects.get_or_create(username=owner, defaults={"email": f"{owner}@corp.example"})[0]
    return Application.objects.create(
        name=f"{grant} client",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=grant,
        client_secret=SECRET,
        redirect_uris="https://client.example/callback",
        user=user,
        **fields,
    )


async def _asks(live_url: str, http: httpx2.AsyncClient, mode: str) -> tuple[Any, Any, list[str]]:
    asked: list[str] = []

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with Client(
        streamable_http_client(live_url, http_client=http), mode=mode, cache=None, elicitation_callback=on_elicit
    ) as client:
        who = await client.call_tool("whoami")
        cleared = await client.call_tool("clear_cache", {"region": "us"})
    return who, cleared, asked


# -- RFC 9700 ---------------------------------------------------------------------------------------


def test_check_deploy_shows_no_toolkit_warning() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEBUG": "0"}
    env["DJANGO_SECRET_KEY"] = "a-long-random-production-secret-key-" + uuid.uuid4().hex
    found = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert "oauth2_provider." not in found.stdout + found.stderr, found.stdout + found.stderr


def test_metadata_names_the_grants_dpop_and_rfc9207(live_url: str) -> None:
    server = httpx.get(f"{_origin(live_url)}/.well-known/oauth-authorization-server/o").json()
    assert server == httpx.get(f"{_origin(live_url)}/o/.well-known/oauth-authorization-server").json()
    assert {"authorization_code", "refresh_token", "client_credentials", JWT_BEARER} <= set(
        server["grant_types_supported"]
    )
    assert not {"implicit", "password"} & set(server["grant_types_supported"])
    assert server["dpop_signing_alg_values_supported"] == ["ES256", "ES384", "EdDSA", "PS256", "RS256"]
    assert server["authorization_response_iss_parameter_supported"] is True
    assert server["client_id_metadata_document_supported"] is True


# -- client credentials ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_client_credentials_provider_calls_a_tool_that_asks(live_url: str, mode: str) -> None:
    app = await anyio.to_thread.run_sync(_app, Application.GRANT_CLIENT_CREDENTIALS)
    auth = ClientCredentialsOAuthProvider(
        live_url, Memory(), app.client_id, SECRET, scope="mcp", issuer=f"{_origin(live_url)}/o"
    )
    with mcp_settings(ALLOW_ANONYMOUS=False):
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=60)) as http:
            who, cleared, asked = await _asks(live_url, http, mode)
    # The machine acts for the account that registered it.
    assert who.structured_content["username"] == "ops"
    assert cleared.content[0].text == "Cleared the us cache." and asked == ["Clear the us cache?"]


def test_a_machine_client_gets_only_its_scopes(live_url: str) -> None:
    app = _app(Application.GRANT_CLIENT_CREDENTIALS)
    token_url = f"{_origin(live_url)}/o/token/"

    def ask(scope: str) -> httpx.Response:
        data = {"grant_type": "client_credentials", "scope": scope, "resource": live_url}
        return httpx.post(token_url, data=data, auth=(app.client_id, SECRET))

    assert ask("mcp").status_code == 200
    refused = ask("mcp shop")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_scope"
    with override_settings(OAUTH_CLIENT_CREDENTIALS_SCOPES={app.client_id: ["mcp", "shop"]}):
        assert ask("mcp shop").json()["scope"] == "mcp shop"
    # A public client cannot use the grant; nor can a confidential one with a wrong secret.
    assert (
        httpx.post(token_url, data={"grant_type": "client_credentials"}, auth=(app.client_id, "nope")).status_code
        == 401
    )


# -- DPoP-bound tokens -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_token_request_with_a_proof_gets_a_bound_token(live_url: str) -> None:
    app = await anyio.to_thread.run_sync(_app, Application.GRANT_CLIENT_CREDENTIALS)
    token_url = f"{_origin(live_url)}/o/token/"
    key = DPoPKey()
    data = {"grant_type": "client_credentials", "scope": "mcp", "resource": live_url}
    async with httpx.AsyncClient() as http:
        issued = await http.post(
            token_url, data=data, auth=(app.client_id, SECRET), headers={"DPoP": key.proof("POST", token_url)}
        )
        assert issued.status_code == 200, issued.text
        body = issued.json()
        assert body["token_type"] == "DPoP"
        token = body["access_token"]
        bound = await BoundAccessToken.objects.aget(token_checksum=token_checksum(token))
        assert bound.jkt == key.jkt
        # A proof for another URL, or reused, gets no token.
        for proof in (key.proof("POST", live_url), key.proof("GET", token_url)):
            refused = await http.post(token_url, data=data, auth=(app.client_id, SECRET), headers={"DPoP": proof})
            assert refused.status_code == 400 and refused.json()["error"] == "invalid_dpop_proof"
        # Without a proof: a bearer token, as before.
        plain = await http.post(token_url, data=data, auth=(app.client_id, SECRET))
        assert plain.json()["token_type"] == "Bearer"
        # Introspection names the binding (RFC 9449 section 6.2), for a resource server elsewhere.
        introspect = f"{_origin(live_url)}/o/introspect/"
        seen = (await http.post(introspect, data={"token": token}, auth=(app.client_id, SECRET))).json()
        assert seen["active"] is True and seen["cnf"] == {"jkt": key.jkt} and seen["token_type"] == "DPoP"
        other = (
            await http.post(introspect, data={"token": plain.json()["access_token"]}, auth=(app.client_id, SECRET))
        ).json()
        assert other["active"] is True and "cnf" not in other
    # The bound token with its proofs: the SDK's client calls a tool that asks.
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="required"):
        async with httpx2.AsyncClient(auth=DPoPAuth(key, token), timeout=30) as client_http:
            who, cleared, _asked = await _asks(live_url, client_http, MODERN)
        assert who.structured_content["username"] == "ops" and not cleared.is_error
        refused = await anyio.to_thread.run_sync(_request, live_url, MODERN, f"Bearer {token}", None)
        assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]


# -- ID-JAG (enterprise-managed authorization) ----------------------------------------------------------------


class IdentityProvider:
    """A company's identity provider for the tests: a key, its JWKS served on a local port, ID-JAGs."""

    def __init__(self) -> None:
        self.key = JWK.generate(kty="RSA", size=2048, kid="idp-1", alg="RS256", use="sig")
        jwks = json.dumps({"keys": [self.key.export_public(as_dict=True)]}).encode()

        class Serve(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(jwks)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Serve)
        self.issuer = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def id_jag(self, audience: str, resource: str, client_id: str, /, **override: Any) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "u-4711",
            "email": "erin@corp.example",
            "aud": audience,
            "client_id": client_id,
            "resource": resource,
            "scope": "mcp",
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + 300,
        }
        header = {"typ": "oauth-id-jag+jwt", "alg": "RS256", "kid": "idp-1"}
        header.update(override.pop("header", {}))
        signer = override.pop("signer", self.key)
        claims.update(override)
        claims = {name: value for name, value in claims.items() if value is not None}
        token = JWT(header=header, claims=claims)
        token.make_signed_token(signer)
        return str(token.serialize())


@pytest.fixture
def idp() -> Iterator[IdentityProvider]:
    provider = IdentityProvider()
    with override_settings(ID_JAG_ISSUERS={provider.issuer: {"jwks_uri": f"{provider.issuer}/jwks.json"}}):
        yield provider
    provider.http.shutdown()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_identity_assertion_provider_calls_a_tool_that_asks(
    live_url: str, idp: IdentityProvider, mode: str
) -> None:
    app = await anyio.to_thread.run_sync(_app, Application.GRANT_AUTHORIZATION_CODE)
    await get_user_model().objects.acreate(username="erin", email="erin@corp.example")
    issuer = f"{_origin(live_url)}/o"
    seen: list[tuple[str, str]] = []

    async def fetch_id_jag(audience: str, resource: str) -> str:
        seen.append((audience, resource))
        return idp.id_jag(audience, resource, app.client_id)

    auth = IdentityAssertionOAuthProvider(live_url, Memory(), app.client_id, SECRET, issuer, fetch_id_jag, scope="mcp")
    with mcp_settings(ALLOW_ANONYMOUS=False):
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=60)) as http:
            who, cleared, asked = await _asks(live_url, http, mode)
    assert who.structured_content["username"] == "erin"
    assert cleared.content[0].text == "Cleared the us cache." and asked == ["Clear the us cache?"]
    assert seen == [(issuer, live_url)]
    token = await AccessToken.objects.select_related("user").aget(application=app)
    assert token.user.username == "erin" and token.resource == [live_url]


def test_each_bad_id_jag_is_refused(live_url: str, idp: IdentityProvider) -> None:
    app = _app(Application.GRANT_AUTHORIZATION_CODE)
    other = _app(Application.GRANT_AUTHORIZATION_CODE, owner="other")
    get_user_model().objects.create(username="erin", email="erin@corp.example")
    issuer = f"{_origin(live_url)}/o"
    token_url = f"{issuer}/token/"

    def exchange(assertion: str, client: Application = app, resource: str = live_url) -> httpx.Response:
        data = {"grant_type": JWT_BEARER, "assertion": assertion, "client_id": client.client_id, "resource": resource}
        return httpx.post(token_url, data={**data, "client_secret": SECRET})

    good = idp.id_jag(issuer, live_url, app.client_id)
    assert exchange(good).status_code == 200
    stranger = IdentityProvider()
    refusals = {
        "used before": good,
        "not for this authorization server": idp.id_jag("https://as.other.example", live_url, app.client_id),
        "issued to another client": idp.id_jag(issuer, live_url, other.client_id),
        "expired": idp.id_jag(issuer, live_url, app.client_id, exp=int(time.time()) - 120),
        "names no resource": idp.id_jag(issuer, live_url, app.client_id, resource=None),
        "for another resource": idp.id_jag(issuer, "https://mcp.other.example/mcp", app.client_id),
        "typ must be": idp.id_jag(issuer, live_url, app.client_id, header={"typ": "JWT"}),
        "not a trusted identity provider": stranger.id_jag(issuer, live_url, app.client_id),
        "signature is not its issuer's": idp.id_jag(issuer, live_url, app.client_id, signer=stranger.key),
        "No account here": idp.id_jag(issuer, live_url, app.client_id, email="nobody@corp.example"),
        "has no jti": idp.id_jag(issuer, live_url, app.client_id, jti=None),
    }
    stranger.http.shutdown()
    for why, assertion in refusals.items():
        refused = exchange(assertion)
        assert refused.status_code == 400, (why, refused.text)
        assert refused.json()["error"] == "invalid_grant" and why in refused.json()["error_description"], why
    # The assertion's client must authenticate as itself: another client's secret, or a public client.
    wrong = {
        "grant_type": JWT_BEARER,
        "assertion": idp.id_jag(issuer, live_url, app.client_id),
        "client_id": app.client_id,
    }
    assert httpx.post(token_url, data={**wrong, "client_secret": "nope"}).status_code == 401
    machine = _app(Application.GRANT_CLIENT_CREDENTIALS, owner="robot")
    unauthorized = exchange(idp.id_jag(issuer, live_url, machine.client_id), client=machine)
    assert unauthorized.status_code == 400 and unauthorized.json()["error"] == "unauthorized_client"


def test_a_bound_refresh_token_needs_a_proof_by_its_key(live_url: str) -> None:
    cookie = _signed_in("rae")
    app = Application.objects.create(
        name="public dpop client",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:9/callback",
    )
    token_url = f"{_origin(live_url)}/o/token/"
    key = DPoPKey()
    issued = code_flow(live_url, cookie, app, live_url, {"DPoP": key.proof("POST", token_url)})
    assert issued.status_code == 200 and issued.json()["token_type"] == "DPoP", issued.text
    refresh = issued.json()["refresh_token"]

    def refreshed(proof: str | None) -> httpx.Response:
        data = {"grant_type": "refresh_token", "refresh_token": refresh, "client_id": app.client_id}
        return httpx.post(token_url, data=data, headers={"DPoP": proof} if proof else {})

    for proof in (None, DPoPKey().proof("POST", token_url)):
        refused = refreshed(proof)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant", refused.text
    renewed = refreshed(key.proof("POST", token_url))
    assert renewed.status_code == 200 and renewed.json()["token_type"] == "DPoP", renewed.text
    assert BoundAccessToken.objects.get(token_checksum=token_checksum(renewed.json()["access_token"])).jkt == key.jkt


def test_a_token_acting_for_no_user_is_a_401(live_url: str) -> None:
    from datetime import timedelta

    from django.utils import timezone
    from oauth2_provider.models import set_token_value

    app = _app(Application.GRANT_CLIENT_CREDENTIALS)
    token = AccessToken(application=app, user=None, scope="mcp", resource=[live_url])
    token.expires = timezone.now() + timedelta(hours=1)
    set_token_value(token, "no-user-token")
    token.save()
    with mcp_settings(ALLOW_ANONYMOUS=False):
        refused = _request(live_url, MODERN, "Bearer no-user-token", None)
    assert refused.status_code == 401 and 'error="invalid_token"' not in refused.headers["www-authenticate"]
