"""Instructions per call, counted by valgrind's callgrind: a measure that load on the machine cannot move.

``make bench`` times the demo against the official SDK's server, and its ratios move by 10-20%
from run to run on a shared machine. This counts the CPU instructions one call costs, in
process (no HTTP server, no network), in every thread (worker pool, audit writer): the same
code gives the same count, so two commits can be compared on a busy machine. Each scenario
runs twice under callgrind, with a few calls and with ``--calls`` more; the difference
divided by ``--calls`` is the cost of one call, start-up and warm-up excluded.

    python bench/instructions.py [--calls 300] [--warm-up 150] [echo token async flow taskget syncask asyncdb]

``syncask`` is a sync handler that asks (the demo's ``clear_cache``: a confirm), its two
requests: the one that ends with ``input_required`` and the retry with the answer. ``asyncdb``
is an async tool that makes one query with the async ORM (registered by this script).

It needs valgrind (Debian: ``apt-get install valgrind``); under it Python runs about 50 times
slower, so a scenario takes a few minutes.

Besides the total it splits each count by thread: the event loop's (the main thread: the
request's own path, from the ASGI call to the answer, and the audit receiver queueing the
row) and the others' (the worker pool running a sync handler, the database threads, the
audit writer making and inserting the rows). The audit writer's count depends on how many
rows each of its batches takes, which under valgrind depends on timing: most of the spread
between two runs of one commit is there, and the event loop's column moves much less.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("echo", "token", "async", "flow", "taskget", "syncask", "asyncdb")
WARM_UP = 150
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}
FLOW = "test_input_required_result_multi_round"
TASKS = "io.modelcontextprotocol/tasks"
FLOW_ANSWERS = (
    {"step1": {"action": "accept", "content": {"name": "Ada"}}},
    {"step2": {"action": "accept", "content": {"color": "teal"}}},
)


def _body(name: str, arguments: dict[str, Any], extra: dict[str, Any] | None = None) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": META, **(extra or {})}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()


def _headers(name: str, token: str | None = None) -> list[tuple[bytes, bytes]]:
    from bench.profile_call import HEADERS

    headers = [(k, v) for k, v in HEADERS if k != b"mcp-name"] + [(b"mcp-name", name.encode())]
    return headers + ([(b"authorization", f"Token {token}".encode())] if token else [])


async def _requests(app: Any, scenario: str) -> list[tuple[list[tuple[bytes, bytes]], bytes]]:
    """The requests a scenario repeats (the flow's three, captured from one real run)."""
    from asgiref.sync import sync_to_async

    from bench.profile_call import one

    if scenario in ("echo", "token"):
        token = None
        if scenario == "token":
            from django.contrib.auth.models import User
            from rest_framework.authtoken.models import Token

            def make() -> str:
                user, _ = User.objects.get_or_create(username="instructions")
                return Token.objects.get_or_create(user=user)[0].key

            token = await sync_to_async(make)()
        return [(_headers("echo", token), _body("echo", {"text": "hello"}))]
    if scenario == "async":
        return [(_headers("reverse"), _body("reverse", {"text": "hello"}))]
    if scenario == "taskget":
        # Polling an MCP task (tasks/get of a queued task; no worker runs it).
        meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
        create = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "slow_compute", "arguments": {"seconds": 60}, "_meta": meta},
            }
        ).encode()
        task_id = json.loads(await one(app, _headers("slow_compute"), create))["result"]["taskId"]
        get = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta}}
        headers = [(k, v) for k, v in _headers(task_id) if k != b"mcp-method"] + [(b"mcp-method", b"tasks/get")]
        return [(headers, json.dumps(get).encode())]
    if scenario == "asyncdb":
        from django.contrib.auth.models import User

        from mcp_django import mcp

        @mcp.tool(name="bench_async_db")
        async def bench_async_db() -> int:
            """One query through the async ORM: the call's database thread."""
            return await User.objects.filter(username="nobody").acount()

        return [(_headers("bench_async_db"), _body("bench_async_db", {}))]
    if scenario == "syncask":
        ask = (_headers("clear_cache"), _body("clear_cache", {"region": "eu"}))
        result = json.loads(await one(app, *ask))["result"]
        assert result["resultType"] == "input_required", result
        [key] = result["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        extra = {"inputResponses": answer, "requestState": result["requestState"]}
        retry = (_headers("clear_cache"), _body("clear_cache", {"region": "eu"}, extra))
        assert b"Cleared the eu cache" in await one(app, *retry)
        return [ask, retry]
    requests = [(_headers(FLOW), _body(FLOW, {}))]
    for answer in FLOW_ANSWERS:
        result = json.loads(await one(app, *requests[-1]))["result"]
        assert result["resultType"] == "input_required", result
        extra = {"inputResponses": answer, "requestState": result["requestState"]}
        requests.append((_headers(FLOW), _body(FLOW, {}, extra)))
    assert b"teal" in await one(app, *requests[-1])
    return requests


async def _child(scenario: str, calls: int, warm_up: int) -> None:
    from bench.profile_call import one
    from mcp_django.routing import freeze_startup_objects
    from mcp_django.transports import http
    from project.asgi import application

    freeze_startup_objects()  # as the server's lifespan startup does (GC_FREEZE)

    # A call still running 20 ms in starts watching for the client's disconnect (a task).
    # At full speed no call here lasts that long; under valgrind a sync one may, more often
    # the more loaded the machine: that made the sync scenarios' counts depend on the load.
    http._WATCH_AFTER = 3600.0

    requests = await _requests(application, scenario)
    for i in range(warm_up + calls):
        answer = await one(application, *requests[i % len(requests)])
        assert b'"error"' not in answer, answer


def _count(scenario: str, calls: int, warm_up: int, env: dict[str, str], work: str) -> tuple[int, int]:
    """(every thread's instructions, the event loop's thread's), for one run."""
    out = Path(work) / f"{scenario}-{calls}"
    out.mkdir()
    command = ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--dump-instr=no"]
    command += [f"--callgrind-out-file={out / 'cg'}", sys.executable, __file__, "--child", scenario, str(calls)]
    command += [str(warm_up)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or not found:
        raise SystemExit(f"{scenario}: the run under valgrind failed:\n{done.stderr[-3000:]}")
    # One file per thread, cg-01 the main thread's: the event loop, where a request's own path runs.
    # The others are the worker pool's (sync handlers), the database threads' and the audit writer's.
    loop = 0
    for path in out.glob("cg-*"):
        summary = re.search(r"^summary: (\d+)", path.read_text(), re.M)
        if path.name.endswith("-01") and summary:
            loop = int(summary.group(1))
    return int(found.group(1)), loop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "scenarios", nargs="*", metavar="SCENARIO", help=f"any of {', '.join(SCENARIOS)} (default: all)"
    )
    parser.add_argument("--calls", type=int, default=300, help="calls counted per scenario (300)")
    parser.add_argument(
        "--warm-up", type=int, default=WARM_UP, help=f"calls made first in both runs, not counted ({WARM_UP})"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.conformance.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    os.environ.setdefault("MCP_REQUEST_STATE_KEY", "bench-request-state-key-0123456789abcdefghij")
    os.environ.setdefault("MCP_ALLOW_ANONYMOUS", "1")
    # The principal cache keeps a credential's user for a second (AUTH_CACHE_SECONDS): at full
    # speed one authentication per second among thousands of calls, under valgrind (about 50
    # times slower, more on a loaded machine) one every few calls, which made the token count
    # about 14% higher and dependent on the machine's load. Counted here: the cache's hit, as
    # nearly every call of a served client is.
    os.environ.setdefault("MCP_AUTH_CACHE_SECONDS", "3600")
    if args.child:
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        asyncio.run(_child(args.child[0], int(args.child[1]), int(args.child[2])))
        return 0
    if not shutil.which("valgrind"):
        raise SystemExit("bench/instructions.py needs valgrind (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="mcp-instructions-") as work:
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{Path(work) / 'db.sqlite3'}"}
        env.pop("REDIS_URL", None)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0", "--skip-checks"], cwd=ROOT, env=env, check=True)
        print(f"{'scenario':<10} {'instructions per call':>22} {'event loop thread':>18} {'other threads':>14}")
        for scenario in args.scenarios or SCENARIOS:
            few = _count(scenario, 0, args.warm_up, env, work)
            many = _count(scenario, args.calls, args.warm_up, env, work)
            total, loop = ((m - f) // args.calls for m, f in zip(many, few, strict=True))
            print(f"{scenario:<10} {total:>22,} {loop:>18,} {total - loop:>14,}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
