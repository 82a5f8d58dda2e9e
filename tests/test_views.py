"""Views as tools, through the official MCP SDK client against the live demo project."""

from __future__ import annotations

import os
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import mcp.types as types
import pytest
from django.contrib.auth.models import Permission, User
from mcp import MCPError
from rest_framework.authtoken.models import Token

from project.shop.models import Order, Product
from tests.conftest import sdk_client

pytestmark = pytest.mark.anyio


class Shop:
    """Two users with tokens, a few products, and a way to read rows from the test's thread."""

    def __init__(self) -> None:
        self.alice = User.objects.create_user("alice", password="x")
        self.bob = User.objects.create_user("bob", password="x")
        self.alice_token = Token.objects.create(user=self.alice).key
        self.bob_token = Token.objects.create(user=self.bob).key
        self.mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("9.50"), stock=3)
        self.tea = Product.objects.create(name="Tea", sku="TEA-01", price=Decimal("4.25"), stock=100)


@pytest.fixture
def shop(live_url: str) -> Shop:
    return Shop()


def orm(func: Callable[[], Any]) -> Any:
    """Run ORM code from a test body, on the test's own connection.

    The body runs on the SDK client's event loop, where Django refuses sync ORM calls.
    Nothing else runs on that loop meanwhile (the server has its own thread and loop),
    and another thread would need its own SQLite connection, which shared-cache
    in-memory databases lock against the server's.
    """
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "1"
    try:
        return func()
    finally:
        if before is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


def api(live_url: str) -> str:
    return live_url.rsplit("/mcp", 1)[0] + "/api"


