"""What the test client learns from the server side while it drives a call: the engines tell the
:data:`mcp_django.signals.observer` it sets of every attempt, replay-unsafe write and legacy ask's key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..asks.guard import Write


@dataclass
class Observer:
    # "error", "warn" or "off": what the client does with replay-unsafe writes.
    replay_guard: str = "error"
    runs: int = 0
    handlers: list[str] = field(default_factory=list)
    unsafe_writes: list[Write] = field(default_factory=list)
    # Legacy revisions: the ask key of each server-to-client request, by its JSON-RPC id (the
    # wire carries no key), so a test answers by key in both eras.
    ask_keys: dict[Any, str] = field(default_factory=dict)

    @property
    def guarding(self) -> bool:
        return self.replay_guard != "off"

    def ran(self, handler: Any) -> None:
        self.runs += 1
        self.handlers.append(f"{getattr(handler, 'primitive', '?')}:{getattr(handler, 'name', '?')}")

    def unsafe(self, writes: list[Write]) -> None:
        self.unsafe_writes.extend(writes)

    def asking(self, request_id: Any, key: str) -> None:
        self.ask_keys[request_id] = key
