"""Arguments, results and elicitation answers arrive as their declared types, through the official SDK client.

Every test runs on 2026-07-28 and on a legacy session: conversion happens in
dispatch, before either round engine runs the handler.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types
import pytest
from mcp import MCPError

import tests.typed_tools  # noqa: F401 - registers the typetest_ tools
from mcp_django.schema.drf import DECIMAL_PATTERN
from tests.conftest import MODERN, Raw, sdk_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

ERAS = pytest.mark.parametrize("mode", [MODERN, "legacy"])

ORDER: dict[str, Any] = {
    "priority": "high",
    "when": "2026-05-01",
    "at": "2026-05-01T10:30:00Z",
    "slot": "10:30:00",
    "ref": "2b1e2f0c-6a1d-4a53-9a34-4b7f0d8e6b11",
    "amount": "12.50",
    "size": [3, 4],
    "address": {"street": "1 rue de Rivoli", "city": "Paris"},
    "point": {"x": 1, "y": 2},
    "tags": ["low", "high"],
    "history": {"spring": ["2026-03-01"]},
    "customer": {"name": "Ada"},
}


@ERAS
async def test_arguments_arrive_as_declared_types(live_url: str, mode: str) -> None:
    async with sdk_client(live_url, mode=mode) as client:
        result = await client.call_tool("typetest_order", ORDER)
    assert not result.is_error, result.content
    received = result.structured_content["received"]
    assert received["priority"] == "Priority"
    assert received["when"] == "date"
    assert received["at"] == "datetime"
    assert received["slot"] == "time"
    assert received["ref"] == "UUID"
    assert received["amount"] == "Decimal"
    assert received["size"] == "tuple[int,int]"
    # A dataclass, its default filled; a TypedDict, checked; a Pydantic model.
    assert received["address"] == "Address(street='1 rue de Rivoli', city='Paris', country='FR')"
    assert received["point"] == "dict{x:int,y:int}"
    assert received["customer"] == "Customer(name='Ada', vip=False)"
    assert received["tags"] == "list[Priority,Priority]"
    assert received["history"] == "dict{spring:list[date]}"
    assert received["note"] == "NoneType"
    assert received["code"] == "int"
    # The result serialises back: a Decimal keeps its digits, dates and UUIDs as strings, an enum as its value.
    assert {k: v for k, v in result.structured_content.items() if k != "received"} == {
        "total": "25.00",
        "when": "2026-05-01",
        "ref": "2b1e2f0c-6a1d-4a53-9a34-4b7f0d8e6b11",
        "priority": "high",
    }


@ERAS
async def test_union_of_int_and_dataclass(live_url: str, mode: str) -> None:
    async with sdk_client(live_url, mode=mode) as client:
        result = await client.call_tool("typetest_order", {**ORDER, "code": {"street": "s", "city": "c"}})
    assert result.structured_content["received"]["code"] == "Address"


@ERAS
@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("when", "2026-13-45", "when: Invalid RFC3339 encoded date"),
        ("ref", "not-a-uuid", "ref: Invalid UUID"),
        ("priority", "medium", "priority: Invalid enum value 'medium'"),
        ("size", [1, 2, 3], "size: Expected `array` of length 2, got 3"),
        ("address", {"city": "Paris"}, "address.street: this field is required"),
        ("point", {"x": 1, "y": "2"}, "point.y: Expected `int`, got `str`"),
        ("tags", ["low", "urgent"], "tags[1]: Invalid enum value 'urgent'"),
        ("amount", "twelve", "amount: Invalid decimal string"),
        ("customer", {"vip": True}, "customer: 1 validation error for Customer; name; Field required"),
        ("extra", 1, "extra: unexpected field"),
    ],
)
async def test_bad_arguments_name_the_field(live_url: str, mode: str, field: str, value: Any, says: str) -> None:
    async with sdk_client(live_url, mode=mode) as client:
        result = await client.call_tool("typetest_order", {**ORDER, field: value})
    assert result.is_error
    assert result.content[0].text.startswith("Invalid arguments for tool typetest_order: ")
    assert says in result.content[0].text


@ERAS
async def test_schemas_say_what_a_model_needs(live_url: str, mode: str) -> None:
    async with sdk_client(live_url, mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    tool = listed["typetest_order"]
    props = tool.input_schema["properties"]
    assert props["priority"] == {"enum": ["low", "high"], "type": "string", "description": "How urgent the order is."}
    assert props["when"] == {"type": "string", "format": "date", "description": "The delivery day."}
    assert props["at"]["format"] == "date-time"
    assert props["slot"]["format"] == "time"
    assert props["ref"]["format"] == "uuid"
    assert props["size"]["prefixItems"] == [{"type": "integer"}, {"type": "integer"}]
    assert props["address"]["properties"]["country"] == {"type": "string", "default": "FR"}
    assert props["address"]["required"] == ["street", "city"]
    assert props["note"]["description"] == "A note for the courier."
    assert props["note"]["default"] is None
    assert tool.input_schema["additionalProperties"] is False
    # The return annotation (a dataclass) is the output schema; structuredContent matches it.
    assert tool.output_schema["type"] == "object"
    assert tool.output_schema["properties"]["total"]["pattern"] == DECIMAL_PATTERN
    assert "format" not in tool.output_schema["properties"]["total"]
    assert tool.output_schema["required"] == ["total", "when", "ref", "priority", "received"]
    assert listed["typetest_elicit_dataclass"].output_schema is None


def answer_with(content: dict[str, Any]) -> Any:
    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        on_elicit.asked.append(params.requested_schema)  # type: ignore[attr-defined]
        return types.ElicitResult(action="accept", content=content)

    on_elicit.asked = []  # type: ignore[attr-defined]
    return on_elicit


@ERAS
async def test_elicit_dataclass_returns_instance_with_defaults(live_url: str, mode: str) -> None:
    on_elicit = answer_with({"destination": "Lisbon", "nights": 3, "start": "2026-06-01"})
    async with sdk_client(live_url, mode=mode, elicitation_callback=on_elicit) as client:
        result = await client.call_tool("typetest_elicit_dataclass")
    assert result.content[0].text == (
        "Trip(destination='Lisbon', nights=3, budget='medium', start=datetime.date(2026, 6, 1))"
    )
    async with sdk_client(
        live_url, mode=mode, elicitation_callback=answer_with({"destination": "Oslo", "nights": 1})
    ) as client:
        result = await client.call_tool("typetest_elicit_dataclass")
    assert result.content[0].text == "Trip(destination='Oslo', nights=1, budget='medium', start=None)"
    (schema,) = on_elicit.asked
    assert schema["required"] == ["destination", "nights"]
    assert schema["properties"]["budget"] == {"type": "string", "default": "medium"}
    # One type per field, as elicitation's primitive schemas have it: left empty, the default (None) applies.
    assert schema["properties"]["start"] == {"type": "string", "format": "date"}


@ERAS
async def test_elicit_typeddict_is_checked(live_url: str, mode: str) -> None:
    async with sdk_client(live_url, mode=mode, elicitation_callback=answer_with({"name": "Ada", "age": 36})) as client:
        result = await client.call_tool("typetest_elicit_typeddict")
    assert result.content[0].text == "{'name': 'Ada', 'age': 36}"


@ERAS
async def test_elicit_answer_of_the_wrong_type_is_asked_again(live_url: str, mode: str) -> None:
    messages: list[str] = []

    async def old_then_36(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        messages.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada", "age": "old" if len(messages) == 1 else 36})

    async with sdk_client(live_url, mode=mode, elicitation_callback=old_then_36) as client:
        result = await client.call_tool("typetest_elicit_typeddict")
    assert result.content[0].text == "{'name': 'Ada', 'age': 36}"
    assert len(messages) == 2 and "age: Expected `int`, got `str`" in messages[1]


@ERAS
async def test_prompt_arguments_arrive_as_declared_types(live_url: str, mode: str) -> None:
    async with sdk_client(live_url, mode=mode) as client:
        result = await client.get_prompt("typetest_prompt", {"count": "41", "day": "2026-05-01", "priority": "high"})
    assert result.messages[0].content.text == "42 2026-05-01 HIGH"


def test_a_prompt_argument_not_of_its_declared_type_is_invalid_params(raw_inprocess: Raw) -> None:
    params = {"name": "typetest_prompt", "arguments": {"count": "many", "day": "2026-05-01"}}
    error = raw_inprocess.post("prompts/get", params).json()["error"]
    assert error["code"] == -32602 and error["message"].startswith(
        "Invalid arguments for prompt typetest_prompt: count"
    )


async def test_demo_plan_trip_without_the_optional_budget(live_url: str) -> None:
    """The demo crashed with KeyError 'budget' when the client left that optional field out."""
    for mode in (MODERN, "legacy"):

        async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            if "confirm" in params.requested_schema["properties"]:
                return types.ElicitResult(action="accept", content={"confirm": True})
            return types.ElicitResult(action="accept", content={"destination": "Rome", "nights": 2})

        async def on_sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            assert "on a medium budget" in params.messages[0].content.text
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text="Eat."), model="m", stop_reason="endTurn"
            )

        async with sdk_client(live_url, mode=mode, elicitation_callback=on_elicit, sampling_callback=on_sample) as c:
            result = await c.call_tool("plan_trip", {"traveller": "Ada"})
        assert not result.is_error, (mode, result.content)
        assert result.content[0].text.startswith("Booked Ada to Rome"), mode


@ERAS
async def test_template_variables_arrive_as_declared_types(live_url: str, mode: str) -> None:
    async with sdk_client(live_url, mode=mode) as client:
        result = await client.read_resource("typetest://orders/41/2026-05-01")
        assert json.loads(result.contents[0].text) == {"next": 42, "weekday": "Friday"}
        with pytest.raises(MCPError) as caught:
            await client.read_resource("typetest://orders/forty-one/2026-05-01")
    assert caught.value.error.code == (-32602 if mode == MODERN else -32002)
    assert "order_id: Expected `int`, got `str`" in caught.value.error.message
