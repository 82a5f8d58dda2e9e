"""The limits stage of the pipeline, ``limit(call_next, call)``, and what a refused call is answered
(docs/limits.md). With nothing configured the call is handed on without a frame of its own."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.signals import setting_changed

from .. import extensions, signals
from ..asks.call import Call
from ..conf import mcp_settings
from ..handlers import Handler
from ..protocol.jsonrpc import MCPError, Unavailable
from ..protocol.revisions import Era
from ..registry import Registry
from . import counter
from .rates import Rate, parse

# The code a principal's other bound (ASK_THREADS_PER_PRINCIPAL) already answers: one family.
LIMIT_EXCEEDED = -32005
# What a cap's refusal tells the client to wait: there is no window's end, only "one finishes".
CAP_RETRY_AFTER = 1
_SENDER = {"tools/call": "tool", "prompts/get": "prompt", "resources/read": "resource"}

T = TypeVar("T")
Next = Callable[[Call], Awaitable[dict[str, Any]]]
OpenTasks = Callable[[Call, Handler], Awaitable[int | None]]


class Limited(MCPError):
    """A call refused by a limit: HTTP 429 with ``Retry-After``, and ``data.retryAfter`` (seconds)."""

    def __init__(self, message: str, retry_after: int, limit: str, value: str) -> None:
        super().__init__(
            LIMIT_EXCEEDED,
            message,
            {"retryAfter": retry_after, "limit": limit, "value": value},
            http_status=429,
            headers=[("retry-after", str(retry_after))],
        )
        self.retry_after = retry_after


@dataclass(frozen=True)
class Plan:
    """``LIMITS`` as the stage reads it, made once per settings."""

    rates: tuple[tuple[str, Rate], ...]
    max_open_asks: int | None
    max_open_tasks: int | None
    fail_open: bool
    classes: tuple[type, ...]
    # Nothing set: the stage hands every call on (a field, not a property: read per call).
    idle: bool


@functools.cache
def plan() -> Plan:
    settings = mcp_settings.LIMITS
    rates, classes = tuple(settings["RATES"].items()), tuple(settings["CLASSES"])
    asks, tasks = settings["MAX_OPEN_ASKS"], settings["MAX_OPEN_TASKS"]
    idle = not rates and not classes and asks is None and tasks is None
    return Plan(rates, asks, tasks, settings["WHEN_CACHE_DOWN"] == "open", classes, idle)


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("CACHES", "MCP_DJANGO"):
        plan.cache_clear()


setting_changed.connect(_settings_changed)


def limit(call_next: Next, call: Call) -> Awaitable[dict[str, Any]]:
    """The stage: ``functools.partial(limit, call_next)`` in the pipeline's chains of the methods that run a handler."""
    found = plan()
    if found.idle and not call.registry.throttled:
        return call_next(call)  # nothing to count: no frame of its own, no cache
    return _limited(call_next, call, found)


def _applies(era: Era, method: str) -> bool:
    """Where the pipeline puts it: the methods that run a handler, once there is something to count
    (registering the first throttle= rebuilds the chains)."""
    return method in _SENDER and (not plan().idle or Registry.any_throttled)


limit.applies_to = _applies  # type: ignore[attr-defined]


async def _limited(call_next: Next, call: Call, found: Plan) -> dict[str, Any]:
    handler = call.registry.handler_for(call.method, call.target)
    who = _who(call)
    own = None if handler is None else f"{who}\0{handler.primitive}\0{handler.name}"  # the caller's calls of it
    counted = {
        "user": who,
        "token": _token(call),
        "tool": own,
        "endpoint": call.endpoint.name if call.endpoint is not None else "default",
    }
    # (scope, rate, what is counted); a scope with nothing to count here (no credential, no handler) is left out.
    windows = [(scope, rate, what) for scope, rate in found.rates if (what := counted[scope]) is not None]
    if own is not None and handler is not None and handler.throttle is not None:
        windows.append(("handler", _rate(handler.throttle), own))
    if windows:
        await _count(call, windows, found)
    if found.classes:
        await _ask_classes(call, handler, found)
    tasks = _open_tasks
    if found.max_open_tasks is not None and handler is not None and tasks and tasks[0] is extensions.registered:
        count = await tasks[1](call, handler)
        if count is not None and count >= found.max_open_tasks:
            await refuse(call, "tasks", f"{found.max_open_tasks} open", CAP_RETRY_AFTER)
    if found.max_open_asks is not None and call.era == Era.LEGACY:
        call.ask_guard = functools.partial(_open_ask, call, found.max_open_asks, who, found.fail_open)
    return await call_next(call)


