"""Enum schemas, however the choices come: DRF and django-filter choices, ``Enum``, ``Literal``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def is_json_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def enum_type(values: list[Any]) -> str | None:
    """``"string"`` or ``"integer"`` when every value is one, else None (a boolean is not an integer)."""
    if all(isinstance(v, str) for v in values):
        return "string"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "integer"
    return None


def enum_schema(choices: Iterable[Any]) -> dict[str, Any]:
    """``{"enum": [...]}`` of ``choices`` as JSON data (lazy text, a Decimal as text), with the type they share."""
    values = [c if is_json_scalar(c) else str(c) for c in choices]
    schema: dict[str, Any] = {"enum": values}
    json_type = enum_type(values)
    if json_type is not None:
        schema["type"] = json_type
    return schema


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also allows null: ``"null"`` joins its type, and None its enum."""
    out = dict(schema)
    json_type = out.get("type")
    if isinstance(json_type, str):
        out["type"] = [json_type, "null"]
    elif isinstance(json_type, list) and "null" not in json_type:
        out["type"] = [*json_type, "null"]
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out
