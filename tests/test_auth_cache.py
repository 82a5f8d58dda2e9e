"""The principal cache cannot be fooled: the key is what Django reads, revocation is seen at once."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from mcp_django.auth import Principal
from mcp_django.auth_cache import principal_cache
from tests.conftest import Raw, mcp_settings
from tests.processes import ThreadedUvicorn

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parent.parent


class QueryTokenAuthentication(TokenAuthentication):
    """A TokenAuthentication that also reads ``?key=``: it must run on every request."""

    def authenticate(self, request: Any) -> Any:
        key = request.query_params.get("key")
        if key:
            return self.authenticate_credentials(key)
        return super().authenticate(request)


class OptedInTokenAuthentication(TokenAuthentication):
    keyword = "Bearer"
    mcp_reads_only_headers = True


class InheritsOptIn(OptedInTokenAuthentication):
    def authenticate(self, request: Any) -> Any:  # might read anything: the opt-in is not inherited
        return super().authenticate(request)


def whoami(raw: Raw, headers: Any, url: str | None = None) -> tuple[int, str | None]:
    """tools/call whoami with these headers (a list keeps repeated fields apart)."""
    params = {"name": "whoami", "arguments": {}, "_meta": _meta()}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    base = list(raw.headers("tools/call", params).items())
    extra = list(headers.items()) if isinstance(headers, dict) else list(headers)
    r = raw.client.post(url or raw.url, content=json.dumps(body), headers=base + extra)
    if r.status_code != 200:
        return r.status_code, None
    return 200, r.json()["result"]["structuredContent"]["username"]


def _meta() -> dict[str, Any]:
    from tests.conftest import meta

    return meta()


def login(username: str, **extra: Any) -> tuple[Any, Client, str]:
    user = get_user_model().objects.create_user(username, password="pw", **extra)
    browser = Client()
    browser.force_login(user)
    return user, browser, browser.cookies["sessionid"].value


def test_a_session_cookie_in_an_earlier_cookie_field_is_keyed_as_django_reads_it(raw: Raw) -> None:
    """Two Cookie fields: the session in the first. An attacker with any cookie and no session gets nothing."""
    import django

    _user, _browser, session = login("victim")
    victim = whoami(raw, [("cookie", f"sessionid={session}"), ("cookie", "csrftoken=x")])
    # Django 6 joins the fields with "; " and finds the session; 5.2 joins them with "," and does not.
    assert victim == ((200, "victim") if django.VERSION >= (6,) else (200, None))
    assert whoami(raw, {"cookie": "x=1"}) == (200, None)
    assert whoami(raw, [("cookie", "x=1"), ("cookie", "y=2")]) == (200, None)


def header_bound_only() -> bool:
    from mcp_django.conf import mcp_settings as settings_read

    return bool(settings_read.endpoint("default").reads_only_headers)


def test_a_subclass_that_reads_the_query_string_runs_on_every_request(raw: Raw) -> None:
    user = get_user_model().objects.create_user("quinn")
    token = Token.objects.create(user=user)
    with mcp_settings(AUTHENTICATION_CLASSES=["tests.test_auth_cache.QueryTokenAuthentication"]):
        assert not header_bound_only()
        bogus = {"authorization": "Token 0000000000000000000000000000000000000000"}
        assert whoami(raw, bogus, url=f"{raw.url}?key={token.key}") == (200, "quinn")
        assert whoami(raw, bogus)[0] == 401  # the same headers without the query: not quinn
    with mcp_settings(AUTHENTICATION_CLASSES=["tests.test_auth_cache.OptedInTokenAuthentication"]):
        assert header_bound_only()
        assert whoami(raw, {"authorization": f"Bearer {token.key}"}) == (200, "quinn")
    with mcp_settings(AUTHENTICATION_CLASSES=["tests.test_auth_cache.InheritsOptIn"]):
        assert not header_bound_only()


@pytest.mark.parametrize("how", ["logout", "flush", "delete"])
def test_logout_and_a_deleted_session_take_effect_at_once(raw: Raw, how: str) -> None:
    from django.contrib.sessions.backends.db import SessionStore

    _user, browser, session = login(f"ivy-{how}")
    cookie = {"cookie": f"sessionid={session}; csrftoken=abc"}
    assert whoami(raw, cookie) == (200, f"ivy-{how}")
    assert whoami(raw, cookie) == (200, f"ivy-{how}")  # served from the cache
    entries = len(principal_cache._entries)
    if how == "logout":
        browser.logout()  # user_logged_out, then the session is flushed
    elif how == "flush":
        store = SessionStore(session_key=session)
        store.load()
        store.flush()
    else:
        from django.contrib.sessions.models import Session

        Session.objects.filter(session_key=session).delete()
    # Nothing cleared this process's entries: the shared version tells it.
    assert len(principal_cache._entries) == entries
    assert whoami(raw, cookie) == (200, None)


def test_a_password_change_ends_the_session_at_once(raw: Raw) -> None:
    user, _browser, session = login("jon")
    cookie = {"cookie": f"sessionid={session}"}
    assert whoami(raw, cookie) == (200, "jon")
    entries = len(principal_cache._entries)
    user.set_password("new")
    user.save()
    assert len(principal_cache._entries) == entries
    assert whoami(raw, cookie) == (200, None)


def test_a_permission_change_takes_effect_at_once(raw: Raw) -> None:
    from django.contrib.auth.models import Group, Permission

    user = get_user_model().objects.create_user("kim")
    token = {"authorization": f"Token {Token.objects.create(user=user).key}"}
    view = Permission.objects.get(codename="view_product")

    def read() -> int | None:
        params = {"uri": "shop://catalogue", "_meta": _meta()}
        return raw.post("resources/read", params, headers=token).json().get("error", {}).get("code")

    assert read() == -32602  # not visible
    group = Group.objects.create(name="viewers")
    group.permissions.add(view)
    user.groups.add(group)
    assert read() is None
    group.permissions.remove(view)
    assert read() == -32602
    user.user_permissions.add(view)
    assert read() is None
    # From the group's side (the users in the signal's pk_set): every process is told.
    from mcp_django.auth_cache import shared, version_key

    user.user_permissions.remove(view)
    group.permissions.add(view)
    assert read() is None
    version = version_key(f"auth.user:{user.pk}")
    before = shared().get(version)
    group.user_set.remove(user)
    assert shared().get(version) != before
    assert read() == -32602


def test_only_a_shared_version_that_is_unchanged_serves_a_hit(raw: Raw) -> None:
    """What another process's change looks like here: only the shared version changed."""
    from django.core.cache import caches

    from mcp_django.auth_cache import shared, version_key

    user = get_user_model().objects.create_user("lou")
    token = {"authorization": f"Token {Token.objects.create(user=user).key}"}
    assert whoami(raw, token) == (200, "lou")
    # Renamed without signals (as another process would, whose receivers only reach the shared cache).
    get_user_model().objects.filter(pk=user.pk).update(username="lou2")
    assert whoami(raw, token) == (200, "lou")  # still the cached user
    # Evicted or expired: never a stale hit.
    store, key = shared(), version_key(f"auth.user:{user.pk}")
    if store.local:
        del store.versions[key]
    else:
        caches[store.alias].delete(key)
    assert whoami(raw, token) == (200, "lou2")
    get_user_model().objects.filter(pk=user.pk).update(username="lou3")
    shared().set(version_key(f"auth.user:{user.pk}"), 12345)  # changed by another process
    assert whoami(raw, token) == (200, "lou3")


