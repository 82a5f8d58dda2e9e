"""SSE framing: the exact bytes every stream is written with (clients and the conformance suite read them)."""

from __future__ import annotations

from mcp_django.transports.http import sse_comment, sse_event, sse_message

MESSAGE = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
DATA = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'


def test_a_message() -> None:
    assert sse_message(MESSAGE) == b"event: message\ndata: " + DATA + b"\n\n"


def test_a_message_with_an_id() -> None:
    assert sse_message(MESSAGE, event_id="4.2@chan") == b"id: 4.2@chan\nevent: message\ndata: " + DATA + b"\n\n"


def test_priming_events() -> None:
    assert sse_event(b"", event_id="4.0@chan", retry_ms=1000) == b"id: 4.0@chan\nretry: 1000\ndata: \n\n"
    assert sse_event(b"", retry_ms=1000) == b"retry: 1000\ndata: \n\n"


def test_a_comment() -> None:
    assert sse_comment("keepalive") == b": keepalive\n\n"
