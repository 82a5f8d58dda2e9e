"""Tools with typed parameters, results and elicitations (prefix typetest_), on the default registry."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from decimal import Decimal
from typing import Annotated, Any, TypedDict

import pydantic

from mcp_django import Context, mcp


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclasses.dataclass
class Address:
    street: str
    city: str
    country: str = "FR"


class Point(TypedDict):
    x: int
    y: int


class Customer(pydantic.BaseModel):
    name: str
    vip: bool = False


@dataclasses.dataclass
class Receipt:
    """What typetest_order received, and the types it received them as."""

    total: Decimal
    when: datetime.date
    ref: uuid.UUID
    priority: Priority
    received: dict[str, str]


def _kind(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{','.join(_kind(v) for v in value)}]"
    if isinstance(value, dict) and not isinstance(value, str):
        return "dict{" + ",".join(f"{k}:{_kind(v)}" for k, v in value.items()) + "}"
    return type(value).__name__


@mcp.tool()
def typetest_order(
    priority: Priority,
    when: datetime.date,
    at: datetime.datetime,
    slot: datetime.time,
    ref: uuid.UUID,
    amount: Decimal,
    size: tuple[int, int],
    address: Address,
    point: Point,
    tags: list[Priority],
    history: dict[str, list[datetime.date]],
    customer: Customer,
    note: Annotated[str | None, "A note for the courier."] = None,
    code: int | Address = 0,
) -> Receipt:
    """Places an order; says what type each argument arrived as.

    Args:
        priority: How urgent the order is.
        when: The delivery day.
    """
    received = {name: _kind(value) for name, value in locals().items()}
    received["address"] = repr(address)
    received["customer"] = repr(customer)
    return Receipt(total=amount * 2, when=when, ref=ref, priority=priority, received=received)


@dataclasses.dataclass
class Trip:
    destination: str
    nights: int
    budget: str = "medium"
    start: datetime.date | None = None


@mcp.tool()
async def typetest_elicit_dataclass(ctx: Context) -> str:
    """Asks for a Trip (a dataclass): the answer arrives as a Trip, defaults filled."""
    result = await ctx.elicit("Where to?", Trip, key="trip")
    return repr(result.data) if result else result.action


class Contact(TypedDict):
    name: str
    age: int


@mcp.tool()
async def typetest_elicit_typeddict(ctx: Context) -> str:
    """Asks for a Contact (a TypedDict): the answer arrives as a checked dict."""
    result = await ctx.elicit("Who?", Contact, key="contact")
    return repr(result.data) if result else result.action


@mcp.prompt()
def typetest_prompt(count: int, day: datetime.date, priority: Priority = Priority.LOW) -> str:
    """A prompt whose string arguments arrive as an int, a date and an enum."""
    return f"{count + 1} {day.isoformat()} {priority.name}"


@mcp.resource("typetest://orders/{order_id}/{day}", mime_type="application/json")
def typetest_order_resource(order_id: int, day: datetime.date) -> dict[str, Any]:
    """A template whose URI variables arrive as an int and a date."""
    return {"next": order_id + 1, "weekday": day.strftime("%A")}
