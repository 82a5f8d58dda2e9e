"""Resource updates: a changed resource told to every worker's listeners.

:meth:`Registry.resource_updated <mcp_django.registry.Registry.resource_updated>`
announces a URI; the listeners are whatever holds a client that may have
subscribed to it (a legacy session's GET stream, a websocket, a 2026-07-28
``subscriptions/listen`` stream), each checking what its client subscribed to
before it sends ``notifications/resources/updated``.

An update reaches the listeners of every event loop: in one process directly,
across processes through the Channels layer, sent to the group every worker's
channel joins (:mod:`mcp_django.worker_channel`), whose reader hands it to the
listeners of its loop.

The same bus carries task status changes (the tasks extension's optional
``notifications/tasks``): :func:`announce_task_soon` names a task whose status
changed, and each ``subscriptions/listen`` stream whose ``taskIds`` name it reads
the task again and sends it.
"""

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

# The worker-channel message carrying one update.
UPDATED = "mcp.updated"
# The worker-channel message naming a task whose status changed.
TASK_CHANGED = "mcp.task"

Listener = Callable[[str], None]


class Listeners:
    """One per event loop: called there with the URI of every update announced anywhere."""

    def __init__(self) -> None:
        self._listeners: set[Listener] = set()
        self._task_listeners: set[Listener] = set()

    def watch(self, listener: Listener) -> None:
        self._listeners.add(listener)

    def unwatch(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    def updated(self, uri: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(uri)
            except Exception:
                logger.exception("a resource update listener failed")

    def heard(self, message: dict[str, Any]) -> None:
        self.updated(str(message["uri"]))

    def watch_tasks(self, listener: Listener) -> None:
        self._task_listeners.add(listener)

    def unwatch_tasks(self, listener: Listener) -> None:
        self._task_listeners.discard(listener)

    def task_changed(self, task_id: str) -> None:
        for listener in list(self._task_listeners):
            try:
                listener(task_id)
            except Exception:
                logger.exception("a task status listener failed")

    def heard_task(self, message: dict[str, Any]) -> None:
        self.task_changed(str(message["task"]))


_listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Listeners] = weakref.WeakKeyDictionary()


async def listeners() -> Listeners:
    """This event loop's listeners, which hear the updates announced on any worker.

    The worker's channel is started (and has joined the workers' group) when this
    returns: an update announced after a listener is added here is never missed.
    Raises :class:`~mcp_django.protocol.jsonrpc.Unavailable` when the channel layer
    cannot be reached.
    """
    worker = await worker_channel()
    loop = asyncio.get_running_loop()
    found = _listeners.get(loop)
    if found is None:
        found = _listeners[loop] = Listeners()
        worker.on(UPDATED, found.heard)
        worker.on(TASK_CHANGED, found.heard_task)
    return found


async def announce(uri: str) -> None:
    """Tell every worker's listeners that the resource at ``uri`` changed.

    Raises :class:`~mcp_django.protocol.jsonrpc.Unavailable` when the channel layer
    is away (at once while it is known to be).
    """
    await _send({"type": UPDATED, "uri": uri})


async def announce_task(task_id: str) -> None:
    """Tell every worker's listeners that the status of task ``task_id`` changed."""
    await _send({"type": TASK_CHANGED, "task": task_id})


def _deliver(found: Listeners, message: dict[str, Any]) -> None:
    if message["type"] == TASK_CHANGED:
        found.heard_task(message)
    else:
        found.heard(message)


async def _send(message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if is_shared(layer):
        # Every worker, this one included, hears it from the group (its channel's reader).
        # Bounded, and refused at once while the layer is known to be away: a handler
        # announcing updates never waits on a hung Redis (Unavailable).
        await layer_call(lambda: layer.group_send(GROUP, message))
        return
    # One process: its loops' listeners are all there are.
    for loop, found in list(_listeners.items()):
        if not loop.is_closed():
            loop.call_soon_threadsafe(_deliver, found, message)


_announcing: set[asyncio.Future[Any]] = set()


async def _announce_logged(uri: str, task: bool = False) -> None:
    what = f"task {uri}" if task else uri
    try:
        await (announce_task(uri) if task else announce(uri))
    except Unavailable:
        if not layer_breaker.open:  # an outage is said once, by the breaker
            logger.warning("could not announce an update of %s (the channel layer did not answer)", what)
    except Exception:
        logger.warning("could not announce an update of %s", what, exc_info=True)


def announce_soon(uri: str) -> None:
    """:func:`announce` from any code, sync or async, on any thread; returns without waiting."""
    _soon(uri, False)


def announce_task_soon(task_id: str) -> None:
    """:func:`announce_task` from any code, sync or async, on any thread; returns without waiting."""
    _soon(task_id, True)


def _soon(key: str, task: bool) -> None:
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        created = loop.create_task(_announce_logged(key, task))
        _announcing.add(created)  # a task nobody references may be collected before it runs
        created.add_done_callback(_announcing.discard)
        return
    # A sync caller: a worker thread of a served loop (a sync handler), or none at all
    # (a management command, a task worker, a WSGI view). Prefer the served loop: its
    # layer is connected.
    served = served_loop()
    if served is not None:
        future = asyncio.run_coroutine_threadsafe(_announce_logged(key, task), served)
        _announcing.add(future)  # type: ignore[arg-type]
        future.add_done_callback(_announcing.discard)
        return
    async_to_sync(_announce_logged)(key, task)
