"""MCP authorization: the demo's authorization server, /mcp as a protected resource, the SDK's OAuth client."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx
import httpx2
import pytest
import websockets
from django.contrib.auth import get_user_model
from django.test import Client as DjangoClient
from django.utils import timezone
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from oauth2_provider.models import AccessToken, Application, set_token_value

from mcp_django.auth_cache import principal_cache
from tests.conftest import MODERN, mcp_settings, meta, served_before_expiry, wait_past
from tests.oauth_consent import approve

pytestmark = pytest.mark.django_db(transaction=True)


class Memory:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Person:
    """Signed in to the demo; approves (or denies) each consent screen the client sends them to."""

    def __init__(self, session_cookie: str) -> None:
        self.session_cookie = session_cookie
        self.consents: list[dict[str, list[str]]] = []
        self.redirect = ""

    async def open(self, url: str) -> None:
        self.consents.append(parse_qs(urlsplit(url).query))
        self.redirect = await anyio.to_thread.run_sync(approve, url, self.session_cookie)

    async def callback(self) -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(self.redirect).query)
        # The RFC 9207 iss the demo's server adds to its redirect, which the SDK checks.
        return AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )


def _signed_in(username: str) -> str:
    user = get_user_model().objects.create_user(username, password="pw")
    browser = DjangoClient()
    browser.force_login(user)
    return browser.cookies["sessionid"].value


@pytest.fixture
def alice(live_url: str) -> Person:
    return Person(_signed_in("alice"))


def _provider(url: str, person: Person, storage: Memory) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="mcp-django tests",
        redirect_uris=["http://127.0.0.1:9/callback"],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(url, metadata, storage, redirect_handler=person.open, callback_handler=person.callback)


async def _as(url: str, person: Person, storage: Memory, mode: str) -> Any:
    auth = _provider(url, person, storage)
    http = httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=60))
    return http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_sdk_client_signs_in_with_oauth_and_steps_up_for_a_scope(live_url: str, alice: Person, mode: str) -> None:
    storage = Memory()
    with mcp_settings(ALLOW_ANONYMOUS=False):
        http, client = await _as(live_url, alice, storage, mode)
        async with http, client:
            who = await client.call_tool("whoami")
            listed = {tool.name for tool in (await client.list_tools()).tools}
            # The orders tools need the "shop" scope: hidden from this token, and a call is
            # answered 403 insufficient_scope, which sends the SDK back for consent.
            orders = await client.call_tool("orders_list", {})
    assert who.structured_content["username"] == "alice"
    assert "echo" in listed and "orders_list" not in listed
    assert not orders.is_error
    assert len(alice.consents) == 2
    first, second = alice.consents
    assert first["code_challenge_method"] == ["S256"] and first["resource"] == [live_url]
    assert "shop" in second["scope"][0].split()
    assert storage.client is not None and storage.client.client_id  # registered dynamically (RFC 7591)
    # Stored hashed (the demo's RFC 9700 settings): found by checksum, as the toolkit finds it.
    checksum = hashlib.sha256(storage.tokens.access_token.encode()).hexdigest()
    token = await AccessToken.objects.select_related("user").aget(token_checksum=checksum)
    assert token.token == ""
    assert token.user.username == "alice" and token.resource == [live_url]


@pytest.mark.anyio
async def test_websocket_takes_the_bearer_token_on_the_upgrade(live_url: str, alice: Person) -> None:
    storage = Memory()
    with mcp_settings(ALLOW_ANONYMOUS=False):
        http, client = await _as(live_url, alice, storage, MODERN)
        async with http, client:
            await client.call_tool("whoami")
    assert storage.tokens is not None
    ws_url = live_url.replace("http://", "ws://")
    headers = {"Authorization": f"Bearer {storage.tokens.access_token}"}
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    async with websockets.connect(ws_url, subprotocols=["mcp"], additional_headers=headers) as socket:
        await socket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        assert "result" in json.loads(await socket.recv())
        call = {"name": "whoami", "arguments": {}}
        await socket.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
        answer = json.loads(await socket.recv())
    assert answer["result"]["structuredContent"]["username"] == "alice"
    with pytest.raises(websockets.InvalidStatus):
        async with websockets.connect(
            ws_url, subprotocols=["mcp"], additional_headers={"Authorization": "Bearer not-a-token"}
        ):
            pass


def _token(user: Any, *, resource: list[str], scope: str = "mcp", seconds: float = 3600) -> AccessToken:
    app = Application.objects.create(
        name="direct",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:9/callback",
        user=user,
    )
    token = AccessToken(
        user=user,
        application=app,
        expires=timezone.now() + timedelta(seconds=seconds),
        scope=scope,
        resource=resource,
    )
    # Issued as the toolkit issues it: with the demo's hashed storage, only the checksum is kept.
    raw = f"tok-{user.pk}-{AccessToken.objects.count()}"
    set_token_value(token, raw)
    token.save()
    assert AccessToken.objects.filter(pk=token.pk, token="").exists()
    token.token = raw  # what the client holds
    return token


def _call(url: str, token: str, tool: str = "whoami") -> httpx.Response:
    """A 2026-07-28 tools/call of ``tool`` with ``Authorization: Bearer token``."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": meta()},
    }
    headers = {
        "authorization": f"Bearer {token}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    return httpx.post(url, json=body, headers=headers, timeout=30)


def test_a_token_must_be_issued_for_this_resource(live_url: str) -> None:
    user = get_user_model().objects.create_user("bea")
    assert _call(live_url, _token(user, resource=[live_url]).token).status_code == 200
    for resource in (["http://127.0.0.1:9/mcp"], []):  # another server's token; one for no resource at all
        refused = _call(live_url, _token(user, resource=resource).token)
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge


def test_expired_and_revoked_tokens_are_refused_at_once(live_url: str) -> None:
    user = get_user_model().objects.create_user("cat")

    def issue(seconds: float) -> tuple[AccessToken, datetime]:
        token = _token(user, resource=[live_url], seconds=seconds)
        return token, token.expires

    # The principal cache would keep the token far longer than it lives: only its expiry ends it.
    with mcp_settings(AUTH_CACHE_SECONDS=300):
        principal_cache.clear()
        short = served_before_expiry(issue, lambda token: _call(live_url, token.token).status_code)
        assert principal_cache._entries  # remembered
        wait_past(short.expires)
        assert _call(live_url, short.token).status_code == 401  # never served past its expiry
    revoked = _token(user, resource=[live_url])
    assert _call(live_url, revoked.token).status_code == 200
    origin = live_url.rsplit("/mcp", 1)[0]
    answer = httpx.post(
        f"{origin}/o/revoke_token/", data={"token": revoked.token, "client_id": revoked.application.client_id}
    )
    assert answer.status_code == 200
    assert _call(live_url, revoked.token).status_code == 401


def test_a_missing_scope_is_403_insufficient_scope(live_url: str) -> None:
    user = get_user_model().objects.create_user("dan")
    token = _token(user, resource=[live_url], scope="mcp").token
    refused = _call(live_url, token, "orders_list")
    assert refused.status_code == 403
    # Every scope the call needs, the endpoint's too: a client that asks for exactly these
    # (mcp 1.x) must not trade "mcp" for "shop".
    assert refused.json()["error"]["data"] == {"requiredScopes": ["mcp", "shop"]}
    challenge = refused.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="mcp shop"' in challenge
    # A token without the scope the whole endpoint requires is refused before any method runs.
    bare = _call(live_url, _token(user, resource=[live_url], scope="shop").token)
    assert bare.status_code == 403 and 'error="insufficient_scope", scope="mcp"' in bare.headers["www-authenticate"]
    allowed = _token(user, resource=[live_url], scope="mcp shop").token
    assert _call(live_url, allowed, "orders_list").status_code == 200


def test_protected_resource_and_authorization_server_metadata(live_url: str) -> None:
    origin = live_url.rsplit("/mcp", 1)[0]
    resource = httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp").json()
    assert resource["resource"] == live_url
    assert resource["authorization_servers"] == [f"{origin}/o"]
    assert "shop" in resource["scopes_supported"]
    server = httpx.get(f"{origin}/.well-known/oauth-authorization-server/o").json()
    assert server["issuer"] == f"{origin}/o"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["registration_endpoint"] == f"{origin}/o/register/"
    assert server["client_id_metadata_document_supported"] is True
    with mcp_settings(ALLOW_ANONYMOUS=False):
        refused = httpx.post(
            live_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}},
            headers={"accept": "application/json", "mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
        )
    assert refused.status_code == 401
    metadata_url = f"{origin}/.well-known/oauth-protected-resource/mcp"
    # The demo takes DPoP-bound tokens too (MCP_DJANGO["DPOP"] "allowed"): a DPoP challenge follows.
    assert refused.headers["www-authenticate"] == (
        f'Bearer realm="mcp", scope="mcp", resource_metadata="{metadata_url}", '
        f'DPoP realm="mcp", scope="mcp", algs="ES256 ES384 EdDSA PS256 RS256", resource_metadata="{metadata_url}"'
    )
    assert resource["scopes_supported"] == ["mcp", "shop"]


