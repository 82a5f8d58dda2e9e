"""HTTP in and out, whichever server carried it (our ASGI app, a Django view, a websocket's
upgrade): the request a transport received (:class:`HttpIn`), its answer (:class:`HttpOut`), SSE framing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.jsonrpc import dumps

JSON = "application/json"
SSE = "text/event-stream"


@dataclass(slots=True)
class HttpIn:
    """One HTTP request, as the transport received it."""

    method: str
    headers: dict[str, str]  # lower-case names, values with surrounding whitespace removed
    body: bytes
    client_address: str | None
    request_factory: Callable[[], Any]
    transport: str = "http"
    # False where the server cannot stream (the WSGI view): answers are always JSON.
    can_stream: bool = True
    too_large: bool = False
    # The transport's scheme (http or https; a websocket's upgrade counts as the http(s) it began as).
    scheme: str = "http"
    # Where the request went as the server saw it (root path, path): an OAuth token is valid
    # at one URL only, so the principal cache keys on it.
    endpoint: str = ""
    # Django's request, once django_request() has built it.
    built: Any = field(default=None, repr=False)

    def django_request(self) -> Any:
        """Django's request for this one, built on first use (an authentication class, a handler's ``ctx.request``)."""
        if self.built is None:
            self.built = self.request_factory()
        return self.built


@dataclass(slots=True)
class HttpOut:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    # When set, the response is an SSE stream of these chunks.
    events: AsyncIterator[bytes] | None = None


def sse_event(
    data: bytes, *, event: str | None = None, event_id: str | None = None, retry_ms: int | None = None
) -> bytes:
    """One Server-Sent Event: its fields (``id``, ``retry``, ``event``, in that order) and one ``data``
    line (compact JSON holds no line break). Empty data with an id or a retry is a priming
    event: it sets where a client resumes from, or how soon it reconnects."""
    head = b""
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    if retry_ms is not None:
        head += b"retry: %d\n" % retry_ms
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


def sse_message(message: dict[str, Any], *, event_id: str | None = None) -> bytes:
    """A JSON-RPC message as an SSE ``message`` event."""
    return sse_event(dumps(message), event="message", event_id=event_id)


def sse_comment(text: str) -> bytes:
    """An SSE comment: every client ignores it, and the connection (and any proxy on it) sees traffic."""
    return b": " + text.encode() + b"\n\n"
