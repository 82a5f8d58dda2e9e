"""Protocol revisions we serve and the per-request fields of 2026-07-28."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from .jsonrpc import HEADER_MISMATCH, InvalidParams, MCPError

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_MODERN = MODERN_VERSIONS[0]
LATEST_LEGACY = LEGACY_VERSIONS[0]
ALL_VERSIONS = MODERN_VERSIONS + LEGACY_VERSIONS

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"


class Era(StrEnum):
    """The two families of revisions we serve, which the engines and transports tell apart."""

    # 2026-07-28: no session; _meta per request; asks end the attempt with input_required.
    MODERN = "modern"
    # 2025-11-25 and earlier: a session; asks are server-to-client requests while the handler waits.
    LEGACY = "legacy"


# The methods of 2026-07-28 (the core's; extensions add theirs: mcp_django.extensions).
MODERN_METHODS: set[str] = {
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
}


def era_of(message: Any, headers: dict[str, str] | None = None) -> Era:
    """The era of a message, for every transport.

    Over HTTP a session id or a legacy ``MCP-Protocol-Version`` says legacy; else 2026-07-28
    unless it is the handshake, a reply, or a legacy method without ``_meta``. Without headers
    (a socket, a pipe) it is 2026-07-28's only when its ``_meta`` names a version.
    """
    if headers is not None:
        if "mcp-session-id" in headers:
            return Era.LEGACY
        version = headers.get("mcp-protocol-version")
        if version is not None:
            return Era.LEGACY if version in LEGACY_VERSIONS else Era.MODERN
    if not isinstance(message, dict):
        return Era.MODERN if headers is not None else Era.LEGACY
    params = message.get("params")
    if headers is None:
        meta = params.get("_meta") if isinstance(params, dict) else None
        return Era.MODERN if isinstance(meta, dict) and META_VERSION in meta else Era.LEGACY
    if message.get("method") == "initialize" or ("method" not in message and "id" in message):
        return Era.LEGACY
    if isinstance(params, dict) and "_meta" not in params and message.get("method") not in MODERN_METHODS:
        return Era.LEGACY
    return Era.MODERN


# Methods whose params name a target, and the header that must repeat it.
NAMED_METHODS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # The tasks extension: Mcp-Name carries the task id, for routing to the task's state.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


@dataclass(frozen=True)
class ClientCapabilities:
    """What the client said it can answer, for this request (or session)."""

    raw: dict[str, Any] = field(default_factory=dict)

    def supports(self, capability: str) -> bool:
        """``"elicitation"``/``"elicitation.form"``, ``"elicitation.url"``, ``"sampling"``, ``"roots"``, ..."""
        head, _, sub = capability.partition(".")
        value = self.raw.get(head)
        if not isinstance(value, dict):
            return False
        if head == "elicitation":
            # `elicitation: {}` declares form mode only; `{url: {}}` alone is URL mode only.
            if sub in ("", "form"):
                return not value or "form" in value
            return sub in value
        return not sub or sub in value


class RequestMeta(NamedTuple):
    """A 2026-07-28 request's ``_meta``, as :func:`read_meta` read it (a named tuple: cheaper than a dataclass)."""

    version: str
    capabilities: ClientCapabilities
    client_info: dict[str, Any] | None
    log_level: str | None = None


def read_meta(params: dict[str, Any]) -> RequestMeta:
    """The 2026-07-28 per-request fields, present and well-formed (-32602); the version is
    checked after the headers (:func:`mcp_django.pipeline.check_request`), so a mismatch is reported first."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams("params._meta is required and must be an object")
    version = meta.get(META_VERSION)
    if not isinstance(version, str) or not version:
        raise InvalidParams(f"params._meta[{META_VERSION!r}] is required")
    caps = meta.get(META_CAPABILITIES)
    if not isinstance(caps, dict):
        raise InvalidParams(f"params._meta[{META_CAPABILITIES!r}] is required and must be an object")
    info = meta.get(META_CLIENT_INFO)
    level = meta.get(META_LOG_LEVEL)
    return RequestMeta(
        version,
        ClientCapabilities(caps),
        info if isinstance(info, dict) else None,
        level if isinstance(level, str) else None,
    )


def decode_header_value(value: str) -> str:
    """Header values outside ASCII arrive as ``=?base64?...?=``."""
    value = value.strip(" \t")
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise MCPError(HEADER_MISMATCH, "a header's base64 value does not decode") from None
    return value


def check_headers(headers: dict[str, str], method: str, params: dict[str, Any], meta: RequestMeta) -> None:
    """Headers must repeat what the body says (2026-07-28 Streamable HTTP)."""
    version = headers.get("mcp-protocol-version")
    if version is None:
        raise MCPError(HEADER_MISMATCH, "the MCP-Protocol-Version header is required")
    if version != meta.version:
        raise MCPError(HEADER_MISMATCH, "the MCP-Protocol-Version header does not match params._meta")
    header_method = headers.get("mcp-method")
    if header_method is None:
        raise MCPError(HEADER_MISMATCH, "the Mcp-Method header is required")
    if decode_header_value(header_method) != method:
        raise MCPError(HEADER_MISMATCH, "the Mcp-Method header does not match the request's method")
    field_name = NAMED_METHODS.get(method)
    if field_name is not None:
        header_name = headers.get("mcp-name")
        if header_name is None:
            raise MCPError(HEADER_MISMATCH, "the Mcp-Name header is required for " + method)
        if decode_header_value(header_name) != params.get(field_name):
            raise MCPError(HEADER_MISMATCH, f"the Mcp-Name header does not match params.{field_name}")


def check_param_headers(headers: dict[str, str], input_schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Arguments a tool mirrors into ``Mcp-Param-*`` headers must match them (-32020). Called only
    for a tool that mirrors one (``Handler.mirrors_headers``): its schema's properties are a dict."""
    for name, prop in input_schema["properties"].items():
        header = prop.get("x-mcp-header") if isinstance(prop, dict) else None
        if not isinstance(header, str):
            continue
        raw = headers.get("mcp-param-" + header.lower())
        if name not in arguments:
            if raw is not None:
                raise MCPError(HEADER_MISMATCH, f"the Mcp-Param-{header} header has no matching argument")
            continue
        if raw is None:
            raise MCPError(HEADER_MISMATCH, f"the Mcp-Param-{header} header is required")
        value = arguments[name]
        if decode_header_value(raw) != (str(value).lower() if isinstance(value, bool) else str(value)):
            raise MCPError(HEADER_MISMATCH, f"the Mcp-Param-{header} header does not match arguments.{name}")
