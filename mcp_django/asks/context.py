"""The handler's ``ctx``: the asks, the caller, notifications.

One API, two calling conventions: an async handler gets an :class:`AsyncContext`
whose asks are awaited; a sync handler (run in a worker thread) gets a
:class:`SyncContext` whose asks return the answer directly. What an ask does
depends on the engine behind it (the *backend*): under 2026-07-28 it looks the
answer up or ends the attempt (the replay rule); on legacy revisions it sends a
real request to the client and waits for the reply.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence
from typing import Any, Protocol

from ..protocol.jsonrpc import notification
from ..protocol.revisions import ClientCapabilities
from . import kinds
from .call import Call
from .kinds import Ask, ElicitResult, Root, SampleResult

_current: contextvars.ContextVar[Context | None] = contextvars.ContextVar("mcp_django_context", default=None)


class Backend(Protocol):
    """What answers asks: the replay engine (2026-07-28) or the live engine (legacy)."""

    async def resolve(self, asks: Sequence[Ask]) -> list[Any]: ...

    def resolve_blocking(self, asks: Sequence[Ask]) -> list[Any]: ...


class Context:
    """What a handler may use while it serves one request."""

    def __init__(self, call: Call, backend: Backend, state: dict[str, str] | None = None) -> None:
        self.call = call
        self._backend = backend
        # String values that survive between attempts (they ride in requestState).
        self.state: dict[str, str] = state if state is not None else {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the caller -------------------------------------------------------------------

    @property
    def user(self) -> Any:
        return self.call.principal.user

    @property
    def principal(self) -> str:
        return self.call.principal.label

    @property
    def request(self) -> Any:
        """The Django ``HttpRequest`` this call came in on (``request.user`` is the MCP principal)."""
        return self.call.request

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self.call.capabilities

    def supports(self, kind: str) -> bool:
        """``"elicitation"``, ``"elicitation.url"``, ``"sampling"``, ``"roots"``: may the handler ask this?"""
        return self.call.capabilities.supports(kind)

    @property
    def protocol_version(self) -> str:
        return self.call.version

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.call.client_info

    @property
    def request_id(self) -> Any:
        return self.call.request_id

    # -- asks ---------------------------------------------------------------------------

    def _resolve(self, asks: Sequence[Ask]) -> Any:
        raise NotImplementedError

    def _one(self, ask: Ask) -> Any:
        raise NotImplementedError

    def ask_all(self, *asks: Ask) -> Any:
        """Several asks in one round; their answers in the same order."""
        return self._resolve(list(asks))

    def confirm(self, message: str, *, key: str | None = None) -> Any:
        return self._one(kinds.confirm(message, key=key))

    def elicit(self, message: str, schema: Any, *, key: str | None = None) -> Any:
        return self._one(kinds.elicit(message, schema, key=key))

    def elicit_url(self, message: str, url: str, *, key: str | None = None, elicitation_id: str | None = None) -> Any:
        return self._one(kinds.elicit_url(message, url, key=key, elicitation_id=elicitation_id))

    def sample(self, prompt: str | list[dict[str, Any]], *, key: str | None = None, **options: Any) -> Any:
        return self._one(kinds.sample(prompt, key=key, **options))

    def list_roots(self, *, key: str | None = None) -> Any:
        return self._one(kinds.list_roots(key=key))

    # -- notifications ------------------------------------------------------------------

    def _emit(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> Any:
        token = self.call.progress_token
        if token is None or self.call.notify is None:
            return self._done()
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._emit(notification("notifications/progress", params))
        return self._done()

    def log(self, level: str, data: Any, *, logger: str | None = None) -> Any:
        if not self.call.wants_log(level):
            return self._done()
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        self._emit(notification("notifications/message", params))
        return self._done()

    def elicitation_complete(self, elicitation_id: str) -> Any:
        """Tell a legacy client that the URL elicitation ``elicitation_id`` has been completed.

        (``notifications/elicitation/complete``, 2025-11-25.) Under 2026-07-28 there is
        no stream to send it on, and the retry itself tells the client: nothing is sent.
        """
        if self.call.era == "legacy" and self.call.notify is not None:
            self._emit(notification("notifications/elicitation/complete", {"elicitationId": elicitation_id}))
        return self._done()

    def close_sse_stream(self) -> None:
        """Close the legacy SSE stream of this call now; the call goes on (SEP-1699 polling).

        The client reconnects with ``Last-Event-ID`` and receives the rest, result
        included. Elsewhere (2026-07-28, websockets, JSON answers) it does nothing.
        """
        close = getattr(self.call.session, "close_stream", None)
        if close is not None:
            if isinstance(self, SyncContext) and self._loop is not None:
                self._loop.call_soon_threadsafe(close)
            else:
                close()

    def debug(self, data: Any, **kw: Any) -> Any:
        return self.log("debug", data, **kw)

    def info(self, data: Any, **kw: Any) -> Any:
        return self.log("info", data, **kw)

    def warning(self, data: Any, **kw: Any) -> Any:
        return self.log("warning", data, **kw)

    def error(self, data: Any, **kw: Any) -> Any:
        return self.log("error", data, **kw)

    def _done(self) -> Any:
        return None


class AsyncContext(Context):
    """``ctx`` of an async handler: ``await ctx.confirm(...)``; ``asyncio.gather`` shares one round."""

    async def _resolve(self, asks: Sequence[Ask]) -> list[Any]:
        return await self._backend.resolve(asks)

    async def _one(self, ask: Ask) -> Any:
        return (await self._backend.resolve([ask]))[0]

    def _emit(self, message: dict[str, Any]) -> None:
        assert self.call.notify is not None
        self.call.notify(message)

    async def _done(self) -> None:
        # Let the transport flush the notification before the handler goes on.
        await asyncio.sleep(0)

    # Typed signatures for readers and type checkers; the work is in Context.
    async def confirm(self, message: str, *, key: str | None = None) -> bool:  # type: ignore[override]
        return await super().confirm(message, key=key)

    async def elicit(self, message: str, schema: Any, *, key: str | None = None) -> ElicitResult:  # type: ignore[override]
        return await super().elicit(message, schema, key=key)

    async def sample(
        self, prompt: str | list[dict[str, Any]], *, key: str | None = None, **options: Any
    ) -> SampleResult:  # type: ignore[override]
        return await super().sample(prompt, key=key, **options)

    async def list_roots(self, *, key: str | None = None) -> list[Root]:  # type: ignore[override]
        return await super().list_roots(key=key)


class SyncContext(Context):
    """``ctx`` of a sync handler: the asks return answers; ``ctx.ask_all(...)`` asks several at once."""

    def _resolve(self, asks: Sequence[Ask]) -> list[Any]:
        return self._backend.resolve_blocking(asks)

    def _one(self, ask: Ask) -> Any:
        return self._backend.resolve_blocking([ask])[0]

    def _emit(self, message: dict[str, Any]) -> None:
        assert self.call.notify is not None and self._loop is not None
        self._loop.call_soon_threadsafe(self.call.notify, message)


def get_context(request: Any = None) -> Context | None:
    """The context of the MCP call running now (a view called as a tool can ask through it)."""
    if request is not None:
        found = getattr(request, "mcp_context", None)
        if found is not None:
            return found
    return _current.get()


def bind(ctx: Context) -> contextvars.Token[Context | None]:
    return _current.set(ctx)
