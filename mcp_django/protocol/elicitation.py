"""Elicitation requests fitted to the revision a legacy session negotiated.

A 2025-06-18 client rejects a whole request that uses 2025-11-25's additions, so for it ``mode``
is dropped, ``default`` kept only on booleans and a titled single-select (``oneOf``) said as
``enum`` + ``enumNames``; what has no older form (a multi-select) is refused, named, before sending.
"""

from __future__ import annotations

from typing import Any

from .jsonrpc import INTERNAL_ERROR, MCPError

# The first revision whose elicitation schemas are sent unchanged.
NATIVE_SINCE = "2025-11-25"

# What a 2025-06-18 primitive schema may carry, by type (its PrimitiveSchemaDefinition).
_ALLOWED = {
    "string": {"type", "title", "description", "minLength", "maxLength", "format", "enum", "enumNames"},
    "number": {"type", "title", "description", "minimum", "maximum"},
    "integer": {"type", "title", "description", "minimum", "maximum"},
    "boolean": {"type", "title", "description", "default"},
}
_FORMATS = {"email", "uri", "date", "date-time"}


def fit_elicitation(params: dict[str, Any], version: str) -> dict[str, Any]:
    """``params`` of an ``elicitation/create`` as a session on ``version`` can read them."""
    if version >= NATIVE_SINCE:
        return params
    if params.get("mode", "form") != "form":
        raise MCPError(INTERNAL_ERROR, f"URL elicitation needs protocol 2025-11-25; this session speaks {version}")
    schema = params.get("requestedSchema")
    out = {k: v for k, v in params.items() if k != "mode"}
    if isinstance(schema, dict):
        out["requestedSchema"] = _fit_schema(schema, version)
    return out


def _fit_schema(schema: dict[str, Any], version: str) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    unsupported: list[str] = []
    fitted: dict[str, Any] = {}
    for name, prop in properties.items():
        try:
            fitted[name] = _fit_property(prop)
        except ValueError as exc:
            unsupported.append(f"{name} ({exc})")
    if unsupported:
        raise MCPError(
            INTERNAL_ERROR,
            f"this elicitation form cannot be sent to a {version} client: {', '.join(unsupported)} "
            "needs protocol 2025-11-25",
            {"protocolVersion": version, "unsupported": sorted(unsupported)},
        )
    return {k: fitted if k == "properties" else v for k, v in schema.items() if k in ("type", "properties", "required")}


def _fit_property(prop: Any) -> dict[str, Any]:
    if not isinstance(prop, dict):
        raise ValueError("not a schema object")
    json_type = prop.get("type")
    if json_type == "array":
        raise ValueError("a multi-select enum")
    if json_type == "string" and isinstance(prop.get("oneOf"), list):
        # A titled single-select (SEP-1330): the older enum + enumNames says the same.
        options = prop["oneOf"]
        if not all(isinstance(o, dict) and isinstance(o.get("const"), str) for o in options):
            raise ValueError("a oneOf whose options are not string consts")
        prop = {k: v for k, v in prop.items() if k != "oneOf"}
        prop["enum"] = [o["const"] for o in options]
        prop["enumNames"] = [str(o.get("title", o["const"])) for o in options]
    allowed = _ALLOWED.get(json_type) if isinstance(json_type, str) else None
    if allowed is None:
        raise ValueError(f"type {json_type!r}")
    out = {k: v for k, v in prop.items() if k in allowed}
    if out.get("format") is not None and out["format"] not in _FORMATS:
        del out["format"]
    return out
