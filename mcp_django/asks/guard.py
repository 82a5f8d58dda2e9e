"""The replay guard: database writes made by an attempt that then ended with ``input_required``
(under 2026-07-28 they are made again next round: docs/replay.md).

While an attempt is recorded, every statement passes :func:`_watch` (an execute wrapper); the
writes are reported, with the handler's line, if the attempt ends with ``input_required``.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import os
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.db import connections
from django.db.backends.signals import connection_created

from .. import signals
from ..conf import mcp_settings
from ..signals import observer

logger = logging.getLogger("mcp_django.replay")

_UID = "mcp_django.replay_guard"
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "UPSERT")


def is_write(sql: str) -> bool:
    head = sql.lstrip()[:7].upper()
    if head.startswith(_WRITES):
        return True
    # A CTE may end in a write (WITH ... INSERT ...).
    return head.startswith("WITH") and any(f" {word} " in f" {sql.upper()} " for word in _WRITES[:3])


@dataclass
class Write:
    handler: str
    alias: str
    statement: str
    where: str
    # What to do about it, for this handler (sync and async handlers have different ways out).
    fix: str = ""

    def __str__(self) -> str:
        return f"{self.handler} wrote to {self.alias!r} at {self.where}: {self.statement}"


class Recorder:
    """The writes of one attempt, and the advice for them (``atomic=`` only fits a sync handler:
    it refuses an async one, whose queries run in other threads)."""

    # Resets ``current`` when the attempt ends (set by start()).
    token: contextvars.Token[Recorder | None]

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.label = f"{handler.primitive} {handler.name!r}"
        self.fix = "write after the last ask, or " + (
            "make the write idempotent (keyed on the arguments or on ctx.state); atomic=True needs a sync handler"
            if handler.is_async
            else "register the handler with atomic=True (each ended attempt is rolled back)"
        )
        self.code = getattr(inspect.unwrap(handler.func), "__code__", None)
        self.writes: list[Write] = []
        # An async handler's coroutine, to find its line from the thread running its query.
        self.coro: Any = None

    def add(self, alias: str, sql: str) -> None:
        statement = " ".join(sql.split())
        if len(statement) > 300:
            statement = statement[:297] + "..."
        self.writes.append(Write(self.label, alias, statement, self._where(), self.fix))

    def _where(self) -> str:
        inner = None
        for frame, _ in traceback.walk_stack(sys._getframe(3)):
            if frame.f_code is self.code:
                return _describe(frame) + (f" (in {inner})" if inner else "")
            if inner is None and not _library(frame.f_code.co_filename):
                inner = _describe(frame)
        coro = self.coro
        if coro is not None and coro.cr_frame is not None:
            # An async handler: its coroutine waits on the line that made the query.
            return _describe(coro.cr_frame)
        return inner or f"{self.handler.source} (line unknown)"


def _describe(frame: Any) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


_STANDARD_LIBRARY = os.path.dirname(os.path.abspath(os.__file__)) + os.sep


def _library(filename: str) -> bool:
    """Frames that are not the project's: Django, asgiref, mcp-django, the standard library."""
    path = filename.replace("\\", "/")
    if "/django/" in path or "/asgiref/" in path or "/mcp_django/" in path or "/rest_framework/" in path:
        return True
    return filename.startswith(_STANDARD_LIBRARY) and "site-packages" not in filename


# The attempt's recorder (an async handler's coroutine is set on it as it starts: where its writes come from).
current: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("mcp_django_replay_guard", default=None)


def _watch(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    recorder = current.get()
    if recorder is not None and is_write(sql):
        recorder.add(context["connection"].alias, sql)
    return execute(sql, params, many, context)


def install() -> None:
    """Put the watcher on every database alias of this thread (once each), and on every
    connection opened from now on."""
    connection_created.connect(on_connection_created, dispatch_uid=_UID)
    for connection in connections.all():
        on_connection_created(None, connection)


# MCP_DJANGO["REPLAY_GUARD"], else DEBUG: kept in one module global an attempt reads.
on = False


def configure() -> None:
    global on
    value = mcp_settings.REPLAY_GUARD
    on = bool(settings.DEBUG) if value is None else value
    if on:
        # Until anyone may guard, no connection carries the watcher and a query pays nothing.
        connection_created.connect(on_connection_created, dispatch_uid=_UID)


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("DEBUG", "MCP_DJANGO"):
        configure()


setting_changed.connect(_settings_changed)


def on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Every connection gets the watcher when it opens, in whatever thread; whether the guard
    is on is decided per attempt (a connection may outlive a settings change)."""
    if _watch not in connection.execute_wrappers and not getattr(threading.current_thread(), "mcp_unwatched", False):
        connection.execute_wrappers.append(_watch)


def start(handler: Any) -> Recorder | None:
    """The recorder of this attempt, when anyone listens (``current`` until ``current.reset(recorder.token)``);
    ``None`` costs the attempt nothing more."""
    if handler.atomic:
        return None  # its ended attempts are rolled back: nothing to repeat
    watching = observer.get()
    if not ((watching is not None and watching.guarding) or on):
        return None
    recorder = Recorder(handler)
    recorder.token = current.set(recorder)
    return recorder


async def report(recorders: list[Recorder], call: Any) -> None:
    """Attempts that ended with input_required: their writes will be made again next round."""
    writes = [write for recorder in recorders for write in recorder.writes]
    if not writes:
        return
    watching = observer.get()
    if watching is not None and watching.guarding:
        watching.unsafe(writes)
    if not on:
        return
    for write in writes:
        logger.warning(
            "replay-unsafe write: %s. The attempt ended with input_required, so this runs again on the next round; %s.",
            write,
            write.fix,
        )
    event = call.event("replay_unsafe", reason=f"{len(writes)} write(s)")
    await signals.replay_unsafe.asend(recorders[0].handler.primitive, event=event, writes=writes)
