"""MCP tokens (mcp_django.tokens): hashed, named, scoped, handler-limited, expiring, revocable."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
from collections.abc import AsyncIterator
from io import StringIO
from typing import Any

import httpx
import pytest
import websockets
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from mcp_django.auth_cache import principal_cache
from mcp_django.models import AuditEvent
from mcp_django.tokens.models import MCPToken
from tests.conftest import MODERN, Raw, mcp_settings, served_before_expiry, wait_past

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _issue(username: str, name: str = "laptop", **kw: Any) -> tuple[MCPToken, str]:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        user = get_user_model().objects.create_user(username, password="pw")
    return MCPToken.objects.issue(user, name, **kw)


issue = sync_to_async(_issue)


@contextlib.asynccontextmanager
async def bearer_client(url: str, token: str) -> AsyncIterator[Any]:
    """The official SDK's client (mcp 2.x), sending the MCP token as a Bearer token."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=MODERN, cache=None) as client:
            yield client


# -- in process ------------------------------------------------------------------------------


@pytest.fixture
def raw(raw_inprocess: Raw) -> Raw:
    return raw_inprocess


def whoami(raw: Raw, token: str) -> httpx.Response:
    value = f"Bearer {token}"
    # Bytes as they come off the wire (ISO-8859-1, as HTTP header values are decoded).
    return raw.call("whoami", headers={"authorization": value if value.isascii() else value.encode("latin-1")})  # type: ignore[dict-item]


@pytest.mark.django_db
def test_only_the_hash_of_the_secret_is_stored() -> None:
    token, text = _issue("ann")
    assert text.startswith(f"mcp_{token.prefix}_")
    secret = text.split("_", 2)[2]
    assert len(secret) >= 43  # 256 random bits
    stored = MCPToken.objects.get(pk=token.pk)
    assert stored.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in {str(getattr(stored, f.attname)) for f in MCPToken._meta.concrete_fields}


def test_a_function_tool_with_scopes_is_hidden_from_a_token_without_them() -> None:
    """A listing asks each guarded handler's has_permission: a token lacking one of a tool's
    scopes does not see it (a view tool's scopes are checked the same way, before the view's own checks)."""
    from django.contrib.auth.models import AnonymousUser
    from django.test import RequestFactory

    from mcp_django.registry import Registry

    registry = Registry()

    @registry.tool(scopes=["shop"])
    def stock() -> str:
        return ""

    tool = registry.tools["stock"]
    request = RequestFactory().get("/")
    for scopes, seen in (("mcp", False), ("mcp shop", True), ("", True)):  # no scopes: not limited
        request.auth = MCPToken(scopes=scopes)  # type: ignore[attr-defined]
        assert tool.has_permission(AnonymousUser(), request) is seen, scopes


@pytest.mark.django_db
def test_a_token_authenticates_and_names_itself_in_the_audit_log(raw: Raw) -> None:
    token, text = _issue("bob", "claude desktop")
    r = whoami(raw, text)
    assert r.status_code == 200
    assert r.json()["result"]["structuredContent"]["username"] == "bob"
    row = AuditEvent.objects.filter(target="whoami").latest("id")
    assert row.credential == f"claude desktop ({token.prefix})"
    assert row.principal.endswith(f":{token.user_id}")
    secret = text.split("_", 2)[2]
    assert all(secret not in str(value) for value in AuditEvent.objects.values_list())