async def _reach(work: Awaitable[T], fail_open: bool) -> T | None:
    """``await work`` (the cache's); the cache away, None (counted as nothing) or a 503, as ``WHEN_CACHE_DOWN`` says."""
    try:
        return await work
    except counter.CacheDown:
        if fail_open:
            return None
        raise Unavailable("the limits cache") from None


async def _count(call: Call, windows: list[tuple[str, Rate, str]], found: Plan) -> None:
    now = time.time()
    keyed = []
    for scope, rate, what in windows:
        window = int(now // rate.seconds)
        keyed.append((f"{counter.PREFIX}:{scope}:{rate.seconds}:{_digest(what)}:{window}", rate.seconds))
    counts = await _reach(counter.breaker.use(functools.partial(counter.hit, windows=keyed)), found.fail_open)
    if counts is None:
        return
    for (scope, rate, _what), count in zip(windows, counts, strict=True):
        if count > rate.calls:
            ends = (int(now // rate.seconds) + 1) * rate.seconds
            await refuse(call, scope, rate.text, max(1, math.ceil(ends - now)))


async def _ask_classes(call: Call, handler: Handler | None, found: Plan) -> None:
    """DRF's throttle classes, as a DRF view asks them (the handler stands for the view)."""

    def first_refusal() -> tuple[str, float | None] | None:
        from rest_framework.request import Request

        request = Request(call.request)
        request.user, request.auth = call.principal.user, call.principal.auth
        for cls in found.classes:
            throttle = cls()
            if not throttle.allow_request(request, handler):
                return cls.__name__, throttle.wait()
        return None

    # In a thread (the classes' own cache calls), bounded as the counting is.
    breaker = counter.breaker
    refused = await _reach(breaker.run(first_refusal, breaker.timeout(), counter.CacheDown), found.fail_open)
    if refused is not None:
        name, wait = refused
        await refuse(call, "class", name, max(1, math.ceil(wait or 1)))


# The tasks extension's count, kept with the load of the extensions that set it: a load
# without the extension drops it (its tools then run synchronously, uncapped).
_open_tasks: tuple[object, OpenTasks] | None = None


def count_open_tasks(count: OpenTasks) -> None:
    """For ``MAX_OPEN_TASKS``, from the tasks extension's ``register()``: ``await count(call, handler)``
    is how many unfinished tasks the caller has when the call would create one, else None."""
    global _open_tasks
    _open_tasks = (extensions.registered, count)


@contextlib.asynccontextmanager
async def _open_ask(call: Call, cap: int, who: str, fail_open: bool) -> AsyncIterator[None]:
    """One legacy server-to-client request of the call, counted while it is open."""
    key = f"{counter.PREFIX}:asks:{_digest(who)}"
    # A count outlives a process that died holding it by at most this.
    lifetime = mcp_settings.ASK_TIMEOUT + 60
    taken = await _reach(counter.breaker.use(lambda cache: counter.take(cache, key, cap, lifetime)), fail_open)
    if taken is False:
        await refuse(call, "asks", f"{cap} open", CAP_RETRY_AFTER)
    try:
        yield
    finally:
        if taken:
            with contextlib.suppress(counter.CacheDown):
                await counter.breaker.use(lambda cache: counter.release(cache, key))


async def refuse(call: Call, limit: str, value: str, retry_after: int) -> None:
    """Put the refusal on record (committed before the answer, as every refusal), then raise it."""
    event = call.event("limited", reason=f"{limit} {value}"[:48], outcome="limited")
    await signals.call_limited.asend(_SENDER.get(call.method, "tool"), event=event)
    raise Limited(f"{_SAYS[limit]} ({value}); try again in {retry_after} s", retry_after, limit, value)


_SAYS = {
    "user": "too many calls from this user",
    "token": "too many calls with this credential",
    "tool": "too many calls of this handler by this user",
    "endpoint": "too many calls to this endpoint",
    "handler": "too many calls of this handler by this user",
    "class": "too many calls (a throttle class)",
    "tasks": "too many unfinished tasks",
    "asks": "too many requests to this client waiting for an answer",
}


# A handler's throttle= as a Rate (checked when the handler was made).
_rate = functools.lru_cache(maxsize=256)(parse)


def _who(call: Call) -> str:
    """The caller as counted: its principal, or an anonymous caller's address."""
    principal = call.principal
    if principal.is_anonymous:
        return f"anonymous@{call.client_address or '?'}"
    return principal.label


def _token(call: Call) -> str | None:
    """The credential the call came with, by its kind and identity (None: a session, no credential)."""
    auth = call.principal.auth
    if auth is None:
        return None
    cls = type(auth)
    return f"{cls.__module__}.{cls.__qualname__}\0{getattr(auth, 'pk', None) or auth}"


def _digest(what: str) -> str:
    # Keys hold no label, address or secret, and stay within a cache key's characters and length.
    return hashlib.blake2b(what.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
