"""The 2026-07-28 round engine (the replay rule, docs/replay.md) and its request-state boundary.

:func:`run` makes attempts of the handler with the answers known so far; :func:`request_state`
unseals ``requestState`` into the :class:`Prior` rounds before it and seals the next round's
into the ``input_required`` result after it: the engine itself never reads or writes a token
(the tasks extension keeps its rounds in the database instead).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import signals
from ..conf import mcp_settings
from ..handlers import Handler
from ..protocol.jsonrpc import INTERNAL_ERROR, InvalidParams, MCPError
from ..request_state import Claims, Reason, StateRefused, audience_for, params_digest, seal, unseal
from ..signals import observer
from . import guard
from .call import Call
from .context import AsyncContext, SyncContext
from .invoke import Scoped, invoke, start_task
from .questions import Ask, ContentInvalid, InputRequired, MissingCapability, escaped


class ReplayBackend:
    """Answers asks from what the client has already said, or records them as pending; tracks the
    branches (tasks) an async handler's attempt started, and where they stand.

    The attempt may end once every branch is finished or parked (a branch with live children
    waits for them), or ``ROUND_GATHER_TIMEOUT`` seconds after the first ask parked.
    """

    def __init__(
        self,
        call: Call,
        known: dict[str, dict[str, Any]],
        asked: dict[str, str] | None,
        responses: dict[str, Any],
    ) -> None:
        self.call = call
        self.known = known
        # inputResponses count only as answers to what the sealed requestState asked.
        self.responses = responses if asked is not None else {}
        self.asked = asked or {}
        self.pending: dict[str, Ask] = {}
        self.used: dict[str, dict[str, Any]] = {}
        self.error: MCPError | None = None
        # Capabilities the asks of this attempt needed and the client did not declare.
        self.missing: list[str] = []
        # The replay guard's record of this attempt's writes, when the guard is on.
        self.recorder: guard.Recorder | None = None
        self.closed = False
        # The handler's own coroutine while its first step runs eagerly (see _unanswered()).
        self.first_step: Any = None
        self._default_keys: dict[str, int] = {}
        self.main: asyncio.Task[Any] | None = None
        # Every task the handler started (directly or not), with the task that started it.
        self.branches: dict[asyncio.Task[Any], asyncio.Task[Any] | None] = {}
        self.parked: set[asyncio.Task[Any]] = set()
        # Created once the handler waits on something: a handler that finishes eagerly never needs it.
        self.woken: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None

    def adopt(self, task: asyncio.Task[Any], parent: asyncio.Task[Any] | None) -> None:
        """Called by the task factory for a task the handler created: a branch of this attempt."""
        if not self.closed:
            self.branches[task] = parent
            task.add_done_callback(self._finished)

    def start(self, task: asyncio.Task[Any]) -> None:
        """The handler's own task, once it has run its first step (eagerly)."""
        self.main = task
        self.woken = task.get_loop().create_future()
        self.branches[task] = None
        task.add_done_callback(self._finished)
        if self.parked:
            self._check()

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.parked.discard(task)
        if task is self.main:
            self.wake()
        elif self.parked:
            # Checked two loop turns later: the task's outcome first reaches whoever awaits it
            # (gather's error, as_completed's next value), which may then ask in this round.
            loop = task.get_loop()
            loop.call_soon(loop.call_soon, self._check)

    def _check(self) -> None:
        if self.woken is None or self.woken.done():
            return
        branches = self.branches
        waiting = {parent for task, parent in branches.items() if parent is not None and not task.done()}
        for task in branches:
            if not (task.done() or task in self.parked or task in waiting):
                # Still running (a query, an HTTP call, a sleep): it may ask in this round. Waited
                # for, but not for ever: it may wait for what only the next round brings (another
                # branch's answer), which nothing here tells from a slow query.
                if self.timer is None:
                    self.timer = self.woken.get_loop().call_later(mcp_settings.ROUND_GATHER_TIMEOUT, self.wake)
                return
        self.wake()

    def wake(self) -> None:
        if self.woken is not None and not self.woken.done():
            self.woken.set_result(None)

    def close(self, *, cancel: bool) -> None:
        """The attempt is over: no more asks belong to it; ``cancel``: unwind every branch still running."""
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        if cancel:
            for task in self.branches:
                if not task.done():
                    task.cancel()
                    task.add_done_callback(_retrieve)
        self.branches.clear()
        self.parked.clear()

    def _lookup(self, asks: Sequence[Ask], record: bool = True) -> tuple[list[Any], bool]:
        """The answers known to ``asks``, and whether one is missing. ``record``: the asks
        belong to this attempt's round (unanswered ones become pending, answered ones are carried)."""
        values: list[Any] = []
        missing = False
        lacking: list[str] = []
        responses = self.responses
        for ask in asks:
            # Once per ask of every attempt: the key and the known answer are found inline.
            key = ask.key or ask.key_among(self._default_keys)
            ask.key = key
            digest = ask.digest
            # An answer counts only for the very question it answered (its digest).
            if key in responses and self.asked.get(key) == digest:
                raw = responses[key]
            else:
                carried = self.known.get(key)
                if carried is None or carried["q"] != digest:
                    if not self.call.capabilities.supports(ask.capability):
                        lacking.append(ask.capability)
                        continue
                    if record:
                        self.pending[key] = ask
                    values.append(None)
                    missing = True
                    continue
                raw = carried["a"]
            try:
                values.append(ask.parse(key, raw))
            except ContentInvalid as exc:
                # A form filled in wrongly: the same key is asked again, saying what was wrong.
                if record:
                    self.pending[key] = ask.again(exc.problem)
                values.append(None)
                missing = True
                continue
            except MCPError as exc:
                if record:
                    self.error = exc
                raise
            if record:
                self.used[key] = {"q": digest, "a": raw}
        if lacking:
            # The handler may catch it and do without; if it escapes, -32021 names them all.
            if record:
                self.missing.extend(lacking)
            raise MissingCapability(lacking)
        return values, missing

    def resolve_blocking(self, asks: Sequence[Ask]) -> list[Any]:
        values, missing = self._lookup(asks)
        if missing:
            raise InputRequired
        return values

    async def resolve(self, asks: Sequence[Ask]) -> list[Any]:
        # Once the attempt is over (the handler unwinding, a task left running), no ask joins its round.
        values, missing = self._lookup(asks, not self.closed)
        if missing:
            await self._unanswered()
        return values

    async def resolve_one(self, ask: Ask) -> Any:
        """:meth:`resolve` of one ask, its answer itself (no coroutine of the context's around it)."""
        values, missing = self._lookup((ask,), not self.closed)
        if missing:
            await self._unanswered()
        return values[0]

    def _unanswered(self) -> asyncio.Future[None]:
        """What an ask without an answer waits on: the end of the attempt, which cancels it."""
        if self.closed:
            raise RuntimeError("this request is over: an ask made after it can no longer be answered")
        task = asyncio.current_task()
        if self.first_step is not None and task is not None and not (self.branches or self.parked):
            if task.get_coro() is self.first_step:
                # The handler's own first step, no task started: the attempt ends here, cancelled
                # at this ask, without parking, the cancel's loop turn and a done callback.
                self.closed = True
                raise asyncio.CancelledError
        if task is not None:
            self.parked.add(task)
        # The attempt may be over.
        self._check()
        # Parked until the engine ends the attempt (it cancels this task).
        return asyncio.get_running_loop().create_future()

    def carried_answers(self) -> dict[str, dict[str, Any]]:
        return {**self.known, **self.used}