@pytest.mark.django_db
@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda text: text[:-2] + ("AA" if not text.endswith("AA") else "BB"), id="wrong secret"),
        pytest.param(lambda text: "mcp_000000000000_" + text.split("_", 2)[2], id="unknown id"),
        pytest.param(lambda text: "mcp_" + text.split("_", 2)[1], id="no secret"),
        pytest.param(lambda text: "mcp__x", id="no id"),
        pytest.param(lambda text: "mcp_" + "a" * 40 + "_x", id="id too long"),
        pytest.param(lambda text: text.replace("mcp_", "mcp_\x00", 1), id="NUL in the id"),
        pytest.param(lambda text: text + "\x00", id="NUL in the secret"),
        pytest.param(lambda text: text + "é", id="not ASCII"),
        pytest.param(lambda text: text + "x" * 200, id="secret too long"),
    ],
)
def test_a_bad_token_is_a_401_with_a_bearer_challenge(raw: Raw, spoil: Any) -> None:
    _token, text = _issue("cid")
    r = whoami(raw, spoil(text))
    assert r.status_code == 401
    assert r.json()["error"] == {"code": -32600, "message": "The MCP token is invalid."}
    assert r.headers["www-authenticate"].startswith("Bearer ")
    assert "invalid_token" in r.headers["www-authenticate"]


@pytest.mark.django_db
def test_expired_and_revoked_tokens_are_refused_at_once(raw: Raw) -> None:
    token, text = _issue("dee", expires=timezone.now() + datetime.timedelta(hours=1))
    assert whoami(raw, text).status_code == 200
    assert principal_cache._entries  # remembered: the next request is a cache hit unless told
    token.expires = timezone.now() - datetime.timedelta(seconds=1)
    token.save()
    r = whoami(raw, text)
    assert r.status_code == 401
    assert "expired" in r.headers["www-authenticate"]

    token2, text2 = _issue("dee", "other")
    assert whoami(raw, text2).status_code == 200
    token2.revoke()
    r = whoami(raw, text2)
    assert r.status_code == 401 and "revoked" in r.headers["www-authenticate"]


@pytest.mark.django_db
def test_a_cached_token_is_not_served_past_its_expiry(raw: Raw) -> None:
    # The cache keeps an entry no longer than the token lives, with no signal sent.
    def issue(seconds: float) -> tuple[tuple[MCPToken, str], datetime.datetime]:
        token, text = _issue("eve", expires=timezone.now() + datetime.timedelta(seconds=seconds))
        assert token.expires is not None
        return (token, text), token.expires

    # The cache would keep the entry far longer than the token lives: only its expiry ends it.
    with mcp_settings(AUTH_CACHE_SECONDS=300):
        principal_cache.clear()
        token, text = served_before_expiry(issue, lambda issued: whoami(raw, issued[1]).status_code)
        assert principal_cache._entries  # remembered
        assert token.expires is not None
        wait_past(token.expires)
        assert whoami(raw, text).status_code == 401


@pytest.mark.django_db
def test_a_pause_while_remembering_a_token_shortens_its_entry(raw: Raw, monkeypatch: pytest.MonkeyPatch) -> None:
    # The thread that remembers the token is paused between reading the wall clock (for the
    # token's expiry) and the entry's clock: the entry must not end later than the token.
    import time

    from mcp_django import auth_cache

    class PausedClock:
        @staticmethod
        def now() -> datetime.datetime:
            moment = timezone.now()
            time.sleep(0.3)
            return moment

    token, text = _issue("ivy", expires=timezone.now() + datetime.timedelta(seconds=30))
    assert token.expires is not None
    with mcp_settings(AUTH_CACHE_SECONDS=300):
        principal_cache.clear()
        monkeypatch.setattr(auth_cache, "timezone", PausedClock)
        assert whoami(raw, text).status_code == 200
        monkeypatch.undo()
        (entry,) = principal_cache._entries.values()
        token_left = (token.expires - timezone.now()).total_seconds()
        entry_left = entry[0] - time.monotonic()  # read second: it can only be less
        assert entry_left <= token_left, (entry_left, token_left)


@pytest.mark.django_db
def test_an_inactive_users_token_is_refused(raw: Raw) -> None:
    token, text = _issue("fin")
    token.user.is_active = False
    token.user.save()
    assert whoami(raw, text).status_code == 401


