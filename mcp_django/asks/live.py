"""The legacy round engine: the handler runs once, and each ask is a real request to the client on
the call's connection (an SSE stream, a websocket), its reply parsed as under 2026-07-28. What a
handler sees for each outcome (timeout, client error, cancellation) is in docs/legacy.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import signals
from ..conf import mcp_settings
from ..handlers import Handler
from ..lifecycle import host_thread
from ..protocol.jsonrpc import INTERNAL_ERROR, MCPError, notification
from ..protocol.legacy import SessionRecord, fit_elicitation
from ..signals import observer
from .call import Call
from .context import AsyncContext, SyncContext
from .invoke import Scoped, invoke, pool
from .questions import Ask, ClientError, ContentInvalid, MissingCapability, escaped
from .replay import Outcome, missing_capabilities

REQUEST_TIMEOUT = -32001
# How many times a form whose content did not fit is sent again before the call fails.
MAX_REASKS = 3


class AskTimeoutError(MCPError):
    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(REQUEST_TIMEOUT, f"the client did not answer {method} within {timeout:g} seconds")


class AskAborted(BaseException):  # a control-flow signal, like asyncio.CancelledError
    """The call ended (cancelled, disconnected) while a sync handler waited for an answer."""


class LiveSession:
    """``call.session`` on legacy revisions: sends server-to-client requests and awaits replies."""

    def __init__(self, record: SessionRecord, replies: Any) -> None:
        # The transport's side: open() gives an id and the future its reply resolves; close(id).
        self.record = record
        self.replies = replies
        # Set by a transport whose response stream the server may close early (legacy SSE).
        self.close_stream: Callable[[], None] | None = None

    async def request(self, call: Call, method: str, params: dict[str, Any], key: str) -> Any:
        """The client's ``result``; raises :class:`ClientError` or :class:`AskTimeoutError`.
        ``key`` is told to the context's ``signals.observer`` (the wire has no place for it)."""
        if call.notify is None:
            raise MCPError(
                INTERNAL_ERROR,
                f"cannot send {method}: this connection carries no server-to-client requests "
                "(a Streamable HTTP client must accept text/event-stream)",
            )
        timeout = mcp_settings.ASK_TIMEOUT
        if method == "elicitation/create":
            # Rewritten for older revisions, or refused before anything is sent.
            params = fit_elicitation(params, self.record.version)
        notify = call.notify
        async with call.ask_guard() if call.ask_guard is not None else contextlib.nullcontext():
            request_id, reply = self.replies.open()
            watching = observer.get()
            if watching is not None:
                watching.asking(request_id, key)
            try:
                notify({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
                message = await asyncio.wait_for(reply, timeout)
            except TimeoutError:
                notify(notification("notifications/cancelled", {"requestId": request_id, "reason": "timed out"}))
                raise AskTimeoutError(method, timeout) from None
            except asyncio.CancelledError:
                # The call ended while the client has our request open (a dialog): withdraw it.
                notify(
                    notification("notifications/cancelled", {"requestId": request_id, "reason": "request cancelled"})
                )
                raise
            finally:
                self.replies.close(request_id)
        error = message.get("error")
        if error is not None:
            if not isinstance(error, dict) or not isinstance(error.get("code"), int):
                raise ClientError(INTERNAL_ERROR, f"the client answered {method} with a malformed error")
            raise ClientError(error["code"], str(error.get("message", "")), error.get("data"))
        return message.get("result")


class LiveBackend:
    """Answers each ask by asking the client (see the module's docstring)."""

    def __init__(self, call: Call, primitive: str) -> None:
        self.call = call
        self.primitive = primitive
        self.loop = asyncio.get_running_loop()
        # A sync handler's asks running on the loop, and how often abort() cancelled them.
        self._blocking: set[asyncio.Task[Any]] = set()
        self.aborts = 0
        self._default_keys: dict[str, int] = {}
        # Capabilities the call's asks needed and the session did not declare.
        self.missing: list[str] = []

    def _check(self, asks: Sequence[Ask]) -> None:
        # Refused before anything is sent: a half-asked batch helps nobody.
        lacking = [ask.capability for ask in asks if not self.call.capabilities.supports(ask.capability)]
        if lacking:
            self.missing.extend(lacking)
            raise MissingCapability(lacking)

    async def resolve(self, asks: Sequence[Ask]) -> list[Any]:
        self._check(asks)
        return list(await asyncio.gather(*(self._ask(ask) for ask in asks)))

    async def resolve_one(self, ask: Ask) -> Any:
        return (await self.resolve((ask,)))[0]

    def resolve_blocking(self, asks: Sequence[Ask]) -> list[Any]:
        self._check(asks)
        # The wait may last ASK_TIMEOUT: the thread leaves the worker pool meanwhile,
        # and the principal's bound on waiting threads applies (-32005 beyond it).
        with pool.parked(self.call.principal.label):
            future = asyncio.run_coroutine_threadsafe(self._asking(asks, self.aborts), self.loop)
            executor = host_thread.get()
            try:
                if executor is not None:
                    executor.run_until(future)  # the host's thread runs the loop's work meanwhile, rather than deadlock
                return future.result()
            except concurrent.futures.CancelledError:
                raise AskAborted from None

    async def _asking(self, asks: Sequence[Ask], aborts: int) -> list[Any]:
        """A sync handler's asks, on the loop; cancelled by :meth:`abort`, they finish (their audit
        rows) before the handler's thread hears it, so none outlives the call."""
        if self.aborts != aborts:
            raise asyncio.CancelledError  # the call ended before these asks began
        task = asyncio.current_task()
        assert task is not None
        self._blocking.add(task)
        try:
            return await self.resolve(asks)
        finally:
            self._blocking.discard(task)

    def abort(self) -> None:
        """Unblock sync handlers still waiting: the call is over."""
        self.aborts += 1
        for task in list(self._blocking):
            task.cancel()

    async def _ask(self, ask: Ask) -> Any:
        key = ask.key_among(self._default_keys)
        outcome = "error"
        asked_at = time.perf_counter()
        # The wait for the client is a child span of the call (the ask itself is not recorded).
        trace = self.call.trace
        span = trace.ask_started(ask.method, key) if trace is not None else None
        sent = ask
        try:
            for tries in itertools.count(1):
                params = sent.params if span is None else trace.ask_params(span, sent.params)
                raw = await self.call.session.request(self.call, ask.method, params, key)
                try:
                    value = ask.parse(key, raw)
                    break
                except ContentInvalid as exc:
                    # A form filled in wrongly is sent again, saying what was wrong (-32602 after a few).
                    if tries > MAX_REASKS:
                        raise
                    sent = ask.again(exc.problem)
            action = raw.get("action") if isinstance(raw, dict) else None
            outcome = {"decline": "declined", "cancel": "cancelled"}.get(str(action), "answered")
            return value
        except AskTimeoutError:
            outcome = "timeout"
            raise
        except asyncio.CancelledError:
            outcome = "disconnect"
            raise
        finally:
            if span is not None:
                trace.ask_ended(span, outcome)
            if signals.ask_finished.has_listeners(self.primitive):
                # The row's duration is the ask's; shielded: an ask cut short by cancellation is still reported.
                event = self.call.event("ask", since=asked_at, asks={key: ask.method}, outcome=outcome)
                await asyncio.shield(signals.ask_finished.asend(self.primitive, event=event))


async def run(handler: Handler, arguments: dict[str, Any], call: Call) -> Outcome:
    """Serve one tools/call, prompts/get or resources/read on a legacy session: the handler runs once."""
    backend = LiveBackend(call, handler.primitive)
    # ctx.state lives for the call: there is nothing to carry between attempts.
    ctx = (AsyncContext if handler.is_async else SyncContext)(call, backend)
    try:
        running = invoke(handler, handler.kwargs(arguments, ctx), ctx)
        # An async handler's tasks made of an ask run the ask's own coroutine (see invoke.Scoped).
        value = await (Scoped(running, backend.loop) if handler.is_async else running)
    except Exception as exc:
        if backend.missing and escaped(exc) is not None:
            raise await missing_capabilities(call, handler.primitive, backend.missing) from None
        raise
    finally:
        backend.abort()
    return Outcome(value=value)
