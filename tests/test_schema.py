"""JSON schemas derived from Python, and the validator that checks arguments and answers."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Literal, TypedDict

from rest_framework import serializers

from mcp_django import schema
from mcp_django.registry import Registry


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


def test_signature_schema() -> None:
    def tool(
        ctx: object,
        a: int,
        b: Annotated[str, "the b"],
        c: float = 1.5,
        d: bool | None = None,
        e: Literal["x", "y"] = "x",
        f: list[Point] | None = None,
        g: Color = Color.RED,
    ) -> None: ...

    s = schema.signature_schema(tool, skip={"ctx"})
    assert s["required"] == ["a", "b"]
    props = s["properties"]
    assert props["a"] == {"type": "integer"}
    assert props["b"] == {"type": "string", "description": "the b"}
    assert props["c"] == {"type": "number", "default": 1.5}
    assert props["d"] == {"type": ["boolean", "null"], "default": None}
    assert props["e"] == {"type": "string", "enum": ["x", "y"], "default": "x"}
    assert props["f"]["type"] == ["array", "null"]
    assert props["f"]["items"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
    }
    assert props["g"] == {"enum": ["red", "blue"], "type": "string"}


def test_recursive_types_terminate() -> None:
    s = schema.type_schema(Node)
    assert s["properties"]["children"]["items"] == {"type": "object"}


class OrderSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    email = serializers.EmailField()
    size = serializers.ChoiceField(choices=["s", "m", "l"])
    qty = serializers.IntegerField(min_value=1, max_value=9, default=1)
    note = serializers.CharField(max_length=20, required=False, allow_null=True)


def test_serializer_schema() -> None:
    s = schema.serializer_schema(OrderSerializer)
    assert "id" not in s["properties"]
    assert s["required"] == ["email", "size"]
    assert s["properties"]["qty"] == {"type": "integer", "minimum": 1, "maximum": 9, "title": "Qty", "default": 1}
    assert s["properties"]["size"]["enum"] == ["s", "m", "l"]
    assert s["properties"]["note"]["type"] == ["string", "null"]
    out = schema.serializer_schema(OrderSerializer, for_output=True)
    assert "id" in out["properties"] and "required" not in out


def test_validate() -> None:
    s = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "t": {"enum": ["a"]}},
        "required": ["n"],
        "additionalProperties": False,
    }
    assert schema.validate({"n": 1, "t": "a"}, s) == []
    assert schema.validate({"n": -1}, s) == ["n: must be >= 0"]
    assert schema.validate({"t": "b", "z": 1}, s) == [
        "n: this field is required",
        "t: must be one of ['a']",
        "z: unexpected property",
    ]
    assert schema.validate({"n": True}, s) == ["n: expected integer"]
    ref = {"$defs": {"a": {"type": "string"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}}
    assert schema.validate({"x": 1}, ref) == ["x: expected string"]


def test_registry_names_and_context_parameter() -> None:
    registry = Registry()

    @registry.tool()
    async def annotated(context: schema.Any, n: int) -> int:
        return n

    from mcp_django import Context

    @registry.tool(name="custom")
    def with_ctx(c: Context, n: int) -> int:
        return n

    assert registry.tools["custom"].context_param == "c"
    assert "c" not in registry.tools["custom"].input_schema["properties"]
    assert registry.tools["annotated"].context_param is None