def confirm_with(answer: bool, seen: list[str]) -> Any:
    async def callback(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": answer})

    return callback


async def test_tools_are_listed_with_schemas_for_what_the_caller_may_do(live_url: str, shop: Shop) -> None:
    async with sdk_client(live_url, token=shop.alice_token) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in (
        "orders_list",
        "orders_retrieve",
        "orders_create",
        "orders_update",
        "orders_partial_update",
        "orders_destroy",
        "orders_cancel",
        "orders_summary",
        "products_list",
        "products_retrieve",
    ):
        assert name in tools
    # DjangoModelPermissions: alice may not add or change products, so she is not shown those tools.
    assert not {"products_create", "products_update", "products_destroy", "stock_report"} & set(tools)
    create = tools["orders_create"].input_schema
    assert create["required"] == ["product", "quantity"]
    assert create["properties"]["quantity"]["minimum"] == 1 and create["properties"]["quantity"]["maximum"] == 100
    assert create["properties"]["shipping"]["enum"] == ["standard", "express"]
    assert "status" not in create["properties"] and "id" not in create["properties"]  # read-only
    listing = tools["orders_list"].input_schema["properties"]
    assert listing["status"]["enum"] == ["pending", "paid", "shipped", "cancelled"]  # django-filter
    assert {"search", "ordering", "page", "page_size", "min_quantity", "product"} <= set(listing)
    assert listing["page_size"]["maximum"] == 50
    out = tools["orders_retrieve"].output_schema
    assert out["properties"]["product_detail"]["properties"]["price"] == {
        "type": "string",
        "format": "decimal",
        "title": "Price",
    }
    assert tools["orders_destroy"].annotations.destructive_hint is True
    assert tools["orders_list"].annotations.read_only_hint is True

    orm(lambda: shop.bob.user_permissions.add(*Permission.objects.filter(codename__in=["add_product", "view_product"])))
    async with sdk_client(live_url, token=shop.bob_token) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert {"products_create", "stock_report"} <= names
    assert "products_destroy" not in names


async def test_two_users_each_work_on_their_own_orders(live_url: str, shop: Shop) -> None:
    async with sdk_client(live_url, token=shop.alice_token) as alice, sdk_client(live_url, token=shop.bob_token) as bob:
        created = await alice.call_tool("orders_create", {"product": shop.mug.pk, "quantity": 2, "note": "gift"})
        assert not created.is_error, created.content
        mine = created.structured_content
        assert mine["quantity"] == 2 and mine["status"] == "pending" and mine["total"] == "19.00"
        assert mine["product_detail"] == {"id": shop.mug.pk, "name": "Mug", "price": "9.50"}
        theirs = (await bob.call_tool("orders_create", {"product": shop.tea.pk, "quantity": 5})).structured_content

        alice_list = (await alice.call_tool("orders_list", {})).structured_content
        assert [o["id"] for o in alice_list["results"]] == [mine["id"]] and alice_list["count"] == 1
        bob_list = (await bob.call_tool("orders_list", {})).structured_content
        assert [o["id"] for o in bob_list["results"]] == [theirs["id"]]

        got = await alice.call_tool("orders_retrieve", {"pk": mine["id"]})
        assert got.structured_content["note"] == "gift"
        # Bob's order does not exist for Alice: the per-user queryset makes it a 404.
        stolen = await alice.call_tool("orders_retrieve", {"pk": theirs["id"]})
        assert stolen.is_error and stolen.content[0].text.startswith("Not found")
        assert stolen.structured_content["status"] == 404

        patched = await alice.call_tool("orders_partial_update", {"pk": mine["id"], "note": "for mum"})
        assert patched.structured_content["note"] == "for mum" and patched.structured_content["quantity"] == 2
        replaced = await alice.call_tool(
            "orders_update", {"pk": mine["id"], "product": shop.tea.pk, "quantity": 7, "shipping": "express"}
        )
        assert replaced.structured_content["product"] == shop.tea.pk
        # PUT as DRF does it: optional fields left out keep their values.
        assert replaced.structured_content["shipping"] == "express" and replaced.structured_content["note"] == "for mum"
        hijack = await bob.call_tool("orders_partial_update", {"pk": mine["id"], "note": "mine now"})
        assert hijack.is_error

        summary = await bob.call_tool("orders_summary", {})
        assert summary.structured_content == {"total": 1, "by_status": {"pending": 1}}
        # Alice cannot delete Bob's order even with a confirmation at hand.
        seen: list[str] = []
    async with sdk_client(live_url, token=shop.alice_token, elicitation_callback=confirm_with(True, seen)) as alice:
        gone = await alice.call_tool("orders_destroy", {"pk": theirs["id"]})
        assert gone.is_error and seen == []
    assert orm(lambda: Order.objects.get(pk=mine["id"]).note) == "for mum"
    assert orm(Order.objects.filter(pk=theirs["id"]).exists)


async def test_validation_errors_come_back_as_tool_errors_with_field_errors(live_url: str, shop: Shop) -> None:
    async with sdk_client(live_url, token=shop.alice_token) as client:
        # The serializer's own rule (stock in the database): DRF's field errors, as isError.
        result = await client.call_tool("orders_create", {"product": shop.mug.pk, "quantity": 4})
        assert result.is_error
        assert result.structured_content == {"status": 400, "errors": {"quantity": ["Only 3 of Mug in stock."]}}
        assert "quantity: Only 3 of Mug in stock." in result.content[0].text
        # An unknown product: the serializer's relation check.
        missing = await client.call_tool("orders_create", {"product": 999999, "quantity": 1})
        assert missing.is_error and "product" in missing.structured_content["errors"]
        # What the input schema says is checked before the view runs.
        schema_error = await client.call_tool("orders_create", {"product": shop.mug.pk, "quantity": 0})
        assert schema_error.is_error and "quantity" in schema_error.content[0].text
    assert not orm(Order.objects.exists)


async def test_permission_denials(live_url: str, shop: Shop) -> None:
    shipped = orm(
        lambda: Order.objects.create(owner=shop.alice, product=shop.tea, quantity=1, status=Order.Status.SHIPPED)
    )
    async with sdk_client(live_url, token=shop.alice_token) as client:
        # A tool the caller may not use is not listed, and calling it is refused as unknown.
        with pytest.raises(MCPError) as refused:
            await client.call_tool("products_create", {"name": "Pot", "sku": "POT-01", "price": 3})
        assert refused.value.code == -32602
        # The view's object permission (only pending orders change): its 403, as a tool error.
        denied = await client.call_tool("orders_partial_update", {"pk": shipped.pk, "note": "hurry"})
        assert denied.is_error
        assert denied.content[0].text == "Permission denied: Only pending orders can be changed or deleted."
        assert denied.structured_content["status"] == 403
    assert not orm(Product.objects.filter(sku="POT-01").exists)
    assert orm(lambda: Order.objects.get(pk=shipped.pk).note) == ""


async def test_filtered_and_paginated_list(live_url: str, shop: Shop) -> None:
    def rows() -> None:
        for i in range(5):
            Order.objects.create(owner=shop.alice, product=shop.tea, quantity=i + 1, note=f"batch {i}")
        Order.objects.create(
            owner=shop.alice, product=shop.mug, quantity=1, status=Order.Status.PAID, note="batch paid"
        )
        Order.objects.create(owner=shop.bob, product=shop.tea, quantity=9, note="batch bob")

    orm(rows)
    async with sdk_client(live_url, token=shop.alice_token) as client:
        args = {"status": "pending", "search": "batch", "ordering": "-quantity", "page_size": 2}
        first = (await client.call_tool("orders_list", args)).structured_content
        assert first["count"] == 5
        assert [o["quantity"] for o in first["results"]] == [5, 4]
        assert first["previous"] is None and "page=2" in first["next"]
        assert first["next"].startswith("http://127.0.0.1:")  # the view's own URL, /api/orders/
        assert "/api/orders/" in first["next"]
        third = (await client.call_tool("orders_list", {**args, "page": 3})).structured_content
        assert [o["quantity"] for o in third["results"]] == [1] and third["next"] is None
        filtered = (
            await client.call_tool("orders_list", {"min_quantity": 4, "product": shop.tea.pk})
        ).structured_content
        assert sorted(o["quantity"] for o in filtered["results"]) == [4, 5]
        beyond = await client.call_tool("orders_list", {"page": 9})
        assert beyond.is_error and beyond.structured_content["status"] == 404
        products = (await client.call_tool("products_list", {"search": "mug"})).structured_content
        assert [p["sku"] for p in products["results"]] == ["MUG-01"]


async def test_destroy_asks_to_confirm_first(live_url: str, shop: Shop) -> None:
    keep = orm(lambda: Order.objects.create(owner=shop.alice, product=shop.tea, quantity=1))
    drop = orm(lambda: Order.objects.create(owner=shop.alice, product=shop.tea, quantity=2))
    seen: list[str] = []
    async with sdk_client(live_url, token=shop.alice_token, elicitation_callback=confirm_with(False, seen)) as client:
        kept = await client.call_tool("orders_destroy", {"pk": keep.pk})
        assert not kept.is_error and kept.structured_content == {
            "deleted": False,
            "detail": f"Order #{keep.pk} was kept.",
        }
    assert seen == [f"Delete order #{keep.pk} (1 x Tea)?"]
    assert orm(Order.objects.filter(pk=keep.pk).exists)
    async with sdk_client(live_url, token=shop.alice_token, elicitation_callback=confirm_with(True, seen)) as client:
        deleted = await client.call_tool("orders_destroy", {"pk": drop.pk})
        assert not deleted.is_error and deleted.content[0].text == "Done (HTTP 204)."
        cancelled = await client.call_tool("orders_cancel", {"pk": keep.pk})
        assert cancelled.structured_content["status"] == "cancelled"
        again = await client.call_tool("orders_cancel", {"pk": keep.pk})
        assert again.is_error and again.structured_content["errors"] == {
            "status": "A cancelled order cannot be cancelled."
        }
    assert seen[1:] == [f"Delete order #{drop.pk} (2 x Tea)?", f"Cancel order #{keep.pk}?"]
    assert not orm(Order.objects.filter(pk=drop.pk).exists)
    assert orm(lambda: Order.objects.get(pk=keep.pk).status) == Order.Status.CANCELLED


async def test_destroy_without_elicitation_capability_is_refused_before_deleting(live_url: str, shop: Shop) -> None:
    order = orm(lambda: Order.objects.create(owner=shop.alice, product=shop.tea, quantity=1))
    async with sdk_client(live_url, token=shop.alice_token) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("orders_destroy", {"pk": order.pk})
    assert refused.value.code == -32021
    assert orm(Order.objects.filter(pk=order.pk).exists)


async def test_rest_endpoint_works_unchanged_beside_the_tools(live_url: str, shop: Shop) -> None:
    headers = {"Authorization": f"Token {shop.alice_token}"}
    async with httpx.AsyncClient(base_url=api(live_url), headers=headers) as http:
        created = await http.post("/orders/", json={"product": shop.tea.pk, "quantity": 3})
        assert created.status_code == 201, created.text
        order_id = created.json()["id"]
        async with sdk_client(live_url, token=shop.alice_token) as client:
            via_mcp = (await client.call_tool("orders_retrieve", {"pk": order_id})).structured_content
        via_rest = (await http.get(f"/orders/{order_id}/")).json()
        assert via_rest == via_mcp
        assert (await http.get("/orders/?status=pending")).json()["count"] == 1
        bob = await http.get(f"/orders/{order_id}/", headers={"Authorization": f"Token {shop.bob_token}"})
        assert bob.status_code == 404
        # No credentials: refused (403, as session authentication comes first in the project's settings).
        assert (await http.get("/orders/", headers={"Authorization": ""})).status_code == 403
        # A REST client has no MCP context: DELETE deletes without an ask, as before.
        assert (await http.delete(f"/orders/{order_id}/")).status_code == 204
    assert not orm(Order.objects.exists)


async def test_plain_django_view_and_permissions_on_prompts_and_resources(live_url: str, shop: Shop) -> None:
    async with sdk_client(live_url, token=shop.alice_token) as client:
        assert "shop://catalogue" not in {str(r.uri) for r in (await client.list_resources()).resources}
        assert "order_help" in {p.name for p in (await client.list_prompts()).prompts}
        with pytest.raises(MCPError):
            await client.read_resource("shop://catalogue")
    orm(lambda: shop.alice.user_permissions.add(Permission.objects.get(codename="view_product")))
    async with sdk_client(live_url, token=shop.alice_token) as client:
        report = await client.call_tool("stock_report", {"at_most": 5})
        assert report.structured_content == {"at_most": 5, "products": [{"sku": "MUG-01", "name": "Mug", "stock": 3}]}
        contents = (await client.read_resource("shop://catalogue")).contents
        assert '"sku": "TEA-01"' in contents[0].text
        prompt = await client.get_prompt("order_help", {"question": "where is my tea?"})
        assert prompt.messages[0].content.text.startswith("alice asks about their shop orders")


async def test_anonymous_callers(live_url: str, shop: Shop, settings: Any) -> None:
    # The test settings allow anonymous callers: they see no shop tool and the prompt is hidden.
    async with sdk_client(live_url) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "echo" in names and not any(n.startswith(("orders_", "products_")) for n in names)
        assert "order_help" not in {p.name for p in (await client.list_prompts()).prompts}
        with pytest.raises(MCPError):
            await client.call_tool("orders_list", {})
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "ALLOW_ANONYMOUS": False}
    async with httpx.AsyncClient() as http:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/list",
        }
        refused = await http.post(live_url, json=body, headers=headers)
        assert refused.status_code == 401
        allowed = await http.post(
            live_url, json=body, headers={**headers, "authorization": f"Token {shop.alice_token}"}
        )
        assert allowed.status_code == 200 and "orders_list" in allowed.text
