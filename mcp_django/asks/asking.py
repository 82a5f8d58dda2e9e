"""What an async handler's ask returns, and the tasks started while a handler runs.

:class:`Asking` is the awaitable an ask returns: a coroutine that refuses to stand
in for its answer. The task factory installed by :func:`install` does two things
for tasks created on the loop: a task made of an ``Asking`` runs the coroutine
inside it (asyncio tests a task's coroutine for truth in its repr), and a task
created while a handler runs is handed to its backend when the backend adopts
tasks (the replay engine does, so an attempt knows every branch the handler
started: see :mod:`.replay`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

T = TypeVar("T")


# The ctx of the handler running in this context (``mcp_django.get_context()`` reads it).
# Its backend may adopt the tasks created here as branches of the current attempt.
current_context: contextvars.ContextVar[Any] = contextvars.ContextVar("mcp_django_context", default=None)


class Asking(Coroutine[Any, Any, T]):
    """What an async handler's ask returns: await it for the answer.

    A coroutine (``asyncio.gather``, ``create_task`` and ``TaskGroup`` take it) that
    refuses to stand in for its answer: ``if not ctx.confirm(...)`` without
    ``await`` raises ``TypeError`` at the ``if``, before anything after it runs.
    (A bare coroutine is always true: the missing ``await`` would skip the question.)
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

        def __bool__(self):
            self._refuse("used as a boolean")

        def __eq__(self, other):
            self._refuse("compared")

        def __ne__(self, other):
            self._refuse("compared")

        def __lt__(self, other):
            self._refuse("compared")

        def __le__(self, other):
            self._refuse("compared")

        def __gt__(self, other):
            self._refuse("compared")

        def __ge__(self, other):
            self._refuse("compared")

        def __iter__(self):
            self._refuse("iterated")

        def __len__(self):
            self._refuse("measured")

        def __contains__(self, item):
            self._refuse("searched")

        def __getitem__(self, item):
            self._refuse("indexed")

        def __getattr__(self, name):
            if name.startswith(("cr_", "gi_")):  # a coroutine's introspection (task reprs, debuggers)
                return getattr(self._coro, name)
            if name.startswith("_"):
                raise AttributeError(name)
            self._refuse(f"asked for .{name}")


_factories: dict[Any, Any] = {}


def _adopting(previous: Any) -> Any:
    """A task factory over ``previous`` (None: asyncio's own) that unwraps asks and adopts branches."""
    cached = _factories.get(previous)
    if cached is not None:
        return cached

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        if type(coro) is Asking:
            coro = coro._coro
        ctx = current_context.get()
        adopt = getattr(ctx.backend, "adopt", None) if ctx is not None else None
        if adopt is None:
            return previous(loop, coro, **kwargs) if previous is not None else asyncio.Task(coro, loop=loop, **kwargs)
        parent = asyncio.current_task(loop)
        task = previous(loop, coro, **kwargs) if previous is not None else asyncio.Task(coro, loop=loop, **kwargs)
        adopt(task, parent)
        return task

    factory.mcp_django_adopting = True  # type: ignore[attr-defined]
    _factories[previous] = factory
    return factory


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Put the factory on ``loop`` (over any factory already there), once."""
    current = loop.get_task_factory()
    if not getattr(current, "mcp_django_adopting", False):
        loop.set_task_factory(_adopting(current))