@pytest.mark.django_db
def test_last_used_is_written_at_most_once_a_minute(raw: Raw) -> None:
    token, text = _issue("gil")
    assert whoami(raw, text).status_code == 200
    first = MCPToken.objects.get(pk=token.pk).last_used
    assert first is not None
    principal_cache.clear()
    assert whoami(raw, text).status_code == 200
    assert MCPToken.objects.get(pk=token.pk).last_used == first  # within the minute: not written again
    MCPToken.objects.filter(pk=token.pk).update(last_used=first - datetime.timedelta(minutes=2))
    principal_cache.clear()
    assert whoami(raw, text).status_code == 200
    assert MCPToken.objects.get(pk=token.pk).last_used > first


@pytest.mark.django_db
def test_other_credentials_still_work_beside_mcp_tokens(raw: Raw) -> None:
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user("hal", password="pw")
    key = Token.objects.create(user=user).key
    r = raw.call("whoami", headers={"authorization": f"Token {key}"})
    assert r.json()["result"]["structuredContent"]["username"] == "hal"


# -- the management command ----------------------------------------------------------------


@pytest.mark.django_db
def test_mcp_token_command_creates_lists_and_revokes(raw: Raw) -> None:
    get_user_model().objects.create_user("ida", password="pw")
    out = StringIO()
    call_command(
        "mcp_token", "create", "ida", "cursor", "--scope", "mcp", "--handler", "whoami", "--expires", "7d", stdout=out
    )
    text = out.getvalue().strip()
    token = MCPToken.objects.get()
    assert text.startswith(f"mcp_{token.prefix}_") and "\n" not in text
    assert token.name == "cursor" and token.scopes == "mcp" and token.handlers == "whoami"
    assert token.expires is not None and token.expires > timezone.now() + datetime.timedelta(days=6)
    assert whoami(raw, text).status_code == 200

    out = StringIO()
    call_command("mcp_token", "list", stdout=out)
    listed = out.getvalue()
    assert token.prefix in listed and "cursor" in listed and "ida" in listed and text.split("_", 2)[2] not in listed

    out = StringIO()
    call_command("mcp_token", "revoke", token.prefix, stdout=out)
    assert out.getvalue().strip() == f"revoked {token.prefix}"
    assert whoami(raw, text).status_code == 401
    out = StringIO()
    call_command("mcp_token", "list", stdout=out)
    assert token.prefix not in out.getvalue()
    out = StringIO()
    call_command("mcp_token", "list", "--all", stdout=out)
    assert "revoked" in out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args",
    [
        ["create", "nobody", "x"],
        ["create", "ida", "x", "--expires", "soon"],
        ["create", "ida", "x", "--expires", "-1d"],
        ["create", "ida", "x", "--expires", "0h"],
        ["create", "ida", "x", "--jkt", "not-a-thumbprint"],
        ["revoke", "ffffffffffff"],
        ["list", "nobody"],
    ],
)
def test_mcp_token_command_refuses_bad_input(args: list[str]) -> None:
    get_user_model().objects.create_user("ida", password="pw")
    with pytest.raises(CommandError):
        call_command("mcp_token", *args, stdout=StringIO())
    assert not MCPToken.objects.exists()