@dataclass
class Prior:
    """What earlier rounds of a request said (from its ``requestState``), and this request's answers."""

    # {key: {"q": question digest, "a": answer}} from earlier rounds.
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # {key: question digest} the last round asked; None before any round.
    asked: dict[str, str] | None = None
    state: dict[str, str] = field(default_factory=dict)
    round: int = 0
    # This request's inputResponses.
    responses: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    """What one request's attempt came to: a value, or asks pending (the replay engine)."""

    value: Any = None
    # A result the method answers as it is: input_required (sealed by the boundary), or a task created.
    result: dict[str, Any] | None = None
    # What the next round needs: the parked asks, every answer so far and ``ctx.state``.
    pending: dict[str, Ask] = field(default_factory=dict)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)


# The replay engine's shape (the boundary runs it; mcp_django.pipeline.ENGINES).
Engine = Callable[[Handler, dict[str, Any], Call, Prior], Awaitable[Outcome]]


async def _attempt_async(
    handler: Handler, arguments: dict[str, Any], ctx: Any, backend: ReplayBackend
) -> tuple[bool, Any]:
    """Run an async handler once; (True, value) when it finished, (False, None) when asks are pending."""
    kwargs = dict(arguments)  # handler.kwargs(arguments, ctx), inline: every async call's path
    if handler.context_param:
        kwargs[handler.context_param] = ctx
    main = Scoped(invoke(handler, kwargs, ctx), asyncio.get_running_loop())
    # start_task() runs the first step eagerly: an unanswered ask there ends the attempt at once.
    backend.first_step = main
    try:
        task = start_task(main)
    finally:
        backend.first_step = None
    if not task.done():
        if backend.closed:
            # Ended at its first step's ask, it caught the CancelledError and awaits a cleanup.
            task.add_done_callback(_retrieve)
            return False, None
        backend.start(task)
        assert backend.woken is not None
        try:
            await backend.woken
        except BaseException:
            backend.close(cancel=True)
            task.cancel()
            raise
        if not task.done():
            # Over: it unwinds after the answer has gone (waiting would cost every round a loop turn);
            # closing cancels the handler's task too, a branch of the attempt.
            backend.close(cancel=True)
            return False, None
    # The handler's task is done: eagerly, or by the end of the round.
    backend.close(cancel=bool(backend.pending))
    if not backend.pending or (not task.cancelled() and task.exception() is not None):
        return True, task.result()  # the value, or the handler's error (asks pending or not) for run() to weigh
    _retrieve(task)
    return False, None


