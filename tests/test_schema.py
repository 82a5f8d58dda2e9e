"""JSON schemas derived from Python, and the validator (jsonschema-rs) that checks schemas given as dicts."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import re
from typing import Annotated, Any, Literal, TypedDict

import pydantic
import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework import serializers

from mcp_django import schema
from mcp_django.checks import handler_problems
from mcp_django.protocol.jsonrpc import dumps, loads
from mcp_django.registry import Registry
from mcp_django.schema import ArgumentsInvalid
from mcp_django.schema.drf import DECIMAL_PATTERN


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

    s = schema.Parameters(tool, skip={"ctx"}).schema
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


def test_invalid_schema_is_refused_by_the_check_and_its_first_call() -> None:
    """Registration refuses only what is no JSON object; compiling (jsonschema-rs, imported then)
    is left to ``manage.py check`` (E016) and the first call, each refusing a schema the draft's
    meta-schema refuses."""
    registry = Registry()
    for not_an_object in ([{"type": "object"}], {"type": "object", "default": object()}):
        with pytest.raises(ImproperlyConfigured, match=r"'shapeless'.*input_schema is"):
            registry.tool(name="shapeless", input_schema=not_an_object)(lambda **kwargs: None)

    @registry.tool(name="broken", input_schema={"type": "object", "properties": {"a": {"type": "nonsense"}}})
    def broken(**kwargs: Any) -> None: ...

    @registry.tool(name="fine", input_schema={"type": "object", "properties": {"a": {"type": "string"}}})
    def fine(**kwargs: Any) -> None: ...

    errors = handler_problems(registry)
    assert [e.id for e in errors] == ["mcp_django.E016"]
    assert "tool 'broken': input_schema is not a valid JSON schema" in errors[0].msg
    with pytest.raises(ImproperlyConfigured, match=r"'broken'.*not a valid JSON schema"):
        registry.tools["broken"].parameters.convert({"a": "x"})
    assert registry.tools["fine"].parameters.convert({"a": "x"}) == {"a": "x"}
    with pytest.raises(ArgumentsInvalid):
        registry.tools["fine"].parameters.convert({"a": 1})


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


class Opaque:
    """A class with no JSON form."""


def test_unsupported_annotation_is_an_error_at_registration() -> None:
    registry = Registry()
    with pytest.raises(ImproperlyConfigured, match=r"tool 'opaque' .*parameter 'thing'.*Opaque cannot be described"):

        @registry.tool(name="opaque")
        def opaque(ctx: Any, thing: Opaque) -> None: ...

    with pytest.raises(ImproperlyConfigured, match=r"parameter 'when'.*more than one str-like type"):

        @registry.tool()
        def ambiguous(when: str | datetime.date) -> None: ...

    with pytest.raises(ImproperlyConfigured, match=r"parameter 'later'.*'DefinedNowhere' could not be resolved"):

        @registry.tool()
        def unresolved(later: DefinedNowhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    assert not registry.tools


def test_docstring_styles_describe_parameters() -> None:
    def google(a: int, b: str) -> None:
        """Do it.

        Args:
            a: The a,
                on two lines.
            b (str): The b.
        """

    def numpy(a: int) -> None:
        """Do it.

        Parameters
        ----------
        a : int
            The a.
        """

    def sphinx(a: int) -> None:
        """Do it.

        :param a: The a.
        """

    assert schema.Parameters(google).schema["properties"] == {
        "a": {"type": "integer", "description": "The a, on two lines."},
        "b": {"type": "string", "description": "The b."},
    }
    assert schema.Parameters(numpy).schema["properties"]["a"]["description"] == "The a."
    assert schema.Parameters(sphinx).schema["properties"]["a"]["description"] == "The a."


def test_annotated_keywords_are_enforced() -> None:
    def tool(
        code: Annotated[str, {"pattern": "^[A-Z]{3}$", "description": "A code."}],
        mail: Annotated[str, {"format": "email"}] = "a@b.co",
        tags: Annotated[list[str], {"uniqueItems": True}] = (),  # type: ignore[assignment]
        n: Annotated[int, {"minimum": 1, "maximum": 9}] = 1,
        e: schema.Email = "x@y.co",
    ) -> None: ...

    params = schema.Parameters(tool)
    assert params.schema["properties"]["code"] == {"type": "string", "pattern": "^[A-Z]{3}$", "description": "A code."}
    assert params.convert({"code": "ABC"}) == {"code": "ABC"}
    for bad, says in [
        ({"code": "abc"}, "code: Expected `str` matching regex"),
        ({"code": "ABC", "mail": "nope"}, 'mail: "nope" is not a "email"'),
        ({"code": "ABC", "tags": ["a", "a"]}, "tags: "),
        ({"code": "ABC", "n": 10}, "n: Expected `int` <= 9"),
        ({"code": "ABC", "e": "nope"}, "e: Expected `str` matching regex"),
    ]:
        with pytest.raises(schema.ArgumentsInvalid, match=re.escape(says)):
            params.convert(bad)


class Item(pydantic.BaseModel):
    sku: str = pydantic.Field(description="Stock unit.")
    qty: int = 1


def test_pydantic_fields_and_models() -> None:
    def tool(item: Item, n: Annotated[int, pydantic.Field(ge=2, description="How many.")] = 2) -> Item:
        return item

    params = schema.Parameters(tool)
    props = params.schema["properties"]
    assert props["item"]["properties"]["sku"]["description"] == "Stock unit."
    assert props["n"] == {"type": "integer", "minimum": 2, "description": "How many.", "default": 2}
    assert params.convert({"item": {"sku": "A"}}) == {"item": Item(sku="A", qty=1)}
    with pytest.raises(schema.ArgumentsInvalid, match="n: Expected `int` >= 2"):
        params.convert({"item": {"sku": "A"}, "n": 1})
    assert schema.output_schema(tool)["properties"]["qty"]["default"] == 1


@dataclasses.dataclass
class Line:
    price: decimal.Decimal
    day: datetime.date
    color: Color
    pair: tuple[int, int] = (1, 2)


def test_results_serialise_back() -> None:
    from mcp_django import content

    result = content.tool_result(Line(decimal.Decimal("9.90"), datetime.date(2026, 1, 2), Color.BLUE))
    assert loads(dumps(result["structuredContent"])) == {
        "price": "9.90",
        "day": "2026-01-02",
        "color": "blue",
        "pair": [1, 2],
    }
    assert content.tool_result(decimal.Decimal("1.10"))["content"][0]["text"] == '"1.10"'
    assert content.tool_result(OrderSerializer({"email": "a@b.co", "size": "s", "qty": 2, "id": 1}))[
        "structuredContent"
    ] == {"id": 1, "email": "a@b.co", "size": "s", "qty": 2, "note": None}
    with pytest.raises(TypeError, match="Opaque"):
        content.tool_result({"x": Opaque()})


def test_output_schema_from_return_annotations() -> None:
    def dc() -> Line: ...
    def td() -> Point: ...
    def ser() -> OrderSerializer: ...
    def text() -> str: ...

    assert schema.output_schema(dc)["properties"]["price"] == {"type": ["number", "string"], "pattern": DECIMAL_PATTERN}
    assert schema.output_schema(td)["required"] == ["x", "y"]
    assert "id" in schema.output_schema(ser)["properties"]
    assert schema.output_schema(text) is None


@dataclasses.dataclass
class Described:
    name: Annotated[str, "Who it is for."]
    size: Annotated[int, pydantic.Field(description="How big.")] = 1


@dataclasses.dataclass
class Constrained:
    n: Annotated[int, {"minimum": 1}]


def test_fields_of_dataclasses_keep_descriptions_and_refuse_dropped_constraints() -> None:
    """msgspec reads only msgspec.Meta inside a class: text is added here, a constraint it would drop refused."""
    props = schema.type_schema(Described)["properties"]
    assert props["name"] == {"type": "string", "description": "Who it is for."}
    assert props["size"]["description"] == "How big."
    with pytest.raises(ImproperlyConfigured, match=r"field Constrained\.n: a constraint .* msgspec\.Meta"):
        schema.type_schema(Constrained)


def test_jsonschema_rs_is_imported_with_the_first_dict_schema_used() -> None:
    """A project whose schemas all come from types never loads jsonschema-rs (about 10 MiB with
    its first compile): registering and calling a typed tool does not import it; registering a
    dict schema does not either, its first call does."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    code = textwrap.dedent(
        """
        import sys
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes"])
        django.setup()
        from mcp_django.registry import Registry

        registry = Registry()

        @registry.tool()
        def add(a: int, b: int = 2) -> int:
            "Adds."
            return a + b

        assert registry.tools["add"].parameters.convert({"a": 1})["a"] == 1
        before = "jsonschema_rs" in sys.modules
        registry.tool(name="given", input_schema={"type": "object", "properties": {"a": {"type": "integer"}}})(
            lambda a: a
        )
        registered = "jsonschema_rs" in sys.modules
        assert registry.tools["given"].parameters.convert({"a": 1}) == {"a": 1}
        print(before, registered, "jsonschema_rs" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True"]


def test_kwargs_handler_takes_arguments_it_does_not_name() -> None:
    """``**kwargs`` opens the schema (no ``additionalProperties: false``) and receives the unnamed arguments."""

    def tool(a: int, **rest: Any) -> None: ...

    params = schema.Parameters(tool)
    assert "additionalProperties" not in params.schema
    assert params.convert({"a": 1, "colour": "red", "n": 2}) == {"a": 1, "colour": "red", "n": 2}


def test_pydantic_field_as_a_default_gives_default_and_description() -> None:
    def tool(n: int = pydantic.Field(3, description="How many."), sku: str = pydantic.Field(description="Which.")):
        return n

    params = schema.Parameters(tool)
    props = params.schema["properties"]
    assert props["n"] == {"type": "integer", "description": "How many.", "default": 3}
    assert props["sku"] == {"type": "string", "description": "Which."}
    assert params.schema["required"] == ["sku"]  # a Field with no default is required


def tool_taking_an_order(order: OrderSerializer) -> None: ...


def test_serializer_as_a_parameter_is_described_by_its_schema() -> None:
    order = schema.Parameters(tool_taking_an_order).schema["properties"]["order"]
    assert order["required"] == ["email", "size"]
    assert "id" not in order["properties"]
    assert order["properties"]["size"]["enum"] == ["s", "m", "l"]


def test_serializer_as_a_parameter_is_checked_and_passed_as_a_dict() -> None:
    """docs/index.md: the argument is checked against the serializer's schema and passed as a dict
    (msgspec 0.22 refused the dict its dec_hook returned for a serializer class)."""
    params = schema.Parameters(tool_taking_an_order)
    with pytest.raises(ArgumentsInvalid, match="xl"):
        params.convert({"order": {"email": "a@b.co", "size": "xl"}})
    sent = {"email": "a@b.co", "size": "m"}
    assert params.convert({"order": sent}) == {"order": sent}


def test_content_blocks_results_and_prompt_messages() -> None:
    from mcp_django import content

    assert content.tool_result(None) == {"content": []}
    assert content.tool_result(content.Audio(b"RIFF", "audio/wav")) == {
        "content": [{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]
    }
    link = content.ResourceLink("file:///a.txt", "a.txt", mime_type="text/plain")
    given = {"type": "text", "text": "as given"}
    assert content.tool_result([link, given]) == {
        "content": [
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "mimeType": "text/plain"},
            given,
        ]
    }
    # Structured content with no blocks: its JSON is the text a client without structuredContent reads.
    assert content.tool_result(content.ToolResult(structured={"n": 1})) == {
        "content": [{"type": "text", "text": '{"n":1}'}],
        "structuredContent": {"n": 1},
    }
    assert content.tool_result(content.ToolResult(content=[given, {"n": 2}])) == {
        "content": [given, {"type": "text", "text": '{"n":2}'}]
    }
    assert content.prompt_messages([{"role": "assistant", "content": "Hi."}, "Hello?"]) == [
        {"role": "assistant", "content": {"type": "text", "text": "Hi."}},
        {"role": "user", "content": {"type": "text", "text": "Hello?"}},
    ]


@pytest.mark.django_db
def test_a_serializer_argument_reaches_the_tool_checked_and_as_a_dict() -> None:
    """Through the in-process client, both revisions: the argument is checked before the tool runs, and
    the tool gets a dict (msgspec 0.22 refused one for a serializer annotation: every call failed)."""
    from mcp_django import mcp
    from mcp_django.protocol.revisions import LATEST_LEGACY
    from mcp_django.testing import MCPClient

    got: list[Any] = []

    @mcp.tool(name="schematest_order", allow_anonymous=True)
    def schematest_order(order: OrderSerializer) -> str:
        got.append(order)
        return f"{order['qty']} x {order['size']} for {order['email']}"

    try:
        for client in (MCPClient(), MCPClient(revision=LATEST_LEGACY)):
            refused = client.call_tool("schematest_order", {"order": {"email": "a@b.co", "size": "xl"}})
            assert refused.is_error and "xl" in refused.text and not got
            done = client.call_tool("schematest_order", {"order": {"email": "a@b.co", "size": "m", "qty": 2}})
            assert done.text == "2 x m for a@b.co"
            assert isinstance(got[-1], dict) and got.pop() == {"email": "a@b.co", "size": "m", "qty": 2}
            client.close()
    finally:
        mcp.remove("tools", "schematest_order")