def test_metadata_is_served_only_for_the_endpoints_own_paths(live_url: str) -> None:
    origin = live_url.rsplit("/mcp", 1)[0]
    well_known = f"{origin}/.well-known/oauth-protected-resource"
    for path in ("/mcp", "/mcp/", ""):
        found = httpx.get(well_known + path)
        assert found.status_code == 200 and found.json()["resource"] == live_url, path
    for path in ("/admin", "/admin/", "/api/orders", "/o/token", "/mcp/x", "/.well-known/oauth-protected-resource/mcp"):
        assert httpx.get(well_known + path).status_code == 404, path
    with mcp_settings(RESOURCE_URL="https://api.example/tools/mcp"):
        configured = httpx.get(well_known + "/tools/mcp")
        assert configured.status_code == 200 and configured.json()["resource"] == "https://api.example/tools/mcp"
        assert httpx.get(well_known + "/admin").status_code == 404


def test_without_authorization_servers_the_endpoint_is_not_a_protected_resource(live_url: str) -> None:
    origin = live_url.rsplit("/mcp", 1)[0]
    with mcp_settings(AUTHORIZATION_SERVERS=[], ALLOW_ANONYMOUS=False):
        assert httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp").status_code == 404
        refused = httpx.post(
            live_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}},
            headers={
                "accept": "application/json",
                "mcp-protocol-version": MODERN,
                "mcp-method": "tools/list",
                "authorization": "Token nope",
            },
        )
    # The first configured class's challenge: the demo's own MCP tokens (Bearer, and DPoP, which
    # the demo allows), before DRF's Token.
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == (
        'Bearer realm="mcp", scope="mcp", DPoP realm="mcp", scope="mcp", algs="ES256 ES384 EdDSA PS256 RS256"'
    )