def test_a_new_account_with_a_deleted_users_id_is_another_principal() -> None:
    from mcp_django.request_state import Claims, Reason, StateRefused, seal, unseal

    users = get_user_model()
    old = users.objects.create_user("mia")
    pk, old_digests = old.pk, Principal(old).digests
    token = seal(Claims(method="tools/call", target="t", principal=Principal(old).digest, digest="d", audience="a"))
    old.delete()
    new = users.objects.create_user("ned", id=pk)
    assert Principal(new).label == f"auth.user:{pk}"
    assert not Principal(new).matches(old_digests[0])
    with pytest.raises(StateRefused) as refused:
        unseal(token, method="tools/call", target="t", principal=Principal(new).digests, digest="d", audience="a")
    assert refused.value.reason == Reason.WRONG_PRINCIPAL


def test_a_new_account_with_a_deleted_users_id_cannot_continue_its_legacy_session(raw: Raw) -> None:
    users = get_user_model()
    old = users.objects.create_user("ola")
    pk = old.pk
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    first = raw.client.post(
        raw.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        headers={**headers, "authorization": f"Token {Token.objects.create(user=old).key}"},
    )
    sid = first.headers["mcp-session-id"]
    old.delete()
    new = users.objects.create_user("pia", id=pk)
    r = raw.client.post(
        raw.url,
        json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
        headers={
            **headers,
            "authorization": f"Token {Token.objects.create(user=new).key}",
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-11-25",
        },
    )
    assert r.status_code == 403


