"""A request with a ``Host`` outside ALLOWED_HOSTS is refused and logged in one line (issue 29).

Django logs each on ``django.security.DisallowedHost`` with the whole traceback; a scanner's
bad hosts filled the log with them. On the ASGI route, the WSGI view (with and without
Django's middleware in front) and websockets, one line each: the endpoint's own refusal, and
Django's record made one line by ``mcp_django.log_lines.OneLine`` (the demo's LOGGING).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator

import httpx
import pytest
import websockets
from asgiref.sync import async_to_sync
from django.test import Client, RequestFactory

from mcp_django.transports.views import mcp_view
from tests.conftest import MODERN, meta

BAD = "evil.example"
BODY = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": MODERN,
    "mcp-method": "server/discover",
}


class Lines(logging.Handler):
    """What the DisallowedHost logger's handlers see, formatted as a log file would hold it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("django.security.DisallowedHost")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def _one_line(lines: Lines) -> None:
    assert len(lines.lines) == 1, lines.lines
    line = lines.lines.pop()
    assert "\n" not in line and "Traceback" not in line, line
    assert line.startswith("ERROR django.security.DisallowedHost Invalid HTTP_HOST header: 'evil.example"), line


@pytest.mark.django_db(transaction=True)
def test_the_asgi_route_and_websockets(live_url: str, lines: Lines) -> None:
    refused = httpx.post(live_url, content=json.dumps(BODY), headers={**HEADERS, "Host": BAD})
    assert refused.status_code == 403 and refused.json()["error"]["message"] == "Host not allowed"
    _one_line(lines)

    address = httpx.URL(live_url)

    async def upgrade() -> int:
        try:
            # The URL names the bad host (the Host header); the socket goes to the live server.
            async with websockets.connect(
                f"ws://{BAD}:{address.port}/mcp", subprotocols=["mcp"], host=address.host, port=address.port
            ):
                return 101
        except websockets.InvalidStatus as exc:
            return exc.response.status_code

    assert asyncio.run(upgrade()) == 403
    _one_line(lines)
    # The rest of the site is Django's: its own record, made one line by the demo's LOGGING.
    origin = live_url.rsplit("/mcp", 1)[0]
    assert httpx.get(f"{origin}/admin/", headers={"Host": BAD}).status_code == 400
    _one_line(lines)


@pytest.mark.django_db
def test_the_wsgi_view(lines: Lines) -> None:
    # Through Django's handler and middleware (CommonMiddleware asks for the host first).
    answer = Client().post("/mcp", json.dumps(BODY), content_type="application/json", headers={**HEADERS, "host": BAD})
    assert answer.status_code == 400
    _one_line(lines)
    # The view alone (no middleware in front): the endpoint's 403.
    request = RequestFactory().post(
        "/mcp", json.dumps(BODY), content_type="application/json", headers={**HEADERS, "host": BAD}
    )
    answer = async_to_sync(mcp_view)(request)
    assert answer.status_code == 403 and json.loads(answer.content)["error"]["message"] == "Host not allowed"
    _one_line(lines)
