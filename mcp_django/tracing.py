"""OpenTelemetry traces of MCP calls, when ``opentelemetry-api`` is installed: docs/tracing.md says
what each span holds (never arguments, answers, ``requestState`` or credentials)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from .handlers import address
from .protocol.jsonrpc import MCPError
from .request_state import StateRefused

try:
    from opentelemetry import propagate
    from opentelemetry import trace as trace_api
except ImportError:  # the package is optional: tracing is off
    ENABLED = False
else:
    ENABLED = True

# Whether the environment names a provider for the API to load (read at start-up).
_PROVIDER_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
# Not None: an API without the provider global trace() reads asks get_tracer_provider() each time.
_UNKNOWN = object()

if TYPE_CHECKING:
    from .asks.call import Call
    from .extensions import Run as Next

# The keys SEP-414 reserves in ``_meta`` for W3C Trace Context and Baggage; also HTTP headers.
CARRIER_KEYS = ("traceparent", "tracestate", "baggage")
_META_HEADERS = {key: "HTTP_" + key.upper() for key in CARRIER_KEYS}


def _tracer() -> Any:
    # Asked each time (cheap), so a provider set after import still receives the spans; the
    # instrumentation scope they are reported under is mcp_django (docs/tracing.md).
    return trace_api.get_tracer("mcp_django")


def _current_span(name: str, kind: Any, attributes: dict[str, Any], **options: Any) -> Any:
    # An exception's message may quote what the client sent: the outcome says enough.
    return _tracer().start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False, **options
    )


def _configured() -> bool:
    """Whether a tracer provider is set; until one is, the call skips the span (a no-op) and
    the Django request that reading the ``traceparent`` header would build."""
    return not isinstance(
        trace_api.get_tracer_provider(), (trace_api.ProxyTracerProvider, trace_api.NoOpTracerProvider)
    )


def carrier(call: Call) -> dict[str, str]:
    """The caller's trace context: ``params._meta``'s string keys, else the HTTP request's headers."""
    meta = call.params.get("_meta")
    if isinstance(meta, Mapping):
        found = {key: value for key in CARRIER_KEYS if isinstance(value := meta.get(key), str)}
        if "traceparent" in found:
            return found
    headers = getattr(call.request, "META", None)
    if not isinstance(headers, Mapping):
        return {}
    return {key: value for key, name in _META_HEADERS.items() if isinstance(value := headers.get(name), str)}


def trace(call_next: Next, call: Call) -> Awaitable[dict[str, Any]]:
    """The pipeline's tracing stage (in ``MCP_DJANGO["PIPELINE"]`` by default): one span per call.

    Until a tracer provider is set, the call's own awaitable, with no coroutine of this stage.
    """
    # No provider set, and none to load: said without get_tracer_provider()'s failed os.environ
    # lookup (about 3 µs, a tenth of an async call's own time), nor any other function.
    if (
        not _PROVIDER_FROM_ENVIRONMENT and getattr(trace_api, "_TRACER_PROVIDER", _UNKNOWN) is None
    ) or not _configured():
        return call_next(call)
    return _handle_in_span(call, call_next)


trace.async_capable = True  # type: ignore[attr-defined]
if not ENABLED:
    # Without OpenTelemetry the stage applies to no method: no chain holds it.
    trace.methods = frozenset()  # type: ignore[attr-defined]


async def _handle_in_span(call: Call, call_next: Next) -> dict[str, Any]:
    """One call in its server span (tracing is configured)."""
    parent = propagate.extract(carrier(call))
    # The handler's registered name (or URI, or template), never what the client sent: span
    # names stay few and a template's variables are not named.
    handler = call.registry.handler_for(call.method, call.target)
    target = "" if handler is None else address(handler)
    attributes: dict[str, Any] = {
        "mcp.method.name": call.method,
        "mcp.protocol.version": call.version,
        "jsonrpc.request.id": str(call.request_id),
        "mcp_django.era": str(call.era),
        "mcp_django.transport": call.transport,
        "mcp_django.principal": call.principal.label,
    }
    if target:
        attributes["mcp_django.handler"] = target
    name = f"{call.method} {target}" if target else call.method
    with _current_span(name, trace_api.SpanKind.SERVER, attributes, context=parent) as span:
        call.trace = CallTrace(span)
        try:
            result = await call_next(call)
        except BaseException as exc:
            _failed(span, exc)
            raise
        finally:
            call.trace = None
        outcome = result.get("resultType")
        if outcome not in ("input_required", "task"):
            outcome = "tool_error" if result.get("isError") else "completed"
        span.set_attribute("mcp_django.outcome", outcome)
        return result


