"""Rate limits and caps (mcp_django.limits, docs/limits.md), in process and on a live server.

Counts go to a LocMemCache of the test's own (``limits``), emptied for each test: the shared
Redis is never written here (tests/test_limits_redis.py has the cache away, and two instances).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.db import OperationalError
from django.test import override_settings
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.throttling import UserRateThrottle

from mcp_django import audit, conf, mcp
from mcp_django.models import AuditEvent, Kind
from mcp_django.registry import Registry
from mcp_django.tasks.models import MCPTask
from mcp_django.testing import JSONRPCError, MCPClient
from mcp_django.tokens.models import MCPToken
from tests.conftest import Raw, mcp_settings
from tests.legacy_fixtures import ws_client


@mcp.tool(name="limtest_a")
def limtest_a() -> str:
    return "a"


@mcp.tool(name="limtest_b")
def limtest_b() -> str:
    return "b"


@mcp.tool(name="limtest_throttled", throttle="2/hour")
def limtest_throttled() -> str:
    return "throttled"


@mcp.tool(name="limtest_ask")
async def limtest_ask(ctx: Any) -> str:
    answered = await ctx.confirm("Go on?")
    return f"answered {answered}"


class TwoPerMinute(UserRateThrottle):
    """A DRF throttle as a project has one, counting in the test's cache."""

    rate = "2/min"

    @property  # type: ignore[override]
    def cache(self) -> Any:
        return caches["limits"]


LIMITS_CACHE = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "mcp-limits-tests"}


@pytest.fixture(autouse=True)
def limits_cache() -> Iterator[None]:
    with override_settings(CACHES={**settings.CACHES, "limits": LIMITS_CACHE}):
        caches["limits"].clear()
        yield
        caches["limits"].clear()


def limits(**given: Any) -> Any:
    # Rates per hour: a window that turned mid-test (its edge is on the clock) would reset a count.
    return mcp_settings(LIMITS={"CACHE": "limits", **given})


@pytest.fixture
def raw(raw_inprocess: Raw) -> Raw:
    return raw_inprocess


def _tokens(*names: str) -> list[str]:
    users = get_user_model().objects
    return [Token.objects.create(user=users.create_user(name)).key for name in names]


def _as(token: str) -> dict[str, str]:
    return {"authorization": f"Token {token}"}


def assert_refused(response: httpx.Response, limit: str) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == -32005
    retry = error["data"]["retryAfter"]
    assert isinstance(retry, int) and 1 <= retry <= 3600
    assert response.headers["retry-after"] == str(retry)
    assert error["data"]["limit"] == limit
    return error


def limited_rows(**filters: Any) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(kind=Kind.LIMITED, **filters).order_by("id"))


def ok(response: httpx.Response) -> bool:
    return response.status_code == 200 and "result" in response.json()


pytestmark = pytest.mark.django_db


def test_user_rate_counts_every_credential_of_the_user(raw: Raw) -> None:
    first, other = _tokens("alice", "bob")
    alice = get_user_model().objects.get(username="alice")
    _row, second = MCPToken.objects.issue(alice, "laptop")
    with limits(RATES={"user": "3/hour"}):
        assert all(ok(raw.call("limtest_a", headers=_as(first))) for _ in range(2))
        assert ok(raw.call("limtest_b", headers={"authorization": f"Bearer {second}"}))
        assert_refused(raw.call("limtest_a", headers=_as(first)), "user")
        assert ok(raw.call("limtest_a", headers=_as(other)))  # another user: a count of its own
    (row,) = limited_rows()
    assert row.reason == "user 3/hour" and row.principal == f"auth.user:{alice.pk}" and row.target == "limtest_a"


def test_token_rate_counts_each_credential(raw: Raw) -> None:
    (first,) = _tokens("carol")
    carol = get_user_model().objects.get(username="carol")
    # A DRF user has one token; an MCP token is another credential of the same user.
    _row, second = MCPToken.objects.issue(carol, "laptop")
    with limits(RATES={"token": "2/hour"}):
        assert all(ok(raw.call("limtest_a", headers=_as(first))) for _ in range(2))
        assert_refused(raw.call("limtest_a", headers=_as(first)), "token")
        assert ok(raw.call("limtest_a", headers={"authorization": f"Bearer {second}"}))
    assert [r.reason for r in limited_rows()] == ["token 2/hour"]


