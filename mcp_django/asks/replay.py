"""The 2026-07-28 round engine: the replay rule.

An attempt runs the handler from the start. An ask whose answer is known (from
this request's ``inputResponses`` or from earlier rounds carried in the sealed
``requestState``) returns it; an ask without one is recorded and ends the
attempt. Asks started together (``asyncio.gather``, a TaskGroup, ``ask_all``)
all register before the attempt ends, so they share one round. The engine then
answers ``input_required`` with the pending asks and a new sealed state holding
every answer so far and the handler's ``ctx.state``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import signals
from ..conf import mcp_settings
from ..protocol.jsonrpc import INTERNAL_ERROR, MISSING_CAPABILITY, InvalidParams, MCPError
from ..registry import Handler
from ..state import Claims, Reason, StateRefused, params_digest, seal, unseal
from .call import Call
from .invoke import invoke, make_context, start_task
from .kinds import Ask


class InputRequired(BaseException):
    """Ends an attempt whose asks have no answer yet.

    A ``BaseException`` so that a handler's ``except Exception`` cannot swallow it.
    """


class RoundCapExceeded(StateRefused):
    def __init__(self, cap: int) -> None:
        super().__init__(Reason.ROUND_CAP)
        self.message = f"this request needed more than {cap} rounds of input"
        self.args = (self.message,)


def missing_capability(ask: Ask) -> MCPError:
    required = ask.required_capability()
    return MCPError(
        MISSING_CAPABILITY,
        f"this request needs the client capability {ask.capability!r}, which it did not declare",
        {"requiredCapabilities": required},
    )


class ReplayBackend:
    """Answers asks from what the client has already said, or records them as pending."""

    def __init__(
        self,
        call: Call,
        known: dict[str, dict[str, Any]],
        asked: dict[str, str] | None,
        responses: dict[str, Any],
    ) -> None:
        self.call = call
        self.known = known
        self.responses = responses
        # None: no requestState, so this round's answers are matched by key alone.
        self.asked = asked
        self.pending: dict[str, Ask] = {}
        self.used: dict[str, dict[str, Any]] = {}
        self.error: MCPError | None = None
        # Called when an ask finds no answer: it wakes the engine.
        self.wake: Callable[..., None] | None = None
        self._default_keys: dict[str, int] = {}

    def _key(self, ask: Ask) -> str:
        if ask.key:
            return ask.key
        base = ask.default_key()
        n = self._default_keys.get(base, 0) + 1
        self._default_keys[base] = n
        # The same question asked twice in one attempt gets distinct, deterministic keys.
        return base if n == 1 else f"{base}-{n}"

    def _answer(self, key: str, ask: Ask) -> tuple[bool, Any]:
        digest = ask.digest
        if key in self.responses:
            asked = self.asked.get(key) if self.asked is not None else digest
            if asked == digest:
                return True, self.responses[key]
        record = self.known.get(key)
        if record is not None and record["q"] == digest:
            return True, record["a"]
        return False, None

    def _lookup(self, asks: Sequence[Ask]) -> tuple[list[Any], bool]:
        values: list[Any] = []
        missing = False
        for ask in asks:
            key = self._key(ask)
            ask.key = key
            found, raw = self._answer(key, ask)
            if found:
                try:
                    values.append(ask.parse(key, raw))
                except MCPError as exc:
                    self.error = exc
                    raise
                self.used[key] = {"q": ask.digest, "a": raw}
                continue
            if not self.call.capabilities.supports(ask.capability):
                self.error = missing_capability(ask)
                raise self.error
            self.pending[key] = ask
            values.append(None)
            missing = True
        return values, missing

    def resolve_blocking(self, asks: Sequence[Ask]) -> list[Any]:
        values, missing = self._lookup(asks)
        if missing:
            raise InputRequired
        return values

    async def resolve(self, asks: Sequence[Ask]) -> list[Any]:
        values, missing = self._lookup(asks)
        if missing:
            if self.wake is not None:
                self.wake()
            # Park until the engine ends the attempt (it cancels this task).
            await asyncio.get_running_loop().create_future()
        return values

    def carried_answers(self) -> dict[str, dict[str, Any]]:
        return {**self.known, **self.used}


@dataclass
class Outcome:
    """What one request's attempt came to."""

    value: Any = None
    input_required: dict[str, Any] | None = None
    round: int = 0
    asks: dict[str, str] = field(default_factory=dict)


