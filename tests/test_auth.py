"""Principals: the cache of authenticated callers, and what invalidates it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from mcp_django.auth import principal_cache
from tests.conftest import Raw, mcp_settings

pytestmark = pytest.mark.django_db(transaction=True)


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
    from mcp_django.auth import Principal

    user = get_user_model().objects.create_user("hal", password="pw")
    user._perm_cache = {"stale.perm"}
    key = b"k" * 32
    principal_cache.put(key, Principal(user))
    first = principal_cache.get(key)
    assert first is not None and first.user is not user and first.user.pk == user.pk
    assert not hasattr(first.user, "_perm_cache")  # permissions are looked up anew
    first.user.first_name = "changed"
    second = principal_cache.get(key)
    assert second is not None and second.user.first_name == ""