def test_tool_rate_counts_each_tool_of_each_user(raw: Raw) -> None:
    alice, bob = _tokens("alice", "bob")
    with limits(RATES={"tool": "2/hour"}):
        assert all(ok(raw.call("limtest_a", headers=_as(alice))) for _ in range(2))
        assert_refused(raw.call("limtest_a", headers=_as(alice)), "tool")
        assert ok(raw.call("limtest_b", headers=_as(alice)))
        assert ok(raw.call("limtest_a", headers=_as(bob)))
    assert [r.reason for r in limited_rows()] == ["tool 2/hour"]


def test_endpoint_rate_counts_every_caller(raw: Raw) -> None:
    alice, bob = _tokens("alice", "bob")
    with limits(RATES={"endpoint": "3/hour"}):
        assert ok(raw.call("limtest_a", headers=_as(alice)))
        assert ok(raw.call("limtest_b", headers=_as(bob)))
        assert ok(raw.call("limtest_a"))  # anonymous
        assert_refused(raw.call("limtest_b", headers=_as(bob)), "endpoint")
    assert [r.reason for r in limited_rows()] == ["endpoint 3/hour"]


def test_a_handlers_own_throttle_needs_no_setting(raw: Raw) -> None:
    alice, bob = _tokens("alice", "bob")
    assert all(ok(raw.call("limtest_throttled", headers=_as(alice))) for _ in range(2))
    error = assert_refused(raw.call("limtest_throttled", headers=_as(alice)), "handler")
    assert error["data"]["value"] == "2/hour"
    assert ok(raw.call("limtest_throttled", headers=_as(bob)))
    assert ok(raw.call("limtest_a", headers=_as(alice)))  # the other tools are not limited
    assert [r.reason for r in limited_rows()] == ["handler 2/hour"]


def test_drf_throttle_classes_are_asked_with_the_caller(raw: Raw) -> None:
    alice, bob = _tokens("alice", "bob")
    with limits(CLASSES=["tests.test_rate_limits.TwoPerMinute"]):
        assert ok(raw.call("limtest_a", headers=_as(alice)))
        assert ok(raw.call("limtest_b", headers=_as(alice)))
        error = assert_refused(raw.call("limtest_a", headers=_as(alice)), "class")
        assert error["data"]["value"] == "TwoPerMinute"
        assert ok(raw.call("limtest_a", headers=_as(bob)))  # request.user is the caller: bob counts apart
        assert raw.post("tools/list", headers=_as(alice)).status_code == 200
    assert [r.reason for r in limited_rows()] == ["class TwoPerMinute"]


def test_a_bad_throttle_is_refused_when_the_handler_is_made() -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=r"tool 'bad': throttle= a rate is"):
        Registry().tool(name="bad", throttle="10/month")(limtest_a)


def test_methods_that_run_no_handler_are_never_counted(raw: Raw) -> None:
    (alice,) = _tokens("alice")
    with limits(RATES={"user": "1/hour"}):
        for _ in range(5):
            assert raw.post("tools/list", headers=_as(alice)).status_code == 200
        assert ok(raw.call("limtest_a", headers=_as(alice)))
        assert_refused(raw.call("limtest_a", headers=_as(alice)), "user")


def test_nothing_configured_is_no_stage_of_its_own(raw: Raw) -> None:
    from mcp_django.limits import stage

    registry = Registry()

    async def run(call: Any) -> dict[str, Any]:
        return {"ran": True}

    call = type("C", (), {"registry": registry})()
    with limits():
        handed_on = stage.limit(run, call)
        assert handed_on.cr_code is run.__code__  # the next stage's own coroutine: no frame of the stage's
        handed_on.close()


def test_tasks_count_when_created_not_per_poll() -> None:
    alice = get_user_model().objects.create_user("alice")
    client = MCPClient(user=alice, tasks=True)
    with limits(RATES={"user": "4/hour"}, MAX_OPEN_TASKS=2):
        first = client.start_tool("slow_compute", {"seconds": 30})["taskId"]
        for _ in range(6):  # polls: not counted
            assert client.get_task(first)["status"] == "working"
        client.start_tool("slow_compute", {"seconds": 30})
        with pytest.raises(JSONRPCError) as raised:
            client.start_tool("slow_compute", {"seconds": 30})
        assert (raised.value.code, raised.value.status, raised.value.data["limit"]) == (-32005, 429, "tasks")
        assert raised.value.data["retryAfter"] == 1
        assert MCPTask.objects.count() == 2
        # A synchronous call of the tool creates no task: not capped (the fourth call: polls were not counted).
        assert MCPClient(user=alice).call_tool("slow_compute", {"seconds": 0}).text.startswith("computed")
    assert [r.reason for r in limited_rows()] == ["tasks 2 open"]


