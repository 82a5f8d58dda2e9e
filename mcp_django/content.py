"""What handlers return: content blocks, tool results and prompt messages."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

from .protocol.jsonrpc import dumps
from .schema.types import to_jsonable

__all__ = ["Audio", "EmbeddedResource", "Image", "Message", "ResourceLink", "Text", "ToolError", "ToolResult"]


class ToolError(Exception):
    """Raise in a tool to answer ``isError: true`` with this message."""


@dataclass
class Text:
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass
class Image:
    data: bytes | str
    mime_type: str = "image/png"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass
class Audio:
    data: bytes | str
    mime_type: str = "audio/wav"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass
class EmbeddedResource:
    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "resource",
            "resource": resource_contents(self.uri, self.text if self.blob is None else self.blob, self.mime_type),
        }


@dataclass
class ResourceLink:
    uri: str
    name: str
    mime_type: str | None = None
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        optional = {"mimeType": self.mime_type, "description": self.description}
        return {"type": "resource_link", "uri": self.uri, "name": self.name, **{k: v for k, v in optional.items() if v}}


@dataclass
class ToolResult:
    """Full control over a tool's answer."""

    content: list[Any] = field(default_factory=list)
    structured: dict[str, Any] | None = None
    is_error: bool = False


@dataclass
class Message:
    """One prompt message."""

    content: Any
    role: Literal["user", "assistant"] = "user"

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": content_block(self.content)}


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def resource_contents(uri: str, value: Any, mime_type: str | None) -> dict[str, Any]:
    """One entry of ``resources/read`` contents (or an embedded resource)."""
    out: dict[str, Any] = {"uri": uri}
    if isinstance(value, (bytes, bytearray, memoryview)):
        out["mimeType"] = mime_type or "application/octet-stream"
        out["blob"] = base64.b64encode(bytes(value)).decode("ascii")
        return out
    if not isinstance(value, str):
        value = dumps(to_jsonable(value)).decode()
        mime_type = mime_type or "application/json"
    out["mimeType"] = mime_type or "text/plain"
    out["text"] = value
    return out


def content_block(value: Any) -> dict[str, Any]:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, dict) and "type" in value:
        return value
    if isinstance(value, str):
        return {"type": "text", "text": value}
    return {"type": "text", "text": dumps(to_jsonable(value)).decode()}


def tool_result(value: Any) -> dict[str, Any]:
    """The ``tools/call`` result for what a tool returned; an object is also ``structuredContent``."""
    if isinstance(value, ToolResult):
        out: dict[str, Any] = {"content": [content_block(c) for c in value.content]}
        if value.structured is not None:
            out["structuredContent"] = value.structured = to_jsonable(value.structured)
            if not value.content:
                out["content"] = [{"type": "text", "text": dumps(value.structured).decode()}]
        if value.is_error:
            out["isError"] = True
        return out
    if value is None:
        return {"content": []}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    if hasattr(value, "to_dict"):
        return {"content": [value.to_dict()]}
    if (
        isinstance(value, (list, tuple))
        and value
        and all(hasattr(v, "to_dict") or (isinstance(v, dict) and "type" in v) for v in value)
    ):
        return {"content": [content_block(v) for v in value]}
    value = to_jsonable(value)
    text = dumps(value).decode()
    out = {"content": [{"type": "text", "text": text}]}
    if isinstance(value, dict):
        out["structuredContent"] = value
    return out


def error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def prompt_messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, (str, Message)) or (isinstance(value, dict) and "role" in value):
        value = [value]
    out = []
    for item in value:
        if isinstance(item, dict) and "role" in item:
            item = Message(item["content"], item["role"])
        out.append((item if isinstance(item, Message) else Message(item)).to_dict())
    return out
