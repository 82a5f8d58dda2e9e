"""Resource updates and task status changes, told to every worker's listeners on each event loop,
across processes through the workers' group (docs/legacy.md, "Resource updates")."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from .protocol.jsonrpc import Unavailable
from .worker_channel import GROUP, is_shared, layer_breaker, layer_call, served_loop, worker_channel

logger = logging.getLogger("mcp_django")

# The worker-channel messages: a resource updated (its "uri"), a task's status changed (its "task").
UPDATED = "mcp.updated"
TASK_CHANGED = "mcp.task"
_KEY = {UPDATED: "uri", TASK_CHANGED: "task"}

Listener = Callable[[str], None]


class Listeners:
    """One per event loop: called there with the URI of every update announced anywhere, or
    with the key of another ``kind`` of change (a task's id for :data:`TASK_CHANGED`)."""

    def __init__(self) -> None:
        self._watching: dict[str, set[Listener]] = {UPDATED: set(), TASK_CHANGED: set()}

    def watch(self, listener: Listener, kind: str = UPDATED) -> None:
        self._watching[kind].add(listener)

    def unwatch(self, listener: Listener, kind: str = UPDATED) -> None:
        self._watching[kind].discard(listener)

    def heard(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        for listener in list(self._watching[kind]):
            try:
                listener(str(message[_KEY[kind]]))
            except Exception:
                logger.exception("a %s listener failed", "task status" if kind == TASK_CHANGED else "resource update")


_listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Listeners] = weakref.WeakKeyDictionary()


async def listeners() -> Listeners:
    """This event loop's listeners, which hear the updates announced on any worker.

    The worker's channel has joined the workers' group when this returns, so no later update
    is missed. Raises :class:`~mcp_django.protocol.jsonrpc.Unavailable` when the layer cannot be reached.
    """
    worker = await worker_channel()
    loop = asyncio.get_running_loop()
    found = _listeners.get(loop)
    if found is None:
        found = _listeners[loop] = Listeners()
        worker.on(UPDATED, found.heard)
        worker.on(TASK_CHANGED, found.heard)
    return found


async def announce(uri: str) -> None:
    """Tell every worker's listeners that the resource at ``uri`` changed (or raise ``Unavailable``)."""
    await _send({"type": UPDATED, "uri": uri})


async def _send(message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if is_shared(layer):
        # Every worker, this one included, hears it from the group; bounded, so that a handler
        # announcing updates never waits on a hung Redis.
        await layer_call(lambda: layer.group_send(GROUP, message))
        return
    # One process: its loops' listeners are all there are.
    for loop, found in list(_listeners.items()):
        if not loop.is_closed():
            loop.call_soon_threadsafe(found.heard, message)


_announcing: set[asyncio.Future[Any]] = set()


async def _announce_logged(message: dict[str, Any]) -> None:
    what = message["uri"] if message["type"] == UPDATED else f"task {message['task']}"
    try:
        await _send(message)
    except Unavailable:
        if not layer_breaker.open:  # an outage is said once, by the breaker
            logger.warning("could not announce an update of %s (the channel layer did not answer)", what)
    except Exception:
        logger.warning("could not announce an update of %s", what, exc_info=True)


def announce_soon(uri: str) -> None:
    """:func:`announce` from any code, sync or async, on any thread; returns without waiting."""
    _soon({"type": UPDATED, "uri": uri})


def announce_task_soon(task_id: str) -> None:
    """Tell every worker's listeners that task ``task_id``'s status changed, as :func:`announce_soon`."""
    _soon({"type": TASK_CHANGED, "task": task_id})


def _soon(message: dict[str, Any]) -> None:
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        pending: Any = loop.create_task(_announce_logged(message))
    # A sync caller: on a served loop's worker thread, that loop (its layer is connected).
    elif (served := served_loop()) is not None:
        pending = asyncio.run_coroutine_threadsafe(_announce_logged(message), served)
    else:
        async_to_sync(_announce_logged)(message)
        return
    _announcing.add(pending)  # a task nobody references may be collected before it runs
    pending.add_done_callback(_announcing.discard)
