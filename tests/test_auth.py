"""Principals: the cache of authenticated callers, and what invalidates it."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from mcp_django.auth_cache import principal_cache
from tests.conftest import Raw, mcp_settings

# In process (mcp_django.testing.HttpxTransport), on a plain test database.
pytestmark = pytest.mark.django_db


@pytest.fixture
def raw(raw_inprocess: Raw) -> Raw:
    return raw_inprocess


def whoami(raw: Raw, token: str) -> tuple[int, str | None]:
    r = raw.call("whoami", headers={"authorization": f"Token {token}"})
    if r.status_code != 200:
        return r.status_code, None
    return 200, r.json()["result"]["structuredContent"]["username"]


def test_a_deleted_token_is_refused_at_once(raw: Raw) -> None:
    user = get_user_model().objects.create_user("erin", password="pw")
    token = Token.objects.create(user=user)
    assert whoami(raw, token.key) == (200, "erin")
    assert principal_cache._entries  # remembered
    token.delete()
    assert whoami(raw, token.key)[0] == 401


def test_a_deactivated_user_is_refused_at_once(raw: Raw) -> None:
    user = get_user_model().objects.create_user("fay", password="pw")
    token = Token.objects.create(user=user)
    assert whoami(raw, token.key) == (200, "fay")
    user.is_active = False
    user.save()
    assert whoami(raw, token.key)[0] == 401


def test_the_cache_can_be_turned_off(raw: Raw) -> None:
    principal_cache.clear()
    user = get_user_model().objects.create_user("gus", password="pw")
    token = Token.objects.create(user=user)
    settings = {"REQUEST_STATE_KEY": "x" * 40, "ALLOW_ANONYMOUS": True, "AUTH_CACHE_SECONDS": 0}
    with mcp_settings(**settings):
        assert whoami(raw, token.key) == (200, "gus")
        assert not principal_cache._entries


def test_cached_principals_are_copies() -> None:
    from asgiref.sync import async_to_sync

    from mcp_django.auth import Principal

    user = get_user_model().objects.create_user("hal", password="pw")
    user._perm_cache = {"stale.perm"}
    key = b"k" * 32
    principal_cache.remember(key, Principal(user))
    first = async_to_sync(principal_cache.get)(key)
    assert first is not None and first.user is not user and first.user.pk == user.pk
    assert not hasattr(first.user, "_perm_cache")  # permissions are looked up anew
    first.user.first_name = "changed"
    second = async_to_sync(principal_cache.get)(key)
    assert second is not None and second.user.first_name == ""


NO_AUTHTOKEN = """
import json, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
from django.conf import settings
import tests.settings as base
base.INSTALLED_APPS = [a for a in base.INSTALLED_APPS if a != "rest_framework.authtoken"]
import django
django.setup()
from django.core.management import call_command
from io import StringIO
from django.core.management.base import SystemCheckError
try:
    call_command("check")
    check = "clean"
except SystemCheckError as exc:
    check = str(exc)
import anyio, httpx
from project.asgi import application
async def main():
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
        r = await client.post("/mcp", json=body, headers={"Authorization": "Token abc", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
        print(json.dumps({"check": check, "status": r.status_code, "body": r.text}))
anyio.run(main)
"""


def test_token_authentication_without_authtoken_is_a_check_and_a_401_not_a_500() -> None:
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    done = subprocess.run([sys.executable, "-c", NO_AUTHTOKEN], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "mcp_django.E012" in result["check"]
    assert result["status"] == 401, result
    body = json.loads(result["body"])
    assert "misconfigured" in body["error"]["message"]
