"""Signals for projects that want their own sink for what the engines do.

Every signal is sent with ``sender`` = the handler kind ("tool", "prompt",
"resource") and ``event`` = an :class:`Event`. They are sent with
``Signal.asend``: async receivers are awaited on the event loop, sync receivers
run in a worker thread. A ``state_refused`` receiver has finished before the
client is answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.dispatch import Signal

#: A 2026-07-28 attempt ended with ``input_required`` (one round issued).
round_started = Signal()
#: A ``requestState`` was refused (tampered, expired, replayed elsewhere, round cap...).
state_refused = Signal()
#: An ask needed a capability the client did not declare (``-32021``).
capability_missing = Signal()
#: A handler finished with a result (``outcome`` "completed") or failed ("failed", "cancelled").
call_finished = Signal()
#: A legacy server-to-client request got its outcome (answered, declined, cancelled, error, timeout, disconnect).
ask_finished = Signal()


@dataclass
class Event:
    kind: str
    era: str
    transport: str
    method: str
    target: str
    principal: Any  # mcp_django.auth.Principal
    request_id: Any = None
    client_address: str | None = None
    version: str = ""
    round: int | None = None
    # key -> ask method, for the asks of a round (or the one legacy ask)
    asks: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    outcome: str = ""
    duration_ms: float | None = None