async def _attempt(handler: Handler, kwargs_for: Any, ctx: Any, backend: ReplayBackend) -> tuple[bool, Any]:
    """Run the handler once; (True, value) when it finished, (False, None) when asks are pending."""
    if not handler.is_async:
        try:
            return True, await invoke(handler, kwargs_for(ctx), ctx)
        except InputRequired:
            return False, None
    loop = asyncio.get_running_loop()
    # One future, resolved by whichever comes first: the handler finishing, or an
    # ask without an answer. (Cheaper than an Event, a waiter task and asyncio.wait.)
    woken: asyncio.Future[None] = loop.create_future()

    def wake(_: Any = None) -> None:
        if not woken.done():
            woken.set_result(None)

    backend.wake = wake
    task = start_task(invoke(handler, kwargs_for(ctx), ctx))
    try:
        if not task.done():
            task.add_done_callback(wake)
            await woken
    except BaseException:
        task.cancel()
        raise
    # No loop turn is spent waiting for more asks: tasks started together (gather,
    # a TaskGroup) were queued before this wake-up, so their asks are registered
    # already. (A sibling that first awaits something else asks in the next round.)
    if task.done() and not backend.pending:
        return True, task.result()
    # The attempt is over. It unwinds on the next loop turn, after the answer has
    # gone: waiting for it would cost every round's response a loop turn.
    task.cancel()
    task.add_done_callback(_retrieve)
    return False, None


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # an attempt that ended owes nobody its error


async def run(handler: Handler, arguments: dict[str, Any], call: Call) -> Outcome:
    """Serve one tools/call, prompts/get or resources/read under the replay rule."""
    params = call.params
    responses = params.get("inputResponses", {})
    if not isinstance(responses, dict):
        raise InvalidParams("inputResponses must be an object")
    token = params.get("requestState")
    claims: Claims | None = None
    # The params' digest binds the state; computed once for checking and sealing.
    digest = params_digest(params) if token is not None else None
    if token is not None:
        try:
            claims = unseal(
                token,
                method=call.method,
                target=call.target,
                principal=call.principal.digests,
                digest=digest or "",
            )
        except StateRefused as refusal:
            await refused(call, handler.kind, refusal.reason)
            raise
    backend = ReplayBackend(
        call,
        known=claims.answers if claims else {},
        asked=claims.asked if claims else None,
        responses=responses,
    )
    ctx = make_context(handler, call, backend, dict(claims.state) if claims else {})
    error: BaseException | None = None
    finished, value = False, None
    try:
        finished, value = await _attempt(handler, lambda c: handler.kwargs(arguments, c), ctx, backend)
    except BaseException as exc:
        error = exc
    if backend.error is not None:
        if backend.error.code == MISSING_CAPABILITY:
            event = call.event("missing_capability", reason=_capability_name(backend.error.data))
            await signals.capability_missing.asend(handler.kind, event=event)
        raise backend.error
    if error is not None and not (backend.pending and isinstance(error, Exception)):
        raise error
    if finished and not backend.pending:
        return Outcome(value=value, round=claims.round if claims else 0)
    round_no = (claims.round if claims else 0) + 1
    if round_no > mcp_settings.MAX_INPUT_ROUNDS:
        refusal = RoundCapExceeded(mcp_settings.MAX_INPUT_ROUNDS)
        await refused(call, handler.kind, refusal.reason)
        raise refusal
    new_state = seal(
        Claims(
            method=call.method,
            target=call.target,
            principal=call.principal.digest,
            digest=digest or params_digest(params),
            round=round_no,
            answers=backend.carried_answers(),
            asked={key: ask.digest for key, ask in backend.pending.items()},
            state={str(k): str(v) for k, v in ctx.state.items()},
        )
    )
    if len(new_state) > mcp_settings.MAX_REQUEST_STATE_BYTES:
        raise MCPError(INTERNAL_ERROR, "the answers so far no longer fit in MAX_REQUEST_STATE_BYTES")
    asks = {key: ask.method for key, ask in backend.pending.items()}
    # Sent whatever AUDIT says: the setting decides mcp-django's own rows, not other sinks.
    event = call.event("round", round=round_no, asks=asks)
    await signals.round_started.asend(handler.kind, event=event)
    return Outcome(
        input_required={
            "resultType": "input_required",
            "inputRequests": {key: ask.wire() for key, ask in backend.pending.items()},
            "requestState": new_state,
        },
        round=round_no,
        asks=asks,
    )


def _capability_name(data: Any) -> str:
    """``{"elicitation": {"url": {}}}`` -> ``"elicitation.url"``: which capability was missing."""
    required = data.get("requiredCapabilities") if isinstance(data, dict) else None
    if not isinstance(required, dict):
        return ""
    names = []
    for head, sub in required.items():
        subs = list(sub) if isinstance(sub, dict) else []
        names.extend(f"{head}.{s}" for s in subs) if subs else names.append(head)
    return ",".join(names)


async def refused(call: Call, sender: str, reason: str) -> None:
    """Tell the receivers (the audit log among them) before the client hears the refusal."""
    event = call.event("state_refused", reason=str(reason))
    await signals.state_refused.asend(sender, event=event)
