"""Running one handler: async on the event loop, sync in a worker thread."""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections

from ..registry import Handler
from .call import Call
from .context import AsyncContext, Backend, Context, SyncContext, bind

# Sync handlers get their own pool rather than asgiref's single shared thread: a
# legacy handler may block for minutes waiting for the client, and must not hold
# up anyone else's sync work meanwhile.
_executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="mcp-django")


def make_context(handler: Handler, call: Call, backend: Backend, state: dict[str, str] | None) -> Context:
    cls = AsyncContext if handler.is_async else SyncContext
    return cls(call, backend, state)


async def run_in_thread(func: Any, *args: Any) -> Any:
    """Run sync code (handlers, ORM, auth) in the pool, with context vars, closing stale DB connections."""

    def job() -> Any:
        try:
            return func(*args)
        finally:
            close_old_connections()

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, contextvars.copy_context().run, job)


async def invoke(handler: Handler, kwargs: dict[str, Any], ctx: Context) -> Any:
    token = bind(ctx)
    try:
        if handler.is_async:
            return await handler.func(**kwargs)
        ctx._loop = asyncio.get_running_loop()
        return await run_in_thread(lambda: handler.func(**kwargs))
    finally:
        from .context import _current

        _current.reset(token)