def code_flow(
    live_url: str, session_cookie: str, app: Application, resource: str, headers: Any = None
) -> httpx.Response:
    """The demo's code flow with PKCE for ``app`` (a public client), approved at the consent screen,
    and the token endpoint's answer to the code's exchange (sent with ``headers``)."""
    origin = live_url.rsplit("/mcp", 1)[0]
    verifier = "v" * 64
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": app.client_id,
            "redirect_uri": "http://127.0.0.1:9/callback",
            "scope": "mcp",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": resource,
        }
    )
    redirect = approve(f"{origin}/o/authorize/?{query}", session_cookie)
    answer = parse_qs(urlsplit(redirect).query)
    assert answer["iss"] == [f"{origin}/o"]  # RFC 9207: which server answered
    data = {
        "grant_type": "authorization_code",
        "code": answer["code"][0],
        "client_id": app.client_id,
        "redirect_uri": "http://127.0.0.1:9/callback",
        "code_verifier": verifier,
        "resource": resource,
    }
    return httpx.post(f"{origin}/o/token/", data=data, headers=headers or {})


def _issued(live_url: str, session_cookie: str, resource: str) -> str:
    """An access token the demo's authorization server issues for ``resource`` (code flow, PKCE)."""
    user = get_user_model().objects.get(username="eve")
    app, _ = Application.objects.get_or_create(
        name="resource tests",
        defaults={
            "client_type": Application.CLIENT_PUBLIC,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": "http://127.0.0.1:9/callback",
            "user": user,
        },
    )
    issued = code_flow(live_url, session_cookie, app, resource)
    assert issued.status_code == 200, issued.text
    return str(issued.json()["access_token"])


