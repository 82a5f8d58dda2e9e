"""The request-state boundary of 2026-07-28: ``requestState`` in, ``requestState`` out.

The state is unsealed into the :class:`~mcp_django.asks.replay.Prior` rounds before the engine
runs, and the next round's is sealed into the ``input_required`` result: the engine never sees a
token (the tasks extension keeps its rounds in the database instead).
"""

from __future__ import annotations

from typing import Any

from .. import signals
from ..conf import mcp_settings
from ..handlers import Handler
from ..protocol.jsonrpc import INTERNAL_ERROR, InvalidParams, MCPError
from ..request_state import Claims, Reason, StateRefused, audience_for, params_digest, seal, unseal
from .call import Call
from .replay import Engine, Outcome, Prior


class RoundCapExceeded(StateRefused):
    def __init__(self, cap: int) -> None:
        super().__init__(Reason.ROUND_CAP)
        self.message = f"this request needed more than {cap} rounds of input"
        self.args = (self.message,)


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
        capped = RoundCapExceeded(mcp_settings.MAX_INPUT_ROUNDS)
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
