"""JSON schemas derived from Python, and the validator (jsonschema-rs) that checks schemas given as dicts."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, TypedDict

import pytest
from django.core.exceptions import ImproperlyConfigured
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
        e: Literal["y", "x"] = "x",
        f: list[Point] | None = None,
        g: Color = Color.RED,
    ) -> None: ...

    s = schema.signature_schema(tool, skip={"ctx"})
    assert s["required"] == ["a", "b"]
    assert s["additionalProperties"] is False
    props = s["properties"]
    assert props["a"] == {"type": "integer"}
    assert props["b"] == {"type": "string", "description": "the b"}
    assert props["c"] == {"type": "number", "default": 1.5}
    assert props["d"] == {"type": ["boolean", "null"], "default": None}
    # Choices keep the order the code declares them in.
    assert props["e"] == {"type": "string", "enum": ["y", "x"], "default": "x"}
    assert props["f"]["type"] == ["array", "null"]
    assert props["f"]["items"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
    }
    assert props["g"] == {"enum": ["red", "blue"], "type": "string", "default": "red"}


def test_recursive_types_use_defs() -> None:
    s = schema.type_schema(Node)
    assert s["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert s["$defs"]["Node"]["properties"]["name"] == {"type": "string"}
    assert schema.validate({"name": "a", "children": [{"name": "b", "children": [{"name": 3}]}]}, s) == [
        'children[0].children[0].name: 3 is not of type "string"'
    ]


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
    assert schema.validate({"n": -1}, s) == ["n: -1 is less than the minimum of 0"]
    assert len(schema.validate({"t": "b", "z": 1}, s)) == 3
    assert schema.validate({"n": True}, s) == ['n: true is not of type "integer"']
    ref = {"$defs": {"a": {"type": "string"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}}
    assert schema.validate({"x": 1}, ref) == ['x: 1 is not of type "string"']


@pytest.mark.parametrize(
    ("keyword_schema", "bad", "good"),
    [
        ({"type": "string", "pattern": "^[A-Z]{3}$"}, "abc", "ABC"),
        ({"type": "string", "format": "date"}, "2026-13-45", "2026-05-01"),
        ({"type": "string", "format": "uuid"}, "nope", "2b1e2f0c-6a1d-4a53-9a34-4b7f0d8e6b11"),
        ({"type": "string", "format": "email"}, "nope", "ada@example.com"),
        ({"if": {"minimum": 10}, "then": {"multipleOf": 10}}, 15, 20),
        ({"type": "array", "uniqueItems": True}, [1, 1], [1, 2]),
        ({"type": "number", "exclusiveMinimum": 0}, 0, 1),
        ({"type": "integer", "multipleOf": 3}, 4, 6),
        ({"not": {"type": "string"}}, "x", 1),
        ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}, ["a", 1], [1, "a"]),
        ({"type": "object", "patternProperties": {"^n_": {"type": "integer"}}}, {"n_a": "x"}, {"n_a": 1}),
        ({"type": "object", "minProperties": 1}, {}, {"a": 1}),
        ({"enum": [1]}, True, 1),
    ],
)
def test_validator_checks_every_keyword(keyword_schema: dict[str, Any], bad: Any, good: Any) -> None:
    """The keywords the hand-written validator skipped (and ``true`` passing ``enum: [1]``)."""
    s = {"type": "object", "properties": {"v": keyword_schema}, "required": ["v"]}
    assert schema.validate({"v": good}, s) == []
    assert schema.validate({"v": bad}, s)[0].startswith(("v: ", "v.", "v["))


def test_invalid_schema_is_refused_at_registration() -> None:
    registry = Registry()
    with pytest.raises(ImproperlyConfigured, match=r"'broken'.*not a valid JSON schema"):

        @registry.tool(name="broken", input_schema={"type": "object", "properties": {"a": {"type": "nonsense"}}})
        def broken(**kwargs: Any) -> None: ...


def test_registry_names_and_context_parameter() -> None:
    registry = Registry()

    @registry.tool()
    async def annotated(context: Any, n: int) -> int:
        return n

    from mcp_django import Context

    @registry.tool(name="custom")
    def with_ctx(c: Context, n: int) -> int:
        return n

    assert registry.tools["custom"].context_param == "c"
    assert "c" not in registry.tools["custom"].input_schema["properties"]
    assert registry.tools["annotated"].context_param is None