def _retrieve(task: asyncio.Task[Any]) -> None:
    try:
        task.exception()  # an attempt that ended owes nobody its error
    except asyncio.CancelledError as exc:
        # Its traceback holds the handler's frames, which hold the task and the whole attempt:
        # a cycle only the collector would free (every few dozen rounds under load).
        exc.__traceback__ = None


async def missing_capabilities(call: Call, primitive: str, missing: Sequence[str]) -> MissingCapability:
    """The -32021 a call's asks end with, in both eras: every capability they lacked, not only the
    one that escaped, announced (``signals.capability_missing``: the audit's row)."""
    lacking = MissingCapability(missing)
    event = call.event("missing_capability", reason=",".join(lacking.capabilities))
    await signals.capability_missing.asend(primitive, event=event)
    return lacking


async def run(handler: Handler, arguments: dict[str, Any], call: Call, prior: Prior) -> Outcome:
    """Serve one tools/call, prompts/get or resources/read under the replay rule: an
    attempt with the ``prior`` rounds' answers; asks still pending end up in the outcome."""
    responses = prior.responses
    backend, ctx, finished, value, error = await attempt(
        handler, arguments, call, known=prior.answers, state=prior.state, asked=prior.asked, responses=responses
    )
    # Attempts that ended with asks pending before the last one (their writes were made twice).
    replayed: list[guard.Recorder] = []
    if prior.asked is None and responses and error is None and backend.pending.keys() & responses.keys():
        if backend.recorder is not None:
            replayed.append(backend.recorder)
        # Answers without a requestState count only for the first questions any caller is asked:
        # those this attempt just parked on, as if the client had seen that round.
        asked = {key: ask.digest for key, ask in backend.pending.items()}
        backend, ctx, finished, value, error = await attempt(
            handler, arguments, call, known={}, state=dict(ctx.state), asked=asked, responses=responses
        )
    if backend.error is not None:
        raise backend.error
    if backend.missing and escaped(error) is not None:
        raise await missing_capabilities(call, handler.primitive, backend.missing) from None
    if error is not None and not (backend.pending and isinstance(error, Exception)):
        raise error
    if backend.recorder is not None and (backend.pending or not finished):
        replayed.append(backend.recorder)
    if replayed:
        await guard.report(replayed, call)
    if finished and not backend.pending:
        return Outcome(value)  # positional: once per call, where the keyword cost a sixth of it
    # backend.carried_answers(), inline: every round's path.
    return Outcome(pending=backend.pending, answers={**backend.known, **backend.used}, state=dict(ctx.state))


