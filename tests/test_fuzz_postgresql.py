"""The fuzz test's hostile traffic on PostgreSQL, heavy on strings its text refuses (issue 29).

tests/test_fuzz.py runs in the SQLite leg, which stores a NUL without complaint; here the
same generator (tests/fuzz.py), with a NUL in a quarter of the strings the server may look
up (names, URIs, typed completions, task ids), goes to a server on PostgreSQL, where
such a string once reached a query as an unhandled ``DataError`` (-32603 and a traceback).
The tasks methods are in the mix. Every answer must be a JSON-RPC answer below 500 and
nothing may be logged as an error or with a traceback. ``MCP_FUZZ_PG_MESSAGES`` sets how
many HTTP messages go (half as many websocket frames go too).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import pytest
from django.db import connection

from tests.conftest import mcp_settings
from tests.fuzz import Fuzzer
from tests.legacy_fixtures import ws_client
from tests.test_fuzz import Problems, catalogue, legacy_session, send, still_serving, valid_id

pytestmark = pytest.mark.django_db(transaction=True)

COUNT = int(os.environ.get("MCP_FUZZ_PG_MESSAGES", "800"))
SEED = int(os.environ.get("MCP_FUZZ_SEED", "20261205"))
NUL_RATE = 0.25
# The methods that look a client's string up, half of the messages.
FOCUS = (
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "completion/complete",
    "resources/read",
    "prompts/get",
    "tools/call",
    "subscriptions/listen",
)


def _superuser_token() -> str:
    """A superuser's DRF token: every handler (the shop's, behind permissions) is in reach."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_superuser("fuzz", password="pw")
    return f"Token {Token.objects.create(user=user).key}"


@pytest.fixture
def problems() -> Any:
    import logging

    handler = Problems()
    handler.setFormatter(logging.Formatter("%(message)s"))
    loggers = [logging.getLogger(n) for n in ("", "uvicorn", "uvicorn.error", "mcp_django", "django", "asyncio")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


@pytest.fixture(autouse=True)
def _postgresql_only(db: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite stores a NUL: tests/test_fuzz.py sends these there")


def test_fuzz_postgresql_http(live_url: str, problems: Problems) -> None:
    fuzzer = Fuzzer(SEED, catalogue(), nul_rate=NUL_RATE, focus=FOCUS)
    statuses: dict[int, int] = {}
    credentials = {"authorization": _superuser_token()}
    with (
        mcp_settings(ASK_TIMEOUT=0.2),
        httpx.Client(timeout=httpx.Timeout(30, read=10), headers=credentials) as client,
    ):
        session = legacy_session(client, live_url)
        for i in range(COUNT):
            if i % 250 == 0:
                session = legacy_session(client, live_url)
            message = fuzzer.modern() if i % 2 else fuzzer.legacy(session)
            status = send(client, live_url, message)
            statuses[status] = statuses.get(status, 0) + 1
    assert not problems.records, problems.report()
    assert statuses.get(200, 0) > COUNT // 10 and statuses.get(400, 0) > COUNT // 20, statuses
    still_serving(live_url)
    assert not problems.records, problems.report()


def test_fuzz_postgresql_websocket(live_url: str, problems: Problems) -> None:
    fuzzer = Fuzzer(SEED + 1, catalogue(), nul_rate=NUL_RATE, focus=FOCUS)
    frames = max(100, COUNT // 2)
    credentials = {"authorization": _superuser_token()}

    async def unanswered(request: dict[str, Any]) -> None:
        return None

    async def run() -> None:
        sent = 0
        while sent < frames:
            async with ws_client(live_url, unanswered, additional_headers=credentials) as ws:
                await ws.initialize({"elicitation": {}, "sampling": {}, "roots": {}})
                for _ in range(min(200, frames - sent)):
                    text, _what = fuzzer.frame()
                    await ws.socket.send(text)
                    sent += 1
                await asyncio.sleep(0.5)
                reply = await asyncio.wait_for(ws.request("ping"), 30)
                assert "result" in reply or reply["error"]["code"] == -32600, reply
                for stray in ws.stray:
                    assert stray.get("id") is None or valid_id(stray["id"]), stray

    with mcp_settings(ASK_TIMEOUT=0.2):
        asyncio.run(run())
    assert not problems.records, problems.report()
    still_serving(live_url)
    assert not problems.records, problems.report()
