"""The handler's ``ctx``: the asks, the caller, notifications.

An async handler gets an :class:`AsyncContext` whose asks are awaited (:class:`Asking`); a sync
handler gets a :class:`SyncContext` whose asks return the answer. The *backend* answers them: the
replay engine (2026-07-28) or the live one (legacy).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

from ..protocol.jsonrpc import notification
from ..protocol.revisions import ClientCapabilities
from . import questions
from .call import Call
from .questions import Ask, ElicitResult, Root, SampleResult, StartTask, TaskCancelled

if TYPE_CHECKING:
    from django.http import HttpRequest
    from rest_framework.request import Request

T = TypeVar("T")


# The ctx of the handler running in this context (``mcp_django.get_context()`` reads it).
current_context: contextvars.ContextVar[Any] = contextvars.ContextVar("mcp_django_context", default=None)


def _refusing(use: str) -> Callable[..., NoReturn]:
    def refuse(self: Asking[Any], *args: Any) -> NoReturn:
        self._refuse(use)

    return refuse


class Asking(Coroutine[Any, Any, T]):
    """What an async handler's ask returns: await it for the answer.

    A coroutine that refuses to stand in for its answer: ``if not ctx.confirm(...)`` without
    ``await`` raises ``TypeError`` (a bare coroutine is always true: the question would be skipped).
    """

    __slots__ = ("_coro", "_what")

    def __init__(self, coro: Coroutine[Any, Any, T], what: str) -> None:
        self._coro = coro
        self._what = what

    def __await__(self) -> Generator[Any, None, T]:
        return self._coro.__await__()

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __repr__(self) -> str:
        return f"<Asking ctx.{self._what}(...): not awaited yet>"

    __hash__ = object.__hash__

    def _refuse(self, use: str) -> NoReturn:
        self._coro.close()  # never awaited now: no "never awaited" warning on top of this error
        raise TypeError(
            f"ctx.{self._what}(...) was {use} without being awaited: write `await ctx.{self._what}(...)` "
            "(in an async handler every ask returns an awaitable, which is not its answer)"
        )

    # Hidden from type checkers, so that mypy's truthy-bool sees the mistake statically too.
    if not TYPE_CHECKING:
        __bool__ = _refusing("used as a boolean")
        __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refusing("compared")
        __iter__ = _refusing("iterated")
        __len__ = _refusing("measured")
        __contains__ = _refusing("searched")
        __getitem__ = _refusing("indexed")

        def __getattr__(self, name):
            if name.startswith(("cr_", "gi_")):  # a coroutine's introspection (task reprs, debuggers)
                return getattr(self._coro, name)
            if name.startswith("_"):
                raise AttributeError(name)
            self._refuse(f"asked for .{name}")


class State(dict[str, str]):
    """``ctx.state``: strings that survive between attempts (they ride in ``requestState``).

    Anything else is refused at once, rather than coming back as its ``str()`` (``False`` as ``"False"``).
    """

    __slots__ = ()

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ctx.state keys must be strings, not {type(key).__name__}")
        if not isinstance(value, str):
            raise TypeError(
                f"ctx.state[{key!r}] must be a string, not {type(value).__name__}: "
                "state travels between attempts as strings (encode other values, e.g. with json.dumps)"
            )
        super().__setitem__(key, value)

    def setdefault(self, key: str, default: str = "") -> str:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: str) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> State:  # type: ignore[override,misc]
        self.update(other)
        return self


class Context:
    """What a handler may use while it serves one request (typed as the async flavour)."""

    def __init__(self, call: Call, backend: Any, state: Mapping[str, str] | None = None) -> None:
        self.call = call
        self.backend = backend
        self._state = State(state) if state else State()
        # The call's event loop, set when a sync handler starts: its thread hands notifications to it.
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def state(self) -> State:
        """String values that survive between attempts (they ride in ``requestState``)."""
        return self._state

    @state.setter
    def state(self, value: Mapping[str, str]) -> None:
        self._state = State()
        self._state.update(value)

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

    def supports(self, capability: str) -> bool:
        """``"elicitation"``, ``"elicitation.url"``, ``"sampling"``, ``"roots"``: may the handler ask this?"""
        return self.call.capabilities.supports(capability)

    @property
    def protocol_version(self) -> str:
        return self.call.version

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.call.client_info

    @property
    def request_id(self) -> str | int:
        """The JSON-RPC id of the request (an MCP task's own id inside a task)."""
        return self.call.request_id

    # -- asks ---------------------------------------------------------------------------

    # The async flavour's; SyncContext's answer at once. Typed Any: each flavour's asks are typed below.
    def _one(self, ask: Ask, what: str) -> Any:
        # resolve_one: the answer itself, one coroutine fewer per ask than resolve((ask,)).
        return Asking(self.backend.resolve_one(ask), what)

    def ask_all(self, *asks: Ask) -> Asking[list[Any]]:
        """Several asks in one round; their answers in the same order."""
        return Asking(self.backend.resolve(asks), "ask_all")

    def confirm(self, message: str, *, key: str | None = None) -> Asking[bool]:
        """Yes or no: true only when the user accepts and ticks confirm."""
        return self._one(questions.confirm(message, key=key), "confirm")

    def elicit(self, message: str, schema: Any, *, key: str | None = None) -> Asking[ElicitResult]:
        return self._one(questions.elicit(message, schema, key=key), "elicit")

    def elicit_url(
        self, message: str, url: str, *, key: str | None = None, elicitation_id: str | None = None
    ) -> Asking[ElicitResult]:
        return self._one(questions.elicit_url(message, url, key=key, elicitation_id=elicitation_id), "elicit_url")

    def sample(
        self, prompt: str | list[dict[str, Any]], *, key: str | None = None, **options: Any
    ) -> Asking[SampleResult]:
        return self._one(questions.sample(prompt, key=key, **options), "sample")

    def list_roots(self, *, key: str | None = None) -> Asking[list[Root]]:
        return self._one(questions.list_roots(key=key), "list_roots")

    # -- notifications ------------------------------------------------------------------

    def _emit(self, message: dict[str, Any]) -> None:
        assert self.call.notify is not None
        self.call.notify(message)

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> Awaitable[None]:
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

    def log(self, level: str, data: Any, *, logger: str | None = None) -> Awaitable[None]:
        if not self.call.wants_log(level):
            return self._done()
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        self._emit(notification("notifications/message", params))
        return self._done()

    def elicitation_complete(self, elicitation_id: str) -> Awaitable[None]:
        """Tell a legacy client that the URL elicitation ``elicitation_id`` has been completed
        (2026-07-28: nothing is sent; the retry tells the client)."""
        if self.call.session is not None and self.call.notify is not None:  # a legacy session's stream
            self._emit(notification("notifications/elicitation/complete", {"elicitationId": elicitation_id}))
        return self._done()

    def close_sse_stream(self) -> None:
        """Close the legacy SSE stream of this call now; the call goes on (SEP-1699 polling) and the
        client reconnects with ``Last-Event-ID``. Elsewhere it does nothing."""
        close = getattr(self.call.session, "close_stream", None)
        if close is not None:
            if isinstance(self, SyncContext) and self.loop is not None:
                self.loop.call_soon_threadsafe(close)
            else:
                close()

    def check_cancelled(self) -> Awaitable[None]:
        """Inside an MCP task, raise :class:`TaskCancelled` once the client sent ``tasks/cancel``
        (cooperative: call it between steps; every ask checks too). Outside a task it does nothing."""
        cancelled = self.call.cancelled
        if cancelled is not None and cancelled():
            raise TaskCancelled()
        return self._done()

    def start_task(self) -> Awaitable[None]:
        """For a tool registered with ``task=...`` and ``input_first=True``: from here on, run as a task,
        the asks before it answered in the request's own rounds. Elsewhere it does nothing."""
        if self.call.may_start_task:
            # Set by the tasks extension's stage, in 2026-07-28's chain: the replay engine's backend.
            raise StartTask(self.backend.carried_answers(), dict(self.state))
        return self._done()

    def debug(self, data: Any, **kw: Any) -> Awaitable[None]:
        return self.log("debug", data, **kw)

    def info(self, data: Any, **kw: Any) -> Awaitable[None]:
        return self.log("info", data, **kw)

    def warning(self, data: Any, **kw: Any) -> Awaitable[None]:
        return self.log("warning", data, **kw)

    def error(self, data: Any, **kw: Any) -> Awaitable[None]:
        return self.log("error", data, **kw)

    async def _done(self) -> None:
        # Let the transport flush the notification before the handler goes on.
        await asyncio.sleep(0)


class AsyncContext(Context):
    """``ctx`` of an async handler: ``await ctx.confirm(...)``; ``asyncio.gather`` shares one round."""


class SyncContext(Context):
    """``ctx`` of a sync handler: the asks return answers; ``ctx.ask_all(...)`` asks several at once."""

    def ask_all(self, *asks: Ask) -> list[Any]:  # type: ignore[override]
        return self.backend.resolve_blocking(asks)

    def _one(self, ask: Ask, what: str) -> Any:
        return self.backend.resolve_blocking((ask,))[0]

    def _emit(self, message: dict[str, Any]) -> None:
        assert self.call.notify is not None and self.loop is not None
        self.loop.call_soon_threadsafe(self.call.notify, message)

    def _done(self) -> Any:
        return None

    # The same asks, typed as what a sync handler gets: the answers themselves.
    if TYPE_CHECKING:

        def confirm(self, message: str, *, key: str | None = None) -> bool: ...  # type: ignore[override]

        def elicit(self, message: str, schema: Any, *, key: str | None = None) -> ElicitResult: ...  # type: ignore[override]

        def elicit_url(  # type: ignore[override]
            self, message: str, url: str, *, key: str | None = None, elicitation_id: str | None = None
        ) -> ElicitResult: ...

        def sample(  # type: ignore[override]
            self, prompt: str | list[dict[str, Any]], *, key: str | None = None, **options: Any
        ) -> SampleResult: ...

        def list_roots(self, *, key: str | None = None) -> list[Root]: ...  # type: ignore[override]

        def report_progress(  # type: ignore[override]
            self, progress: float, total: float | None = None, message: str | None = None
        ) -> None: ...

        def log(self, level: str, data: Any, *, logger: str | None = None) -> None: ...  # type: ignore[override]

        def elicitation_complete(self, elicitation_id: str) -> None: ...  # type: ignore[override]

        def check_cancelled(self) -> None: ...  # type: ignore[override]

        def start_task(self) -> None: ...  # type: ignore[override]

        def debug(self, data: Any, **kw: Any) -> None: ...  # type: ignore[override]

        info = warning = error = debug  # type: ignore[assignment]


@overload
def get_context() -> Context | None: ...


@overload
def get_context(request: HttpRequest | Request) -> SyncContext | None: ...


def get_context(request: HttpRequest | Request | None = None) -> Context | None:
    """The context of the MCP call running now; with a view's ``request``, the view tool's
    :class:`SyncContext` (``None`` on the plain URL)."""
    if request is not None:
        found = getattr(request, "mcp_context", None)
        if found is not None:
            return found
    return current_context.get()
