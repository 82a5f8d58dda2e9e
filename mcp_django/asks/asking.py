"""What an async handler's ask returns, and the tasks started while a handler runs.

:class:`Asking` is the awaitable an ask returns, which refuses to stand in for its answer.
:class:`Scoped` runs a handler's coroutine (and its tasks') with our task factory on the loop
for each step, so the replay engine learns every branch the handler started (:mod:`.replay`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

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


class _Adopting:
    """The task factory a handler's steps run with, over the loop's own (``host``; None: asyncio's):
    it unwraps asks and hands each task to the backend when the backend adopts tasks."""

    __slots__ = ("host",)

    def __init__(self, host: Any) -> None:
        self.host = host

    def __call__(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        if type(coro) is Asking:
            coro = coro._coro
        ctx = current_context.get()
        adopt = getattr(ctx.backend, "adopt", None) if ctx is not None else None
        parent = asyncio.current_task(loop) if adopt is not None else None
        # The new task's steps are the handler's code too: the tasks it starts are found alike.
        steps = Scoped(coro, loop)
        host = self.host
        task = host(loop, steps, **kwargs) if host is not None else asyncio.Task(steps, loop=loop, **kwargs)
        if adopt is not None:
            adopt(task, parent)
        return task


# The factory made last, over the host factory it was made for: one per loop in practice.
_last = _Adopting(None)


def _over(host: Any) -> _Adopting:
    global _last
    ours = _last
    if ours.host is not host:
        ours = _last = _Adopting(host)
    return ours


class Scoped(Coroutine[Any, Any, T]):
    """A handler's coroutine (or one of its tasks'), each step run with our task factory on the loop.

    A task factory is asyncio's only way to learn which tasks a coroutine starts; it is on the
    loop only during the handler's own steps, so the host's tasks never meet it. A class, not a
    wrapping coroutine: a task cancelled before its first step closes the handler's coroutine quietly.
    """

    __slots__ = ("_coro", "_loop")

    def __init__(self, coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> None:
        self._coro = coro
        self._loop = loop

    def send(self, value: Any) -> Any:
        loop = self._loop
        host = loop.get_task_factory()
        if type(host) is _Adopting:  # inside a step already (an eager task started by its parent)
            return self._coro.send(value)
        ours = _over(host)
        loop.set_task_factory(ours)
        try:
            return self._coro.send(value)
        finally:
            if loop.get_task_factory() is ours:  # unless the handler set one of its own meanwhile
                loop.set_task_factory(host)

    def throw(self, *args: Any) -> Any:
        loop = self._loop
        host = loop.get_task_factory()
        if type(host) is _Adopting:
            return self._coro.throw(*args)
        ours = _over(host)
        loop.set_task_factory(ours)
        try:
            return self._coro.throw(*args)
        finally:
            if loop.get_task_factory() is ours:
                loop.set_task_factory(host)

    def close(self) -> None:
        self._coro.close()  # unwinding: no task started here need be found

    # Awaited directly (the legacy engine awaits the handler in the call's own task).
    def __await__(self) -> Generator[Any, None, T]:
        return self

    def __iter__(self) -> Scoped[T]:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def __getattr__(self, name: str) -> Any:
        # A coroutine's introspection (cr_code, __qualname__: task reprs, debuggers, task factories).
        return getattr(self._coro, name)
