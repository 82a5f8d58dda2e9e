"""What an ask raises when the client cannot answer it, in every era."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..protocol.jsonrpc import MISSING_CAPABILITY, MCPError


class MissingCapability(MCPError):
    """The client did not declare a capability an ask needs (``elicitation``, ``sampling``, ...).

    Raised by the ask itself, before anything is sent, in both eras, so a handler can fall back::

        try:
            summary = (await ctx.sample("Summarise this order")).text
        except MissingCapability:
            summary = order.note[:200]

    Uncaught, the answer is ``-32021`` naming every capability the attempt's asks lacked;
    ``capabilities`` holds their dotted names (``"elicitation.url"``).
    """

    def __init__(self, capabilities: Iterable[str]) -> None:
        names = list(dict.fromkeys(capabilities))
        self.capabilities = names
        # ["elicitation.form", "sampling"] -> {"elicitation": {"form": {}}, "sampling": {}}
        required: dict[str, Any] = {}
        for name in names:
            head, _, sub = name.partition(".")
            entry = required.setdefault(head, {})
            if sub:
                entry[sub] = {}
        quoted = ", ".join(repr(name) for name in names)
        plural = "ies" if len(names) > 1 else "y"
        super().__init__(
            MISSING_CAPABILITY,
            f"this request needs the client capabilit{plural} {quoted}, which it did not declare",
            {"requiredCapabilities": required},
        )


def escaped(error: BaseException | None) -> MissingCapability | None:
    """The :class:`MissingCapability` an attempt ended with, also from inside a TaskGroup's group."""
    if isinstance(error, MissingCapability):
        return error
    if isinstance(error, BaseExceptionGroup):
        found: BaseException | None = error.subgroup(MissingCapability)
        while isinstance(found, BaseExceptionGroup):
            found = found.exceptions[0]
        return found if isinstance(found, MissingCapability) else None
    return None


class TaskCancelled(BaseException):
    """Raised by ``ctx.check_cancelled()`` (and by an ask) once the client cancelled the task.

    A ``BaseException``, so ``except Exception`` cannot swallow it; catch it only to clean up.
    """


class StartTask(BaseException):
    """Ends the request's attempt at ``ctx.start_task()``, carrying its answers and ``ctx.state``
    to the MCP task that runs the rest."""

    def __init__(self, answers: dict[str, Any], state: dict[str, str]) -> None:
        super().__init__("start_task")
        self.answers = answers
        self.state = state


class InputRequired(BaseException):
    """Ends an attempt whose asks have no answer yet; a ``BaseException`` so handlers cannot swallow it."""


class ClientError(MCPError):
    """The client answered a server-to-client request (2025-11-25 and earlier) with a JSON-RPC error."""