@pytest.mark.anyio
@pytest.mark.parametrize("revoke", ["deactivate", "delete token", "logout"])
async def test_an_open_websocket_stops_when_its_credentials_are_revoked(live_url: str, revoke: str) -> None:
    from asgiref.sync import sync_to_async
    from websockets.exceptions import ConnectionClosed

    from tests.legacy_fixtures import ws_client

    def make() -> tuple[Any, Client, dict[str, str]]:
        user, browser, session = login(f"rae-{revoke.replace(' ', '-')}")
        token = Token.objects.create(user=user)
        if revoke == "logout":
            return user, browser, {"Cookie": f"sessionid={session}"}
        return user, browser, {"Authorization": f"Token {token.key}"}

    def do_revoke(user: Any, browser: Client) -> None:
        if revoke == "deactivate":
            user.is_active = False
            user.save()
        elif revoke == "delete token":
            Token.objects.filter(user=user).delete()
        else:
            browser.logout()

    user, browser, headers = await sync_to_async(make)()
    async with ws_client(live_url, additional_headers=headers) as client:
        await client.initialize({})
        first = await client.request("tools/call", {"name": "legacytest_whoami", "arguments": {}})
        assert first["result"]["content"][0]["text"] == f"auth.user:{user.pk}"
        await sync_to_async(do_revoke)(user, browser)
        refused = await client.request("tools/call", {"name": "legacytest_whoami", "arguments": {}})
        assert refused["error"]["code"] == -32600
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(client.reader, 10)  # the server closed the socket
        assert client.socket.close_code == 4401


def _other_process(code: str, **env_extra: str) -> None:
    """Run ``code`` in a separate Django process on this test's database and shared cache."""
    from django.db import connection

    settings = connection.settings_dict
    url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": url, **env_extra}
    env.pop("MCP_TEST_DB_NAME", None)
    script = f"import django; django.setup()\n{code}"
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True, timeout=120)


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs a shared cache (REDIS_URL) and PostgreSQL")
def test_with_the_longer_cache_a_change_made_in_another_process_takes_effect_here_at_once(raw: Raw) -> None:
    """The opt-in longer cache checks the users' versions in the shared cache on every hit."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (another process must see the test's rows)")
    user = get_user_model().objects.create_user("sal")
    token = Token.objects.create(user=user)
    other = Token.objects.create(user=get_user_model().objects.create_user("tia"))
    with mcp_settings(AUTH_CACHE_SECONDS=300):
        assert whoami(raw, {"authorization": f"Token {token.key}"}) == (200, "sal")
        assert whoami(raw, {"authorization": f"Token {other.key}"}) == (200, "tia")
        _other_process(
            "from django.contrib.auth.models import User\n"
            f"u = User.objects.get(pk={user.pk}); u.is_active = False; u.save()\n"
            f"from rest_framework.authtoken.models import Token; Token.objects.get(key={other.key!r}).delete()\n",
            MCP_AUTH_CACHE_SECONDS="300",
        )
        assert whoami(raw, {"authorization": f"Token {token.key}"})[0] == 401
        assert whoami(raw, {"authorization": f"Token {other.key}"})[0] == 401


def test_hits_on_a_local_cache_need_no_thread(raw: Raw, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hit path stays cheap: no worker thread, and no shared cache, with the default cache."""
    from mcp_django import auth_cache

    user = get_user_model().objects.create_user("uma")
    token = {"authorization": f"Token {Token.objects.create(user=user).key}"}
    assert whoami(raw, token) == (200, "uma")
    assert auth_cache.shared().local  # whatever SESSION_CACHE is: nothing read from Redis
    calls = []
    monkeypatch.setattr(auth_cache.PrincipalCache, "remember", lambda *a: calls.append(a))
    monkeypatch.setattr("mcp_django.asks.invoke.run_in_thread", lambda *a: calls.append(a))
    assert whoami(raw, token) == (200, "uma")
    assert calls == []  # a hit: nothing authenticated, no thread
    with mcp_settings(AUTH_CACHE_SECONDS=30):  # the opt-in: versions in the shared cache when it is one
        assert auth_cache.shared().local == (not os.environ.get("REDIS_URL"))


