"""What one call crosses: the distinct functions and modules of ``mcp_django/`` it runs.

    python bench/trace_call.py [--list] [async ask]

Each scenario goes through the demo's ASGI application in process (as bench/profile_call.py
does), warmed up first, then one call is traced with ``sys.setprofile`` on every thread
(``threading.setprofile_all_threads``, Python 3.12+: every thread: the event loop's, the worker pool's, the audit
writer's). ``async`` is a plain async tool (the demo's ``reverse``); ``ask`` is round 1 of
a tool that asks (the first request of the 2026-07-28 flow bench/instructions.py replays,
answered ``input_required``). ``--list`` prints the functions too. Both counts are printed: every thread's, and the
event loop's thread's alone (the request's own path, without the worker pool and the
audit writer's batch). The count is of code
objects whose file is under ``mcp_django/`` (a generator or coroutine counts once), and of
those files: a number to keep small, since each crossing is a frame the hot path pays for.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import profile_call  # noqa: E402 - the demo's environment, as profile_call.py sets it

PACKAGE = str(ROOT / "mcp_django") + os.sep
WARM_UP = 50


class Crossings:
    """The code objects of the package seen by a profile function, on any thread."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, int, str]] = set()
        # The same, on the event loop's thread only (the request's own path).
        self.on_loop: set[tuple[str, int, str]] = set()
        self.loop_thread = threading.get_ident()

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code.co_filename.startswith(PACKAGE):
                key = (code.co_filename, code.co_firstlineno, code.co_qualname)
                self.seen.add(key)
                if threading.get_ident() == self.loop_thread:
                    self.on_loop.add(key)


def _modules(seen: set[tuple[str, int, str]]) -> int:
    return len({filename for filename, _line, _name in seen})


async def _requests(app: Any, scenario: str) -> list[tuple[list[tuple[bytes, bytes]], bytes]]:
    from bench.instructions import FLOW, _body, _headers

    if scenario == "async":
        return [(_headers("reverse"), _body("reverse", {"text": "hello"}))]
    return [(_headers(FLOW), _body(FLOW, {}))]


async def _trace(scenario: str) -> Crossings:
    from mcp_django import audit
    from project.asgi import application

    requests = await _requests(application, scenario)
    # The result itself (the asking tool's name holds "input_required" too).
    expected = b'"olleh"' if scenario == "async" else b'"resultType":"input_required"'
    for _ in range(WARM_UP):
        answer = await profile_call.one(application, *requests[0])
        assert expected in answer, answer
    await asyncio.sleep(0.05)
    audit.flush()  # the warm-up's rows: the writer's work for them is not this call's
    crossings = Crossings()
    # Every thread, the ones already running too (the worker pool's, the audit writer's).
    threading.setprofile_all_threads(crossings)
    try:
        answer = await profile_call.one(application, *requests[0])
        # The audit writer's batch for this call, written on its own thread meanwhile.
        await asyncio.sleep(0.3)
    finally:
        threading.setprofile_all_threads(None)
    assert expected in answer, answer
    return crossings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("scenarios", nargs="*", help="async, ask (default: both)")
    parser.add_argument("--list", action="store_true", help="print each function crossed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-trace-") as work:
        os.environ["DATABASE_URL"] = f"sqlite:///{Path(work) / 'db.sqlite3'}"
        os.environ.pop("REDIS_URL", None)
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0, skip_checks=True)
        for scenario in args.scenarios or ["async", "ask"]:
            crossings = asyncio.run(_trace(scenario))
            label = {"async": "plain async tool", "ask": "round 1 of an asking tool"}[scenario]
            print(
                f"{label}: {len(crossings.seen)} functions in {_modules(crossings.seen)} modules "
                f"(the event loop's thread: {len(crossings.on_loop)} in {_modules(crossings.on_loop)})"
            )
            if args.list:
                for filename, line, name in sorted(crossings.seen):
                    print(f"    {Path(filename).relative_to(ROOT)}:{line} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
