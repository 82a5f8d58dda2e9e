"""Signals for projects that want their own sink for what the engines do.

Each is sent with ``sender`` = the handler's primitive and ``event`` = an :class:`Event`, by
``asend``: async receivers awaited on the loop in turn, sync ones in a worker thread.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django import dispatch

from .protocol.revisions import Era

__all__ = [
    "Era",
    "Event",
    "Observer",
    "ask_finished",
    "call_finished",
    "call_limited",
    "capability_missing",
    "observer",
    "replay_unsafe",
    "round_started",
    "state_refused",
]


class Signal(dispatch.Signal):
    """Django's ``Signal`` whose ``asend`` awaits async receivers one after another: Django's gathers
    them in tasks, which cost every call more than the audit receiver's work. Receivers are cached per
    sender in a plain dict: the senders are strings, which Django's weak-keyed cache cannot hold."""

    def __init__(self) -> None:
        super().__init__(use_caching=True)
        self.sender_receivers_cache = {}

    async def asend(self, sender: Any, **named: Any) -> list[tuple[Any, Any]]:
        # Django's own send() and asend() call _live_receivers (no public way to list them).
        sync_receivers, async_receivers = self._live_receivers(sender)
        responses: list[tuple[Any, Any]] = []
        if sync_receivers:

            def run() -> list[tuple[Any, Any]]:
                return [(r, r(signal=self, sender=sender, **named)) for r in sync_receivers]

            responses.extend(await sync_to_async(run)())
        for receiver in async_receivers:
            responses.append((receiver, await receiver(signal=self, sender=sender, **named)))
        return responses


class Observer(Protocol):
    """Told, in the context it is set in (:data:`observer`), what happens inside each call:
    for a harness such as a test client (the signals are the process's, this is one context's)."""

    #: Whether the replay guard records this context's attempts (whatever ``REPLAY_GUARD`` says).
    @property
    def guarding(self) -> bool: ...

    def ran(self, handler: Any) -> None:
        """A handler (or a completer) starts an attempt."""

    def unsafe(self, writes: list[Any]) -> None:
        """An attempt that ended with ``input_required`` wrote to the database (each a ``guard.Write``)."""

    def asking(self, request_id: Any, key: str) -> None:
        """A legacy server-to-client request goes out: the ask key it carries (the wire has none)."""


#: The :class:`Observer` of the calls served in this context; ``None`` (the default) costs a call
#: one lookup per attempt.
observer: contextvars.ContextVar[Observer | None] = contextvars.ContextVar("mcp_django_observer", default=None)

#: A 2026-07-28 attempt ended with ``input_required`` (one round issued).
round_started = Signal()
#: A ``requestState`` was refused (tampered, expired, replayed elsewhere, round cap...).
state_refused = Signal()
#: An ask needed a capability the client did not declare (``-32021``).
capability_missing = Signal()
#: A handler finished with a result (``outcome`` "completed") or failed ("failed", "cancelled").
call_finished = Signal()
#: An attempt that wrote to the database ended with ``input_required`` (the replay guard;
#: sent when ``MCP_DJANGO["REPLAY_GUARD"]`` is on). ``writes``: what it wrote, and where.
replay_unsafe = Signal()
#: A call was refused by a limit (mcp_django.limits: a rate, or a cap on open asks or tasks);
#: sent before the client is answered. ``event.reason`` names the limit ("user 100/min").
call_limited = Signal()
#: A legacy server-to-client request got its outcome (answered, declined, cancelled, error, timeout, disconnect).
ask_finished = Signal()


@dataclass(kw_only=True)
class Event:
    """What a signal says happened: the audit row's fields (docs/audit.md)."""

    kind: str  # mcp_django.models.Kind
    era: Era
    transport: str
    method: str
    target: str
    principal: Any  # mcp_django.auth.Principal
    request_id: Any = None
    client_address: str | None = None
    version: str = ""
    round: int | None = None
    asks: dict[str, str] = field(default_factory=dict)  # key -> ask method
    reason: str = ""
    outcome: str = ""
    duration_ms: float | None = None
    endpoint: str = "default"
    error: str = ""  # a failed call's message
