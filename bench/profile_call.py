"""Profile N in-process calls of the ASGI app (no network), to find the hot path's costs.

    python bench/profile_call.py [N] [--token] [--async | --flow] [--cpu] [--django]

The call is the demo's sync ``echo`` (run in the worker pool), or with ``--async`` its async
``reverse`` (run on the event loop), as in ``bench/instructions.py``'s echo and async scenarios.

``--flow`` replays the three requests of the 2026-07-28 two-ask flow (``bench/run.py``'s
"3-request flow": the first, then the two retries with their captured ``requestState``),
N requests in all, in turn. ``--cpu`` runs the same calls without the profiler and prints the
CPU time per call of the event loop's thread and of the others (from ``/proc``, Linux), and
the cyclic collector's passes and their time. ``--django`` sends the calls through Django's own
ASGI handler, where ``/mcp`` reaches ``mcp_view`` (what a project without the fast path serves),
instead of the ASGI application ``project/asgi.py`` routes ``/mcp`` to. Run from the checkout's root (or anywhere: the root is put on the path). The demo's
database is a fresh SQLite file in a temporary folder, migrated first. SORT and ROWS
(environment) pick pstats' order and how many rows it prints.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, Python puts bench/ on the path, not the root that holds the demo project.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.conformance.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")
os.environ.setdefault("MCP_REQUEST_STATE_KEY", "bench-request-state-key-0123456789abcdefghij")


def tool_call(name: str) -> bytes:
    """A 2026-07-28 tools/call of ``name`` with ``{"text": "hello"}``."""
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": {"text": "hello"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).encode()


BODY = tool_call("echo")
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


def thread_cpu() -> dict[str, float]:
    """Each thread's CPU time so far (user and system, seconds), by thread id, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for stat in Path("/proc/self/task").glob("*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        found[stat.parent.name] = (int(fields[11]) + int(fields[12])) / tick
    return found


class Collections:
    """The cyclic collector's passes while installed, and the CPU time they took."""

    def __init__(self) -> None:
        self.passes = 0
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.passes += 1
            self.seconds += time.thread_time() - self._started


async def main(
    n: int, token: str | None, tool: str = "echo", flow: bool = False, cpu: bool = False, django: bool = False
) -> None:
    from django.core.asgi import get_asgi_application

    from mcp_django.routing import freeze_startup_objects
    from project.asgi import application

    if django:
        application = get_asgi_application()  # /mcp: mcp_view, under Django's handler and middleware

    freeze_startup_objects()  # as the server's lifespan startup does (GC_FREEZE)
    if flow:
        # The same three requests bench/instructions.py counts, captured from one real run.
        from bench.instructions import _requests

        requests = await _requests(application, "flow")
    else:
        headers = [(k, v) for k, v in HEADERS if k != b"mcp-name"] + [(b"mcp-name", tool.encode())]
        headers += [(b"authorization", f"Token {token}".encode())] if token else []
        body = tool_call(tool)
        answer = await one(application, headers, body)
        assert (b"olleh" if tool == "reverse" else b"hello") in answer, answer
        requests = [(headers, body)]
    for i in range(201):
        await one(application, *requests[i % len(requests)])
    collections = Collections()
    before = thread_cpu() if cpu else {}
    gc.callbacks.append(collections)
    started = time.perf_counter()
    for i in range(n):
        answer = await one(application, *requests[i % len(requests)])
        # A refused or failed round would profile the error path instead of the flow.
        assert b'"error"' not in answer, answer
    wall = time.perf_counter() - started
    gc.callbacks.remove(collections)
    what = "request" if flow else "call"
    print(f"{wall / n * 1e6:.0f} µs per {what} (wall, in-process)")
    if cpu:
        after = thread_cpu()
        loop_id = str(threading.get_native_id())
        spent = {k: v - before.get(k, 0.0) for k, v in after.items()}
        loop = spent.pop(loop_id, 0.0)
        # /proc counts in clock ticks (10 ms): meaningful over a few thousand calls.
        print(
            f"CPU per {what}: event loop {loop / n * 1e6:.1f} µs, other threads {sum(spent.values()) / n * 1e6:.1f} µs; "
            f"the collector: {collections.passes} passes, {collections.seconds / n * 1e6:.1f} µs per {what}"
        )


def run() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("calls", nargs="?", type=int, default=2000, metavar="N", help="calls to profile (2000)")
    parser.add_argument("--token", action="store_true", help="authenticate each call with a DRF token")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--async", dest="async_tool", action="store_true", help="call the async tool (reverse) instead of echo"
    )
    mode.add_argument("--flow", action="store_true", help="replay the 3-request flow's requests, in turn")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="no profiler: CPU time per call by thread (/proc) and the collector's passes",
    )
    parser.add_argument("--django", action="store_true", help="through Django's ASGI handler and mcp_view")
    args = parser.parse_args()
    if args.flow and args.token:
        parser.error("--flow replays the flow's own requests, anonymous: it takes no --token")
    with tempfile.TemporaryDirectory(prefix="mcp-profile-") as work:
        os.environ["DATABASE_URL"] = f"sqlite:///{Path(work) / 'db.sqlite3'}"
        os.environ.pop("REDIS_URL", None)
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0, skip_checks=True)
        token = None
        if args.token:
            from django.contrib.auth.models import User
            from rest_framework.authtoken.models import Token

            user, _ = User.objects.get_or_create(username="profile")
            token = Token.objects.get_or_create(user=user)[0].key
        tool = "reverse" if args.async_tool else "echo"
        if args.cpu:
            asyncio.run(main(args.calls, token, tool, args.flow, cpu=True, django=args.django))
        else:
            profile = cProfile.Profile()
            profile.enable()
            asyncio.run(main(args.calls, token, tool, args.flow, django=args.django))
            profile.disable()
            pstats.Stats(profile).sort_stats(os.environ.get("SORT", "cumulative")).print_stats(
                int(os.environ.get("ROWS", "45"))
            )
        from mcp_django import audit

        audit.flush()  # the calls' audit rows, before their database goes
    return 0


if __name__ == "__main__":
    sys.exit(run())