def test_repeated_headers_are_joined_as_django_joins_them() -> None:
    import io

    from django.core.handlers.asgi import ASGIRequest

    from mcp_django.transports.asgi import asgi_headers

    fields = [(b"cookie", b"sessionid=S;"), (b"cookie", b"csrftoken=x"), (b"authorization", b"Token a")]
    fields.append((b"authorization", b"b"))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": fields}
    django_request = ASGIRequest(scope, io.BytesIO(b""))
    headers = asgi_headers(scope)
    assert headers["cookie"] == django_request.META["HTTP_COOKIE"]
    assert headers["authorization"] == django_request.META["HTTP_AUTHORIZATION"]
    # Names lower-cased and values stripped alike whether a name comes once or twice, and
    # whatever kind of sequence the server gives.
    once = [(b"Host", b" a.test \t"), (b"X-Thing", b"\tz")]
    assert (
        asgi_headers({"headers": once}) == asgi_headers({"headers": tuple(once)}) == {"host": "a.test", "x-thing": "z"}
    )
    twice = [(b"X-Thing", b" y"), (b"host", b"a.test"), (b"x-thing", b"z ")]
    assert (
        asgi_headers({"headers": twice})
        == asgi_headers({"headers": tuple(twice)})
        == {"x-thing": "y,z", "host": "a.test"}
    )


def test_key_rotation_keeps_legacy_sessions_and_flows(raw: Raw) -> None:
    """REQUEST_STATE_KEY = [new, old]: a session opened and a flow begun under the old key go on."""
    old, new = "o" * 40, "n" * 40
    user = get_user_model().objects.create_user("val")
    auth = {"authorization": f"Token {Token.objects.create(user=user).key}"}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **auth}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    with mcp_settings(REQUEST_STATE_KEY=old):
        opened = raw.client.post(
            raw.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=headers
        )
        sid = opened.headers["mcp-session-id"]
        first = raw.call("plan_trip", {"traveller": "Val"}, headers=auth)
        state = first.json()["result"]["requestState"]
    with mcp_settings(REQUEST_STATE_KEY=[new, old]):
        ping = raw.client.post(
            raw.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
            headers={**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"},
        )
        assert ping.status_code == 200 and ping.json()["result"] == {}
        answers = first.json()["result"]["inputRequests"]
        responses = {
            key: {"action": "decline"} if ask["method"] == "elicitation/create" else {"roots": []}
            for key, ask in answers.items()
        }
        second = raw.call("plan_trip", {"traveller": "Val"}, headers=auth, requestState=state, inputResponses=responses)
        assert second.json()["result"]["content"][0]["text"] == "No trip planned.", second.json()


# -- what the verdict depended on is part of the key; no change waits more than 1 s -----------


class _TwoEndpoints(ThreadedUvicorn):
    """uvicorn in a thread serving the MCP application at /mcp and at /second/mcp (one process,
    one principal cache), like conftest's LiveServer."""

    def __init__(self) -> None:
        from channels.routing import URLRouter

        from mcp_django.routing import mcp_urlpatterns
        from mcp_django.transports.asgi import MCPApplication

        super().__init__(URLRouter([*mcp_urlpatterns("mcp"), *mcp_urlpatterns("second/mcp", MCPApplication())]))


def _oauth_token(user: Any, resource: str) -> str:
    from datetime import timedelta

    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    app = Application.objects.create(
        name="direct",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:9/callback",
        user=user,
    )
    token = AccessToken.objects.create(
        user=user,
        application=app,
        token=f"tok-{user.pk}-{AccessToken.objects.count()}",
        expires=timezone.now() + timedelta(hours=1),
        scope="mcp",
        resource=[resource],
    )
    return token.token


def _whoami_post(url: str, host: str, authorization: str) -> Any:
    """A whoami call to the live server at ``url``, sent as to ``host``; the httpx response."""
    import httpx

    params = {"name": "whoami", "arguments": {}, "_meta": _meta()}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {
        "host": host,
        "authorization": authorization,
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "whoami",
    }
    return httpx.post(url, json=body, headers=headers, timeout=30)


def _bearer_status(url: str, host: str, token: str) -> int:
    return int(_whoami_post(url, host, f"Bearer {token}").status_code)


def test_an_oauth_token_is_served_from_the_cache_only_where_it_was_issued_for(live_url: str) -> None:
    """Two hosts and two endpoints in one process: a warm cache opens no address the token lacks."""
    user = get_user_model().objects.create_user("wes")
    with _TwoEndpoints() as server, mcp_settings(AUTH_CACHE_SECONDS=60):
        port = server.port
        first, second = f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}/second/mcp"
        for_first, for_second = _oauth_token(user, first), _oauth_token(user, second)
        right = f"127.0.0.1:{port}"
        for _ in range(2):  # cold, then warm: the same verdicts
            assert _bearer_status(first, right, for_first) == 200
            assert _bearer_status(second, right, for_second) == 200
            for host in (f"localhost:{port}", f"[::1]:{port}"):
                assert _bearer_status(first, host, for_first) == 401
                assert _bearer_status(second, host, for_second) == 401
            assert _bearer_status(second, right, for_first) == 401
            assert _bearer_status(first, right, for_second) == 401
            assert _bearer_status(f"{first}/", right, for_first) == 200  # the same resource (its slash)


