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

import os
from collections.abc import Iterator

import pytest
from django.db import connection

from tests.fuzz import Fuzzer
from tests.test_fuzz import Problems, catalogue, send_frames, send_messages, still_serving, watched

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
def problems() -> Iterator[Problems]:
    with watched() as handler:
        yield handler


@pytest.fixture(autouse=True)
def _postgresql_only(db: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite stores a NUL: tests/test_fuzz.py sends these there")


def test_fuzz_postgresql_http(live_url: str, problems: Problems) -> None:
    fuzzer = Fuzzer(SEED, catalogue(), nul_rate=NUL_RATE, focus=FOCUS)
    statuses = send_messages(live_url, fuzzer, COUNT, {"authorization": _superuser_token()})
    assert not problems.records, problems.report()
    assert statuses.get(200, 0) > COUNT // 10 and statuses.get(400, 0) > COUNT // 20, statuses
    still_serving(live_url)
    assert not problems.records, problems.report()


def test_fuzz_postgresql_websocket(live_url: str, problems: Problems) -> None:
    fuzzer = Fuzzer(SEED + 1, catalogue(), nul_rate=NUL_RATE, focus=FOCUS)
    credentials = {"authorization": _superuser_token()}
    send_frames(live_url, fuzzer, max(100, COUNT // 2), initialize=1.0, additional_headers=credentials)
    assert not problems.records, problems.report()
    still_serving(live_url)
    assert not problems.records, problems.report()
