"""Instructions per thread hop, counted by callgrind: the package's worker pool and database threads
against asgiref's ``sync_to_async`` and ``ThreadSensitiveContext`` (bench/HISTORY.md).

    python bench/thread_hops.py [--hops 1000] [pool asgiref dbthreads asgiref-context]

- ``pool``: ``mcp_django.asks.invoke.run_in_thread`` (a sync handler's hop: the worker pool);
- ``asgiref``: ``sync_to_async(thread_sensitive=False)`` on a ``ThreadPoolExecutor``;
- ``dbthreads``: one call's database scope (``mcp_django.lifecycle``) around two
  thread-sensitive queries, as an async handler's ORM calls make them;
- ``asgiref-context``: the same two queries as Django's ASGI handler arranges them: ``async with
  ThreadSensitiveContext()`` (a thread of its own per call), ``close_old_connections`` in it at
  the start (``request_started``) and at the end (``request_finished``).

Each mode runs twice under valgrind, with no hop and with ``--hops`` hops (after 50 to warm up):
the difference divided by ``--hops`` is one hop's cost, start-up excluded. Like
``bench/instructions.py`` it needs valgrind, and load on the machine does not move its counts.
No HTTP, no audit, no handler: the hop alone, on a SQLite file in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODES = ("pool", "asgiref", "dbthreads", "asgiref-context")
WARM_UP = 50


def _job() -> int:
    return 1


def _query() -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone()


async def _child(mode: str, hops: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from asgiref.sync import ThreadSensitiveContext, sync_to_async
    from django.db import close_old_connections

    from mcp_django import lifecycle
    from mcp_django.asks import invoke

    executor = ThreadPoolExecutor(4)
    for _ in range(WARM_UP + hops):
        if mode == "pool":
            await invoke.run_in_thread(_job)
        elif mode == "asgiref":
            await sync_to_async(_job, thread_sensitive=False, executor=executor)()
        elif mode == "dbthreads":
            entered = lifecycle.enter()
            try:
                await sync_to_async(_query)()
                await sync_to_async(_query)()
            finally:
                cleanup = lifecycle.leave(entered)
                if cleanup is not None:
                    await lifecycle.finished(cleanup)
        else:
            async with ThreadSensitiveContext():
                await sync_to_async(close_old_connections)()
                await sync_to_async(_query)()
                await sync_to_async(_query)()
                await sync_to_async(close_old_connections)()


def _count(mode: str, hops: int, env: dict[str, str]) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    command += [sys.executable, __file__, "--child", mode, str(hops)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or not found:
        raise SystemExit(f"{mode}: the run under valgrind failed:\n{done.stderr[-3000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modes", nargs="*", metavar="MODE", help=f"any of {', '.join(MODES)} (default: all)")
    parser.add_argument("--hops", type=int, default=1000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = set(args.modes) - set(MODES)
    if unknown:
        parser.error(f"unknown mode(s): {', '.join(sorted(unknown))}")
    if args.child:
        sys.path.insert(0, str(ROOT))
        import django
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["HOPS_DATABASE"]}},
            USE_TZ=True,
        )
        django.setup()
        asyncio.run(_child(args.child[0], int(args.child[1])))
        return 0
    with tempfile.TemporaryDirectory(prefix="mcp-hops-") as work:
        env = {**os.environ, "HOPS_DATABASE": str(Path(work) / "db.sqlite3")}
        print(f"{'mode':<16} {'instructions per hop':>21}")
        for mode in args.modes or MODES:
            few, many = _count(mode, 0, env), _count(mode, args.hops, env)
            print(f"{mode:<16} {(many - few) // args.hops:>21,}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