def test_without_the_tasks_extension_no_call_is_capped_as_a_task() -> None:
    alice = get_user_model().objects.create_user("alice")
    now = timezone.now()
    MCPTask.objects.create(tool="slow_compute", principal=f"auth.user:{alice.pk}", created=now, updated=now)  # open
    others = [path for path in conf.mcp_settings.EXTENSIONS if path != "mcp_django.tasks.methods"]
    with mcp_settings(EXTENSIONS=others), limits(MAX_OPEN_TASKS=1):
        # The client opts in, but nothing makes a task of the call: it runs synchronously, uncapped.
        assert MCPClient(user=alice, tasks=True).call_tool("slow_compute", {"seconds": 0}).text.startswith("computed")
    assert limited_rows() == []


def test_invalid_limits_are_a_check_error() -> None:
    from django.core import checks

    for bad, says in (
        ({"RATES": {"user": "100/month"}}, "a rate is"),
        ({"RATES": {"users": "1/s"}}, "did you mean 'user'"),
        ({"RATES": {"user": "0/s"}}, "at least one"),
        ({"MAX_OPEN_ASKS": 0}, "MAX_OPEN_ASKS"),
        ({"WHEN_CACHE_DOWN": "maybe"}, "WHEN_CACHE_DOWN"),
        ({"CLASSES": ["tests.nowhere.Throttle"]}, "cannot be imported"),
    ):
        with mcp_settings(LIMITS=bad):
            found = [e for e in checks.run_checks() if e.id == "mcp_django.E050"]
            assert len(found) == 1 and says in found[0].msg, (bad, found)
    with mcp_settings(LIMITS={"CACHE": "nowhere", "RATES": {"user": "1/s"}}):
        assert [e.id for e in checks.run_checks() if e.id.startswith("mcp_django.E05")] == ["mcp_django.E051"]


def test_the_admin_filters_refusals_by_limit(raw: Raw, admin_client: Any) -> None:
    alice, bob = _tokens("alice", "bob")
    with limits(RATES={"tool": "1/hour"}, MAX_OPEN_TASKS=5):
        raw.call("limtest_a", headers=_as(alice))
        assert_refused(raw.call("limtest_a", headers=_as(alice)), "tool")
    assert ok(raw.call("limtest_throttled", headers=_as(bob)))
    raw.call("limtest_throttled", headers=_as(bob))
    assert_refused(raw.call("limtest_throttled", headers=_as(bob)), "handler")
    url = "/admin/mcp_django/auditevent/"
    page = admin_client.get(url)
    assert "refused by limit" in page.content.decode() and "?limit=handler" in page.content.decode()
    for value, expected in (
        ("tool", {"tool 1/hour"}),
        ("handler", {"handler 2/hour"}),
        ("any", {"tool 1/hour", "handler 2/hour"}),
    ):
        page = admin_client.get(url, {"limit": value})
        assert page.status_code == 200
        assert {row.reason for row in page.context["cl"].result_list} == expected
    assert list(admin_client.get(url, {"limit": "asks"}).context["cl"].result_list) == []


# -- on a live server: the legacy asks a client never answers (fault 6) --------------------


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_open_asks_are_capped_per_user(live_url: str) -> None:
    """A legacy client that never answers holds at most MAX_OPEN_ASKS asks open."""
    never = asyncio.Event()

    async def silent(request: dict[str, Any]) -> None:
        await never.wait()  # never answers: before the cap, each ask held its call for ASK_TIMEOUT

    with limits(MAX_OPEN_ASKS=2):
        async with ws_client(live_url, silent) as client:
            await client.initialize({"elicitation": {}})
            waiting = [(await client.send("tools/call", {"name": "limtest_ask"}))[1] for _ in range(2)]
            for _ in range(100):
                if len(client.server_requests) == 2:
                    break
                await asyncio.sleep(0.05)
            assert len(client.server_requests) == 2
            refused = await asyncio.wait_for(client.request("tools/call", {"name": "limtest_ask"}), 5)
            assert refused["error"]["code"] == -32005
            assert refused["error"]["data"] == {"retryAfter": 1, "limit": "asks", "value": "2 open"}
            assert len(client.server_requests) == 2  # the third ask never went out
            assert not any(future.done() for future in waiting)
            never.set()
    # The live server's audit writer commits its batches first, and the two held calls' rows
    # follow the socket's close: SQLite's shared in-memory database locks the table to readers
    # while a batch is written, so the read is tried again until no batch holds it.
    rows = None
    for _ in range(60):
        await asyncio.to_thread(audit.flush)
        try:
            rows = await asyncio.to_thread(limited_rows)
            break
        except OperationalError:
            await asyncio.sleep(0.05)
    assert rows is not None, "the audit table stayed locked"
    assert [r.reason for r in rows] == ["asks 2 open"]