def test_the_cache_key_names_the_url_the_request_reached() -> None:
    headers = {"authorization": "Bearer t", "host": "a.example"}
    key = principal_cache.key(headers, "http  /mcp")
    assert key == principal_cache.key(dict(headers), "http  /mcp")
    assert key != principal_cache.key(headers, "https  /mcp")
    assert key != principal_cache.key(headers, "http  /other/mcp")
    assert key != principal_cache.key(headers, "http /root /mcp")
    assert key != principal_cache.key({**headers, "host": "b.example"}, "http  /mcp")
    assert key != principal_cache.key({**headers, "x-forwarded-host": "b.example"}, "http  /mcp")
    with override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")):
        plain = principal_cache.key(headers, "http  /mcp")
        assert plain != principal_cache.key({**headers, "x-forwarded-proto": "https"}, "http  /mcp")


def test_no_two_requests_share_a_cache_key_by_where_one_part_ends() -> None:
    """Each part counts whole: moving text from one part into the next (the credential into
    the URL, a colon that looks like a length prefix) makes another key."""
    keys = {
        principal_cache.key({"authorization": authorization, "host": host}, endpoint)
        for authorization, host, endpoint in [
            ("Bearer ab", "h", "http  /mcp"),
            ("Bearer a", "bh", "http  /mcp"),
            ("Bearer a", "b", "hhttp  /mcp"),
            ("Bearer ab", "", "hhttp  /mcp"),
            ('Bearer a", "b', "h", "http  /mcp"),
            ("1:a", "h", "http  /mcp"),
            ("1:a1:h", "", "http  /mcp"),
        ]
    }
    assert None not in keys and len(keys) == 7


def test_a_header_that_cannot_be_hashed_gets_no_key_rather_than_an_error() -> None:
    # No transport decodes a header into a lone surrogate (latin-1 cannot make one); if a
    # harness did, the request is authenticated anew instead of failing.
    assert principal_cache.key({"authorization": "Bearer \ud800", "host": "h"}, "http  /mcp") is None


@pytest.mark.parametrize("change", ["deactivate", "expire", "raw sql"])
def test_a_change_made_without_signals_holds_within_a_second(live_url: str, change: str) -> None:
    """QuerySet.update() and raw SQL send no signal: the default cache forgets within 1 s anyway."""
    import time
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone
    from oauth2_provider.models import AccessToken

    assert mcp_settings_value("AUTH_CACHE_SECONDS") <= 1
    users = get_user_model()
    user = users.objects.create_user(f"xan-{change.replace(' ', '-')}")
    token = _oauth_token(user, live_url)
    host = live_url.split("/")[2]
    assert _bearer_status(live_url, host, token) == 200
    assert _bearer_status(live_url, host, token) == 200  # now remembered
    if change == "deactivate":
        users.objects.filter(pk=user.pk).update(is_active=False)
    elif change == "expire":
        AccessToken.objects.filter(token=token).update(expires=timezone.now() - timedelta(seconds=1))
    else:
        with connection.cursor() as cursor:
            table = users._meta.db_table
            cursor.execute(f"UPDATE {table} SET is_active = %s WHERE id = %s", [False, user.pk])
    # The entry was remembered before the change: a request sent a cache lifetime after the
    # change must be authenticated anew, however long the answers take on a loaded machine.
    changed = time.monotonic()
    while True:
        sent = time.monotonic()
        status = _bearer_status(live_url, host, token)
        if status != 200:
            assert status == 401
            break
        assert sent - changed < mcp_settings_value("AUTH_CACHE_SECONDS"), "a change made without signals was not seen"
        time.sleep(0.05)


def mcp_settings_value(name: str) -> Any:
    from mcp_django.conf import mcp_settings as current

    return getattr(current, name)