async def attempt(
    handler: Handler,
    arguments: dict[str, Any],
    call: Call,
    *,
    known: dict[str, dict[str, Any]],
    state: dict[str, str],
    asked: dict[str, str] | None = None,
    responses: dict[str, Any] | None = None,
    backend_class: type[ReplayBackend] = ReplayBackend,
) -> tuple[ReplayBackend, Any, bool, Any, BaseException | None]:
    """One attempt with the answers ``known`` so far (an MCP task's run calls it too): the backend,
    the ctx, whether the handler finished, its value, and its error."""
    backend = backend_class(call, known, asked, {} if responses is None else responses)
    ctx = (AsyncContext if handler.is_async else SyncContext)(call, backend, state)
    finished = False
    value: Any = None
    error: BaseException | None = None
    recorder = backend.recorder = guard.start(handler) if guard.on or observer.get() is not None else None
    try:
        if handler.is_async:
            finished, value = await _attempt_async(handler, arguments, ctx, backend)
        else:
            try:
                value = await invoke(handler, handler.kwargs(arguments, ctx), ctx)
                finished = True
            except InputRequired:
                pass  # an unanswered ask: the attempt did not finish
    except BaseException as exc:
        error = exc
    finally:
        if recorder is not None:
            guard.current.reset(recorder.token)
    return backend, ctx, finished, value, error


async def request_state(engine: Engine, handler: Handler, arguments: dict[str, Any], call: Call) -> Outcome:
    """Run ``engine`` with the rounds the request's state carries; seal the next round's (a
    handler stage of 2026-07-28's chains: :mod:`mcp_django.pipeline`)."""
    params = call.params
    responses = params.get("inputResponses", {})
    if not isinstance(responses, dict):
        raise InvalidParams("inputResponses must be an object")
    token = params.get("requestState")
    # The bindings, each found once for checking and sealing, and only when there is a state to
    # check or seal: a plain call needs none of them.
    digest: str | None = None
    bound_to: str | None = None
    digests: tuple[str, ...] | None = None
    # Positional: built once a round, where keywords cost a tenth as much again.
    if token is None:
        prior = Prior({}, None, {}, 0, responses)
    else:
        digest = params_digest(params)
        bound_to = audience_for(lambda: call.request, call.endpoint, call.http)
        try:
            digests = call.principal.digests
            claims = unseal(token, call.method, call.target, digests, digest, bound_to)
        except StateRefused as refusal:
            await refused(call, handler.primitive, refusal.reason)
            raise
        prior = Prior(claims.answers, claims.asked, dict(claims.state), claims.round, responses)
    if call.trace is not None:
        call.trace.replay_round(prior.round)
    outcome = await engine(handler, arguments, call, prior)
    if not outcome.pending:
        return outcome
    round_no = prior.round + 1
    if round_no > mcp_settings.MAX_INPUT_ROUNDS:
        message = f"this request needed more than {mcp_settings.MAX_INPUT_ROUNDS} rounds of input"
        capped = StateRefused(Reason.ROUND_CAP, message)
        await refused(call, handler.primitive, capped.reason)
        raise capped
    # One pass over the pending asks for what the state, the audit event and the answer say of them.
    asked: dict[str, str] = {}
    asks: dict[str, str] = {}
    requests: dict[str, Any] = {}
    for key, ask in outcome.pending.items():
        asked[key] = ask.digest
        asks[key] = ask.method
        requests[key] = ask.wire()
    new_state = seal(
        Claims(
            method=call.method,
            target=call.target,
            # The signing key's digest (Principal.digest), of those the state was checked against.
            principal=(digests if digests is not None else call.principal.digests)[0],
            digest=digest or params_digest(params),
            round=round_no,
            answers=outcome.answers,
            asked=asked,
            state=outcome.state,
            audience=bound_to if bound_to is not None else audience_for(lambda: call.request, call.endpoint, call.http),
        )
    )
    if len(new_state) > mcp_settings.MAX_REQUEST_STATE_BYTES:
        raise MCPError(INTERNAL_ERROR, "the answers so far no longer fit in MAX_REQUEST_STATE_BYTES")
    # Sent whatever AUDIT says: the setting decides mcp-django's own rows, not other sinks.
    event = call.event("round", round=round_no, asks=asks)
    await signals.round_started.asend(handler.primitive, event=event)
    if call.trace is not None:
        call.trace.input_required(round_no, asks)
    outcome.result = {"resultType": "input_required", "inputRequests": requests, "requestState": new_state}
    return outcome


async def refused(call: Call, sender: str, reason: str) -> None:
    """Tell the receivers (the audit log among them) before the client hears the refusal."""
    event = call.event("state_refused", reason=str(reason))
    await signals.state_refused.asend(sender, event=event)