# -- the whole life with the official SDK, and an open websocket -----------------------------


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_lifecycle_with_the_sdk_client(live_url: str) -> None:
    from mcp import MCPError

    token, text = await issue("jo", "sdk")
    with mcp_settings(ALLOW_ANONYMOUS=False):
        async with bearer_client(live_url, text) as client:
            who = await client.call_tool("whoami")
            assert who.structured_content["username"] == "jo"
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert {"whoami", "echo", "orders_list"} <= listed

        # Limited to the "mcp" scope: the orders tools (scopes=["shop"]) are hidden and refused.
        _scoped, scoped_text = await issue("jo", "scoped", scopes=["mcp"])
        async with bearer_client(live_url, scoped_text) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert "echo" in listed and "orders_list" not in listed
            with pytest.raises(MCPError) as refused:
                await client.call_tool("orders_list", {})
            assert isinstance(refused.value, MCPError) and refused.value.code == -32600
            assert refused.value.data == {"requiredScopes": ["mcp", "shop"]}

        # Limited to two handlers: nothing else is listed, and a call to another is a 403.
        _limited, limited_text = await issue("jo", "limited", handlers=["whoami", "echo"])
        async with bearer_client(live_url, limited_text) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert listed == {"whoami", "echo"}
            assert (await client.call_tool("echo", {"text": "hi"})).is_error is False
            with pytest.raises(MCPError) as refused:
                await client.call_tool("reverse", {"text": "hi"})
            assert isinstance(refused.value, MCPError) and refused.value.code == -32600
            assert "may not use the tool reverse" in str(refused.value)

        # Revoked while the client is connected: the next request is refused.
        async with bearer_client(live_url, text) as client:
            assert (await client.call_tool("whoami")).structured_content["username"] == "jo"
            await sync_to_async(token.revoke)()
            with pytest.raises(MCPError) as refused:
                await client.call_tool("whoami")
            assert isinstance(refused.value, MCPError) and "The MCP token was revoked." in str(refused.value)
    rows = await sync_to_async(list)(AuditEvent.objects.filter(target="whoami").values_list("credential", flat=True))
    assert f"sdk ({token.prefix})" in rows


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_raw_http_refusals_of_limited_tokens(live_url: str) -> None:
    _t, scoped = await issue("kim", "scoped", scopes=["mcp"])
    _t2, limited = await issue("kim", "limited", handlers=["whoami"])
    async with httpx.AsyncClient(timeout=30) as http:
        raw = Raw(live_url, http)  # type: ignore[arg-type]
        params = {"name": "orders_list", "arguments": {}}
        r = await http.post(
            live_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**params, "_meta": _meta()}},
            headers={**raw.headers("tools/call", params), "authorization": f"Bearer {scoped}"},
        )
        assert r.status_code == 403 and r.json()["error"]["code"] == -32600
        assert "insufficient_scope" in r.headers["www-authenticate"]
        params = {"name": "echo", "arguments": {"text": "x"}}
        r = await http.post(
            live_url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**params, "_meta": _meta()}},
            headers={**raw.headers("tools/call", params), "authorization": f"Bearer {limited}"},
        )
        assert r.status_code == 403 and r.json()["error"]["code"] == -32600
        assert "may not use the tool echo" in r.json()["error"]["message"]


def _meta() -> dict[str, Any]:
    from tests.conftest import meta

    return meta()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_an_open_websocket_ends_when_its_token_is_revoked(live_url: str) -> None:
    token, text = await issue("lou", "socket")
    ws_url = live_url.replace("http://", "ws://")
    headers = {"Authorization": f"Bearer {text}"}
    async with websockets.connect(ws_url, subprotocols=["mcp"], additional_headers=headers) as socket:
        await socket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
        assert "result" in json.loads(await socket.recv())
        call = {"name": "whoami", "arguments": {}}
        await socket.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
        assert json.loads(await socket.recv())["result"]["structuredContent"]["username"] == "lou"
        await sync_to_async(token.revoke)()
        await socket.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}))
        assert json.loads(await socket.recv())["error"]["code"] == -32600
        with pytest.raises(websockets.ConnectionClosed):
            await socket.recv()
    assert socket.close_code == 4401