async def _websocket_whoami(live_url: str, token: str) -> tuple[int, dict[str, str], Any]:
    """Opens the websocket with ``token``: (status, headers, the whoami answer or None)."""
    headers = {"Authorization": f"Bearer {token}"}
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    try:
        async with websockets.connect(
            live_url.replace("http://", "ws://"), subprotocols=["mcp"], additional_headers=headers
        ) as socket:
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
            await socket.recv()
            call = {"name": "whoami", "arguments": {}}
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
            return 101, {}, json.loads(await socket.recv())
    except websockets.InvalidStatus as refused:
        return refused.response.status_code, dict(refused.response.headers), None


def test_a_token_for_the_origin_or_another_path_is_refused(live_url: str) -> None:
    """Only a token issued for the endpoint's own resource, as the metadata names it, works at
    /mcp: the toolkit's prefix match would take one for the whole origin (issue 29)."""
    session = _signed_in("eve")
    origin = live_url.rsplit("/mcp", 1)[0]
    advertised = httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp").json()["resource"]
    assert advertised == live_url
    for resource in (f"{origin}/", origin, f"{live_url}/", f"{live_url}/tools", f"{origin}/mc"):
        token = _issued(live_url, session, resource)
        refused = _call(live_url, token)
        assert refused.status_code == 401, resource
        assert refused.headers["www-authenticate"].startswith('Bearer realm="mcp", error="invalid_token"'), resource
        assert (
            f'resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp"'
            in (refused.headers["www-authenticate"])
        )
        status, headers, _ = anyio.run(_websocket_whoami, live_url, token)
        assert status == 401, resource
        assert headers["www-authenticate"].startswith('Bearer realm="mcp", error="invalid_token"'), resource
    # The right resource, and the same resource written otherwise (case, default-free form).
    scheme, rest = live_url.split("://", 1)
    for resource in (live_url, f"{scheme.upper()}://{rest.split('/', 1)[0].upper()}/mcp"):
        token = _issued(live_url, session, resource)
        accepted = _call(live_url, token)
        assert accepted.status_code == 200, (resource, accepted.text)
        status, _, answer = anyio.run(_websocket_whoami, live_url, token)
        assert status == 101 and answer["result"]["structuredContent"]["username"] == "eve", resource


def test_canonical_resource_form() -> None:
    from mcp_django.contrib.oauth import resource_matches
    from mcp_django.protected_resource import canonical_resource

    assert canonical_resource("HTTPS://Shop.Example:443/mcp") == "https://shop.example/mcp"
    assert canonical_resource("http://shop.example:80/") == "http://shop.example"
    assert canonical_resource("http://[::1]:8000/mcp") == "http://[::1]:8000/mcp"
    for bad in ("https://shop.example/mcp#x", "https://u@shop.example/mcp", "urn:x", "shop.example/mcp", "http://h:x/"):
        assert canonical_resource(bad) is None, bad
    assert resource_matches("https://shop.example/mcp/", ["https://SHOP.example:443/mcp"])
    assert not resource_matches("https://shop.example/mcp", ["https://shop.example/"])
    assert not resource_matches("https://shop.example/mcp", ["https://shop.example/mcp/"])
    assert not resource_matches("https://shop.example/mcp", [])
