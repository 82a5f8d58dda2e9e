"""JSON-RPC 2.0 messages and the errors MCP defines on top of them."""

from __future__ import annotations

from typing import Any

try:
    import orjson

    def dumps(value: Any) -> bytes:
        return orjson.dumps(value)

    def loads(data: bytes | str) -> Any:
        return orjson.loads(data)

    def canonical(value: Any) -> bytes:
        """Stable bytes for hashing: sorted keys, no spaces."""
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)

except ImportError:  # pragma: no cover - orjson is a dependency; this keeps the app importable
    import json

    def dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    def loads(data: bytes | str) -> Any:
        return json.loads(data)

    def canonical(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


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
URL_ELICITATION_REQUIRED = -32042

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

    def __init__(self, code: int, message: str, data: Any = None, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self._http_status = http_status

    @property
    def http_status(self) -> int:
        if self._http_status is not None:
            return self._http_status
        return _HTTP_STATUS.get(self.code, 200)

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class InvalidParams(MCPError):
    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(INVALID_PARAMS, message, data)


def response(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, error: MCPError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


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
        if request_id is None or isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return "invalid"
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return "invalid"
        return "request"
    if "id" in message and ("result" in message or "error" in message):
        return "response"
    return "invalid"