def _failed(span: Any, exc: BaseException) -> None:
    if isinstance(exc, asyncio.CancelledError):
        span.set_attribute("mcp_django.outcome", "cancelled")
        return
    if isinstance(exc, StateRefused):
        # The reason is one of a fixed set of words (mcp_django.request_state.Reason).
        span.set_attribute("mcp_django.outcome", "refused")
        span.set_attribute("mcp_django.refusal_reason", str(exc.reason))
    else:
        span.set_attribute("mcp_django.outcome", "failed")
    if isinstance(exc, MCPError):
        span.set_attribute("error.type", str(exc.code))
        span.set_attribute("rpc.jsonrpc.error_code", exc.code)
    else:
        span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(trace_api.Status(trace_api.StatusCode.ERROR))


# -- hooks of the engines (called only when ENABLED) ---------------------------------------


class CallTrace:
    """What the engines tell of a traced call (``call.trace``, set by :func:`trace`)."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def replay_round(self, answered: int) -> None:
        """A 2026-07-28 request's attempt: which round of input it carries the answers of (0: none)."""
        self.span.set_attribute("mcp_django.round", answered)

    def input_required(self, round_no: int, asks: Mapping[str, str]) -> None:
        """The attempt ended with asks pending: the round it opens, and what each key asks for."""
        self.span.add_event(
            "mcp_django.input_required",
            {
                "mcp_django.round": round_no,
                "mcp_django.ask.keys": list(asks),
                "mcp_django.ask.methods": list(asks.values()),
            },
        )

    def ask_started(self, method: str, key: str) -> Any:
        """A legacy ask sent to the client: a child span of the call until it is answered."""
        return _tracer().start_span(
            f"mcp_django.ask {method}",
            kind=trace_api.SpanKind.CLIENT,
            attributes={"mcp.method.name": method, "mcp_django.ask.key": key},
        )

    def ask_params(self, ask_span: Any, params: dict[str, Any]) -> dict[str, Any]:
        """An ask's params with its span's context in ``_meta`` (SEP-414), so the client's work joins the trace."""
        meta = params.get("_meta")
        carried = dict(meta) if isinstance(meta, Mapping) else {}
        propagate.inject(carried, context=trace_api.set_span_in_context(ask_span))
        return {**params, "_meta": carried}

    def ask_ended(self, ask_span: Any, outcome: str) -> None:
        ask_span.set_attribute("mcp_django.outcome", outcome)
        if outcome in ("error", "timeout"):
            ask_span.set_status(trace_api.Status(trace_api.StatusCode.ERROR))
        ask_span.end()


async def task_attempt(task_id: str, principal: str, tool: str, rounds: int, attempt: Awaitable[Any]) -> Any:
    """One attempt of an MCP task (awaited) and its outcome, in a span of its own when tracing is
    on; only the id's first characters, as the id reaches the task."""
    if not ENABLED:
        return await attempt
    attributes = {
        "mcp.method.name": "tools/call",
        "mcp_django.handler": tool,
        "mcp_django.task": task_id[:8],
        "mcp_django.principal": principal,
        "mcp_django.round": rounds,
    }
    with _current_span(f"mcp_django.task {tool}", trace_api.SpanKind.CONSUMER, attributes) as span:
        outcome = await attempt
        status = str(outcome.status)
        span.set_attribute("mcp_django.outcome", status)
        if status == "failed":
            span.set_status(trace_api.Status(trace_api.StatusCode.ERROR))
        return outcome
