"""HTTP in and out, whichever server carried it (our ASGI app, a Django view, a websocket's upgrade).

The records a transport fills from a request (:class:`HttpIn`) and sends back
(:class:`HttpOut`), their JSON and SSE framing, and the headers of an ASGI scope.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.handlers.asgi import ASGIRequest

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


def scope_url(scope: Any) -> tuple[str, str]:
    """:attr:`HttpIn.scheme` and :attr:`HttpIn.endpoint` of an ASGI request; a websocket's upgrade
    names the http(s) URL it shares with the endpoint (the URL a token's audience names)."""
    scheme = scope.get("scheme") or "http"
    return _UPGRADED.get(scheme, scheme), f"{scope.get('root_path', '')} {scope.get('path', '')}"


_UPGRADED = {"ws": "http", "wss": "https"}


@dataclass(slots=True)
class HttpOut:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    # When set, the response is an SSE stream of these chunks.
    events: AsyncIterator[bytes] | None = None


def json_out(status: int, payload: Any, extra: list[tuple[str, str]] | None = None) -> HttpOut:
    return HttpOut(status, [("content-type", JSON), *(extra or [])], dumps(payload))


def sse_event(
    data: bytes, *, event: str | None = None, event_id: str | None = None, retry_ms: int | None = None
) -> bytes:
    """One Server-Sent Event: its fields (``id``, ``retry``, ``event``, in that order) and one ``data`` line.

    ``data`` must hold no line break (compact JSON never does). Empty data with an
    id or a retry is a priming event: it sets where a client resumes from, or how
    soon it reconnects, and carries no message.
    """
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


def asgi_headers(scope: dict[str, Any]) -> dict[str, str]:
    """An ASGI scope's headers (an HTTP request's, a websocket upgrade's).

    Lower-case names; a repeated header's values joined with "," as Django joins them.

    ``cookie`` is exactly the string Django's request parses (``META["HTTP_COOKIE"]``):
    the principal cache keys on the session id found in it, which must be the
    one the authentication classes read, however the client split its cookies.
    """
    raw = scope.get("headers", ())
    if type(raw) is list:
        # Every request's headers, most often with no name twice and no cookie: one comprehension,
        # and the loop below only when the count says a name came twice (or there is a cookie).
        out = {name.decode("latin-1").lower(): value.decode("latin-1").strip(" \t") for name, value in raw}
        if len(out) == len(raw) and "cookie" not in out:
            return out
    out = {}
    cookies: list[bytes] | None = None
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        if name == "cookie":
            if cookies is None:
                cookies = []
            cookies.append(raw_value)
            continue
        value = raw_value.decode("latin-1").strip(" \t")
        out[name] = f"{out[name]},{value}" if name in out else value
    if cookies is not None:
        out["cookie"] = django_cookie(cookies)
    return out


def django_cookie(values: list[bytes]) -> str:
    """The ``Cookie`` string Django builds from these header fields.

    Django's versions differ (6.0 joins fields with "; ", 5.2 with ","), so
    several fields (HTTP/2 clients split cookies) go through Django's own
    request class; one field is the common case, and parses alike either way.
    """
    if len(values) == 1:
        return values[0].decode("latin-1")
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"cookie", v) for v in values]}
    return ASGIRequest(scope, io.BytesIO(b"")).META.get("HTTP_COOKIE", "")