# -- the admin -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_shows_the_secret_once_after_the_save(client: Any, raw: Raw) -> None:
    admin_user = get_user_model().objects.create_superuser("root", password="pw")
    owner = get_user_model().objects.create_user("max", password="pw")
    client.force_login(admin_user)
    page = client.post(
        "/admin/mcp_django/mcptoken/add/",
        {"user": owner.pk, "name": "zed editor", "scopes": "mcp", "handlers": "", "expires_0": "", "expires_1": ""},
    )
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    token = MCPToken.objects.get()
    text = page.context["token_text"]
    assert text.startswith(f"mcp_{token.prefix}_") and text in page.content.decode()
    assert whoami(raw, text).json()["result"]["structuredContent"]["username"] == "max"
    secret = text.split("_", 2)[2]
    # Never again: not on the change page, the list, nor in the session.
    for url in (f"/admin/mcp_django/mcptoken/{token.pk}/change/", "/admin/mcp_django/mcptoken/"):
        shown = client.get(url)
        assert shown.status_code == 200 and secret not in shown.content.decode()
    assert secret not in str(dict(client.session.items()))
    # Edited: the name changes; the secret and the owner stay (a user posted for it is ignored).
    edited = client.post(
        f"/admin/mcp_django/mcptoken/{token.pk}/change/",
        {"user": admin_user.pk, "name": "renamed", "scopes": "mcp", "handlers": "", "expires_0": "", "expires_1": ""},
    )
    assert edited.status_code == 302
    token.refresh_from_db()
    assert (token.name, token.user_id) == ("renamed", owner.pk) and token.secret_matches(secret)
    assert whoami(raw, text).json()["result"]["structuredContent"]["username"] == "max"
    # Revoked by the list's action: refused from the next request.
    done = client.post(
        "/admin/mcp_django/mcptoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]}, follow=True
    )
    assert "1 token revoked." in done.content.decode()
    assert whoami(raw, text).status_code == 401


@pytest.mark.django_db
def test_the_admin_searches_tokens_by_the_user_models_own_name_field(client: Any, monkeypatch: Any) -> None:
    # A custom user model may name its users by email and have no username at all.
    users = get_user_model()
    client.force_login(users.objects.create_superuser("root", password="pw"))
    owner = users.objects.create_user("max", email="max@example.com", password="pw")
    MCPToken(user=owner, name="zed editor").set_new_secret()
    monkeypatch.setattr(users, "USERNAME_FIELD", "email")
    found = client.get("/admin/mcp_django/mcptoken/", {"q": "max@example"})
    assert found.status_code == 200 and "zed editor" in found.content.decode()


# -- the user's own page ---------------------------------------------------------------------


@pytest.mark.django_db
def test_the_users_page_lists_creates_once_and_revokes(raw: Raw) -> None:
    from django.test import Client

    assert Client().get("/mcp/tokens/").status_code == 302  # login required
    owner = get_user_model().objects.create_user("ned", password="pw")
    other, other_text = _issue("oli", "not ned's")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    page = browser.get("/mcp/tokens/")
    assert page.status_code == 200 and "No tokens yet." in page.content.decode()
    assert other.prefix not in page.content.decode()
    csrf = page.cookies["csrftoken"].value
    assert browser.post("/mcp/tokens/", {"name": "vs code"}).status_code == 403  # no CSRF token

    created = browser.post(
        "/mcp/tokens/", {"name": "vs code", "handlers": "whoami", "days": "30", "csrfmiddlewaretoken": csrf}
    )
    assert created.status_code == 200
    text = created.context["token_text"]
    token = MCPToken.objects.get(user=owner)
    assert text.startswith(f"mcp_{token.prefix}_") and text in created.content.decode()
    assert token.handlers == "whoami" and token.expires is not None
    assert whoami(raw, text).json()["result"]["structuredContent"]["username"] == "ned"
    again = browser.get("/mcp/tokens/").content.decode()
    assert token.prefix in again and text.split("_", 2)[2] not in again

    bad = browser.post("/mcp/tokens/", {"name": "", "days": "0", "csrfmiddlewaretoken": csrf})
    assert bad.status_code == 400 and MCPToken.objects.filter(user=owner).count() == 1

    # Someone else's token cannot be revoked from here; GET does not revoke.
    assert browser.post(f"/mcp/tokens/{other.prefix}/revoke/", {"csrfmiddlewaretoken": csrf}).status_code == 404
    assert browser.get(f"/mcp/tokens/{token.prefix}/revoke/").status_code == 405
    assert whoami(raw, other_text).status_code == 200
    done = browser.post(f"/mcp/tokens/{token.prefix}/revoke/", {"csrfmiddlewaretoken": csrf})
    assert done.status_code == 302
    assert whoami(raw, text).status_code == 401
    assert "revoked" in browser.get("/mcp/tokens/").content.decode()


# -- django-oauth-toolkit with the RFC 9700 settings the demo turns on -------------------------


