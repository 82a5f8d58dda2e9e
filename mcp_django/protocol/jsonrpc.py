"""JSON-RPC 2.0 messages and the errors MCP defines on top of them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import orjson

# orjson's own functions, not wrappers: every message crosses both.
dumps: Callable[[Any], bytes] = orjson.dumps
loads: Callable[[bytes | str], Any] = orjson.loads
# Stable bytes for hashing: sorted keys, no spaces (a partial of orjson's, no frame of ours).
canonical: Callable[[Any], bytes] = functools.partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)


PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# 2026-07-28
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022
# Legacy revisions
RESOURCE_NOT_FOUND_LEGACY = -32002

# The HTTP status a 2026-07-28 Streamable HTTP response carries for an error.
_HTTP_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    METHOD_NOT_FOUND: 404,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
}


class MCPError(Exception):
    """A JSON-RPC error answered to the client."""

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        http_status: int | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = _HTTP_STATUS.get(code, 200) if http_status is None else http_status
        # HTTP headers of the answer, where HTTP carries it (a WWW-Authenticate challenge).
        self.headers = headers

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class Unavailable(MCPError):
    """A service the request needs failed or did not answer in time: HTTP 503, try again."""

    def __init__(self, what: str) -> None:
        super().__init__(INTERNAL_ERROR, f"{what} is unavailable; try again later", http_status=503)


class InvalidParams(MCPError):
    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(INVALID_PARAMS, message, data)


class ResourceNotFound(InvalidParams):
    """No resource at the URI (or none the caller may read): -32602, -32002 on the legacy revisions."""

    def __init__(self, uri: str, detail: str = "") -> None:
        super().__init__(f"Resource not found: {uri}{detail}", {"uri": uri})


def storable(value: str, what: str) -> None:
    """-32602 if ``value``, a client's string that goes on to a query, holds a NUL
    (which PostgreSQL refuses and SQLite stores: the same client error on every database)."""
    if "\x00" in value:
        raise InvalidParams(f"{what} must not contain a NUL character")


def response(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, error: MCPError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


# The deepest nesting a message may have: deeper values echoed back (orjson writes at most
# 254 levels) would fail after the request was accepted, so they are refused on arrival.
MAX_DEPTH = 64


def parse(data: bytes | str) -> Any:
    """The message in ``data``, or :class:`MCPError`: -32700 when it is not JSON
    (or not UTF-8), -32600 when it nests deeper than :data:`MAX_DEPTH`."""
    try:
        message = loads(data)
    except (ValueError, RecursionError):
        raise MCPError(PARSE_ERROR, "Parse error") from None
    # A message is no deeper than its count of brackets (C-speed): only one with many is walked.
    if isinstance(message, (dict, list)):
        if isinstance(data, str):
            opened = data.count("[") + data.count("{")
        else:
            opened = data.count(b"[") + data.count(b"{")
        if opened > MAX_DEPTH and too_deep(message, MAX_DEPTH):
            raise MCPError(INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels")
    return message


def too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def valid_id(value: Any) -> bool:
    """Whether ``value`` may be a request id (or a progress token): a string or an integer."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def reply_id(message: Any) -> Any:
    """The id to answer an invalid message with: its own when that is a valid id, else null."""
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if valid_id(request_id) else None


def classify(message: Any) -> str:
    """'request', 'notification', 'response' or 'invalid'."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return "invalid"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "invalid"
        if "id" not in message:
            return "notification"
        request_id = message["id"]
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):  # valid_id(), inline: every message
            return "invalid"
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return "invalid"
        return "request"
    if "id" in message and ("result" in message or "error" in message):
        return "response"
    return "invalid"
