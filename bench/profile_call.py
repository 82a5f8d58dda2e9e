"""Profile N in-process calls of the ASGI app (no network), to find the hot path's costs.

python bench/profile_call.py [N] [--token]
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import os
import pstats
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.conformance.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")
os.environ.setdefault("MCP_REQUEST_STATE_KEY", "bench-request-state-key-0123456789abcdefghij")

BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"text": "hello"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
).encode()
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"echo"),
]


async def one(app: object, headers: list[tuple[bytes, bytes]], body: bytes = BODY) -> bytes:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
    }
    sent = []
    done = asyncio.Event()
    delivered = []

    async def receive() -> dict:
        if not delivered:
            delivered.append(True)
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)  # type: ignore[operator]
    done.set()
    # A real server turns the event loop for every request's I/O; so does this harness.
    await asyncio.sleep(0)
    return sent[-1]["body"]


async def main(n: int, token: str | None) -> None:
    from project.asgi import application

    headers = HEADERS + ([(b"authorization", f"Token {token}".encode())] if token else [])
    assert b"hello" in await one(application, headers)
    for _ in range(200):
        await one(application, headers)
    started = time.perf_counter()
    for _ in range(n):
        await one(application, headers)
    print(f"{(time.perf_counter() - started) / n * 1e6:.0f} µs per call (wall, in-process)")


if __name__ == "__main__":
    import django

    django.setup()
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 2000
    token = None
    if "--token" in sys.argv:
        from django.contrib.auth.models import User
        from rest_framework.authtoken.models import Token

        user, _ = User.objects.get_or_create(username="profile")
        token = Token.objects.get_or_create(user=user)[0].key
    profile = cProfile.Profile()
    profile.enable()
    asyncio.run(main(n, token))
    profile.disable()
    pstats.Stats(profile).sort_stats(os.environ.get("SORT", "cumulative")).print_stats(
        int(os.environ.get("ROWS", "45"))
    )