def test_requests_that_miss_together_authenticate_once(live_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry expires for every connection at once: the requests that came in while the
    first one authenticated wait for it rather than each authenticating too."""
    import threading
    import time

    from mcp_django import pipeline

    user = get_user_model().objects.create_user("yan")
    token = Token.objects.create(user=user).key
    host = live_url.split("/")[2]
    ran = []
    authenticate = pipeline.authenticate_and_remember

    def slow(*args: Any) -> Any:
        ran.append(args)
        time.sleep(0.3)  # the others arrive meanwhile
        return authenticate(*args)

    monkeypatch.setattr(pipeline, "authenticate_and_remember", slow)
    statuses: list[tuple[int, str | None]] = []
    threads = [threading.Thread(target=lambda: statuses.append(_whoami_live(live_url, host, token))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [(200, "yan")] * 6
    assert len(ran) == 1


def test_a_wait_for_another_authentication_counts_against_auth_timeout(
    live_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that does not answer: the request that waited for the first one's
    authentication is answered 503 when its own AUTH_TIMEOUT has run out, not twice it."""
    import threading
    import time

    from mcp_django import pipeline

    user = get_user_model().objects.create_user("hung")
    token = Token.objects.create(user=user).key
    host = live_url.split("/")[2]
    ran = []

    def hung(*args: Any) -> Any:
        ran.append(args)
        time.sleep(4)
        raise AssertionError("not answered in time: the request has been answered already")

    monkeypatch.setattr(pipeline, "authenticate_and_remember", hung)
    answers: dict[str, tuple[tuple[int, str | None], float]] = {}

    def send(name: str) -> None:
        sent = time.monotonic()
        answers[name] = (_whoami_live(live_url, host, token), time.monotonic() - sent)

    with mcp_settings(AUTH_TIMEOUT=1.5):
        first = threading.Thread(target=send, args=("first",))
        first.start()
        while not ran:
            time.sleep(0.01)
        second = threading.Thread(target=send, args=("second",))
        second.start()
        first.join()
        second.join()
    assert answers["first"][0] == answers["second"][0] == (503, None)
    # The second waited for the first, then had only what was left of its own bound (the
    # first's plus a whole one of its own would be about 3 s).
    assert answers["second"][1] < 1.5 + 1.0


def _whoami_live(url: str, host: str, token: str) -> tuple[int, str | None]:
    r = _whoami_post(url, host, f"Token {token}")
    if r.status_code != 200:
        return r.status_code, None
    return 200, r.json()["result"]["structuredContent"]["username"]


@pytest.mark.anyio
async def test_a_waiter_gets_only_what_the_authentication_it_waited_for_remembered() -> None:
    """Refused, failed or cancelled: the waiters are woken and find nothing (each then
    authenticates on its own); remembered: they get the principal, through the version check."""
    from asgiref.sync import sync_to_async

    user = await sync_to_async(get_user_model().objects.create_user)("zoe")
    key = b"k" * 32
    principal_cache.clear()
    assert await principal_cache.after_pending(key) is None  # nothing under way: no wait

    async def waiter() -> Principal | None:
        return await principal_cache.after_pending(key)

    # The authentication under way ends without remembering anything (refused, an error).
    with pytest.raises(RuntimeError), principal_cache.leading(key):
        waiting = asyncio.ensure_future(waiter())
        await asyncio.sleep(0)
        assert not waiting.done()
        raise RuntimeError("the database went away")
    assert await waiting is None
    assert not principal_cache._pending

    # It remembers a principal: the waiters get it; one cancelled does not stop the others.
    with principal_cache.leading(key):
        first, second = asyncio.ensure_future(waiter()), asyncio.ensure_future(waiter())
        await asyncio.sleep(0)
        first.cancel()
        await sync_to_async(principal_cache.remember)(key, Principal(user))
    assert (await second).user.username == "zoe"  # type: ignore[union-attr]
    assert first.cancelled()

    # The user changed while it ran (the version moved on): no waiter is served the old user.
    principal_cache.clear()
    with principal_cache.leading(key):
        waiting = asyncio.ensure_future(waiter())
        await asyncio.sleep(0)
        await sync_to_async(principal_cache.remember)(key, Principal(user))
        user.first_name = "Zoe"
        await sync_to_async(user.save)()
    assert await waiting is None


@pytest.mark.anyio
async def test_an_authentication_older_than_the_cache_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """What it read may be older than a hit's may be: the request authenticates on its own."""
    import time

    key = b"o" * 32
    real = time.monotonic
    with principal_cache.leading(key):
        monkeypatch.setattr(time, "monotonic", lambda: real() + 1.0)
        assert await asyncio.wait_for(principal_cache.after_pending(key), 1) is None