def test_the_demo_passes_the_toolkits_token_storage_and_refresh_checks() -> None:
    from django.core import checks

    found = {message.id for message in checks.run_checks(include_deployment_checks=True)}
    assert not found & {"oauth2_provider.W006", "oauth2_provider.W007", "oauth2_provider.E001", "oauth2_provider.E002"}


@pytest.mark.django_db
def test_oauth_tokens_stored_hashed_work_and_a_replayed_refresh_token_ends_the_family(raw: Raw) -> None:
    import uuid

    from django.test import Client
    from oauth2_provider.models import AccessToken, Application, RefreshToken, set_token_value

    user = get_user_model().objects.create_user("pia", password="pw")
    app = Application.objects.create(
        name="native",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:9/callback",
    )
    resource = [raw.url]
    access = AccessToken(
        user=user, application=app, scope="mcp", resource=resource, expires=timezone.now() + datetime.timedelta(hours=1)
    )
    set_token_value(access, "first-access")
    access.save()
    refresh = RefreshToken(user=user, application=app, access_token=access, token_family=uuid.uuid4())
    set_token_value(refresh, "first-refresh")
    refresh.save()
    assert AccessToken.objects.get(pk=access.pk).token == "" and RefreshToken.objects.get(pk=refresh.pk).token == ""

    def call(token: str) -> httpx.Response:
        return raw.call("whoami", headers={"authorization": f"Bearer {token}"})

    assert call("first-access").json()["result"]["structuredContent"]["username"] == "pia"
    endpoint = "/o/token/"
    grant = {
        "grant_type": "refresh_token",
        "refresh_token": "first-refresh",
        "client_id": app.client_id,
        "resource": raw.url,
    }
    renewed = Client().post(endpoint, grant)
    assert renewed.status_code == 200, renewed.content
    second = renewed.json()["access_token"]
    assert call(second).json()["result"]["structuredContent"]["username"] == "pia"
    # The old refresh token again (a thief's copy): refused, and every token of its family ends.
    replayed = Client().post(endpoint, grant)
    assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant"
    r = call(second)
    assert r.status_code == 401 and "invalid_token" in r.headers["www-authenticate"]


@pytest.mark.django_db
def test_the_audit_log_shows_and_finds_the_token_a_call_used(client: Any, raw: Raw) -> None:
    token, text = _issue("quin", "cron job")
    assert whoami(raw, text).status_code == 200
    client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
    page = client.get("/admin/mcp_django/auditevent/", {"q": token.prefix}).content.decode()
    assert f'<td class="field-who">quin<br><small>cron job ({token.prefix})</small></td>' in page


def test_a_check_warns_when_another_bearer_class_comes_first() -> None:
    from mcp_django.tokens.auth import check_token_class_order

    assert check_token_class_order() == []  # the demo's order
    wrong = [
        "mcp_django.auth.SessionAuthentication",
        "mcp_django.contrib.oauth.OAuth2Authentication",
        "mcp_django.tokens.auth.MCPTokenAuthentication",
    ]
    with mcp_settings(AUTHENTICATION_CLASSES=wrong):
        (warning,) = check_token_class_order()
    assert warning.id == "mcp_django.W040" and "mcp_django.contrib.oauth.OAuth2Authentication" in warning.msg
    with mcp_settings(AUTHENTICATION_CLASSES=["rest_framework.authentication.TokenAuthentication", wrong[2]]):
        assert check_token_class_order() == []  # DRF's "Token" keyword leaves Bearer alone


@pytest.mark.django_db
def test_the_oauth_class_first_would_refuse_mcp_tokens(raw: Raw) -> None:
    # What W040 warns of, shown: the order matters.
    _token, text = _issue("sam")
    wrong = ["mcp_django.contrib.oauth.OAuth2Authentication", "mcp_django.tokens.auth.MCPTokenAuthentication"]
    with mcp_settings(AUTHENTICATION_CLASSES=wrong):
        assert whoami(raw, text).status_code == 401
    assert whoami(raw, text).status_code == 200
