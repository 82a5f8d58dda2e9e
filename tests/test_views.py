"""Views as tools: the shop's viewsets in process (mcp_django.testing.MCPClient inside a TestCase),
and the REST endpoint beside them through the official SDK client against the live demo."""

from __future__ import annotations

import os
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import Permission, User
from django.test import TestCase
from rest_framework.authtoken.models import Token

from mcp_django.schema.drf import DECIMAL_PATTERN
from mcp_django.testing import JSONRPCError, MCPClient, accept
from project.shop.models import Order, Product
from tests.conftest import mcp_settings, sdk_client


class Shop:
    """Two users with tokens, a few products."""

    def __init__(self) -> None:
        self.alice = User.objects.create_user("alice", password="x")
        self.bob = User.objects.create_user("bob", password="x")
        self.alice_token = Token.objects.create(user=self.alice).key
        self.bob_token = Token.objects.create(user=self.bob).key
        self.mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("9.50"), stock=3)
        self.tea = Product.objects.create(name="Tea", sku="TEA-01", price=Decimal("4.25"), stock=100)


def confirm_with(answer: bool, seen: list[str]) -> Any:
    def callback(request: Any) -> Any:
        seen.append(request.message)
        return accept({"confirm": answer})

    return callback


class ViewsAsTools(TestCase):
    def setUp(self) -> None:
        self.shop = Shop()
        self.alice = MCPClient(token=self.shop.alice_token)
        self.bob = MCPClient(token=self.shop.bob_token)

    def test_tools_are_listed_with_schemas_for_what_the_caller_may_do(self) -> None:
        shop = self.shop
        tools = {t["name"]: t for t in self.alice.list_tools()}
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
        create = tools["orders_create"]["inputSchema"]
        assert create["required"] == ["product", "quantity"]
        assert create["properties"]["quantity"]["minimum"] == 1 and create["properties"]["quantity"]["maximum"] == 100
        assert create["properties"]["shipping"]["enum"] == ["standard", "express"]
        assert "status" not in create["properties"] and "id" not in create["properties"]  # read-only
        listing = tools["orders_list"]["inputSchema"]["properties"]
        assert listing["status"]["enum"] == ["pending", "paid", "shipped", "cancelled"]  # django-filter
        assert {"search", "ordering", "page", "page_size", "min_quantity", "product"} <= set(listing)
        assert listing["page_size"]["maximum"] == 50
        out = tools["orders_retrieve"]["outputSchema"]
        assert out["properties"]["product_detail"]["properties"]["price"] == {
            "type": "string",
            "pattern": DECIMAL_PATTERN,
            "title": "Price",
        }
        assert tools["orders_destroy"]["annotations"]["destructiveHint"] is True
        assert tools["orders_list"]["annotations"]["readOnlyHint"] is True

        shop.bob.user_permissions.add(*Permission.objects.filter(codename__in=["add_product", "view_product"]))
        names = {t["name"] for t in self.bob.list_tools()}
        assert {"products_create", "stock_report"} <= names
        assert "products_destroy" not in names

    def test_two_users_each_work_on_their_own_orders(self) -> None:
        shop, alice, bob = self.shop, self.alice, self.bob
        created = alice.call_tool("orders_create", {"product": shop.mug.pk, "quantity": 2, "note": "gift"})
        assert not created.is_error, created.content
        mine = created.structured
        assert mine["quantity"] == 2 and mine["status"] == "pending" and mine["total"] == "19.00"
        assert mine["product_detail"] == {"id": shop.mug.pk, "name": "Mug", "price": "9.50"}
        theirs = bob.call_tool("orders_create", {"product": shop.tea.pk, "quantity": 5}).structured

        alice_list = alice.call_tool("orders_list", {}).structured
        assert [o["id"] for o in alice_list["results"]] == [mine["id"]] and alice_list["count"] == 1
        bob_list = bob.call_tool("orders_list", {}).structured
        assert [o["id"] for o in bob_list["results"]] == [theirs["id"]]

        got = alice.call_tool("orders_retrieve", {"pk": mine["id"]})
        assert got.structured["note"] == "gift"
        # Bob's order does not exist for Alice: the per-user queryset makes it a 404.
        stolen = alice.call_tool("orders_retrieve", {"pk": theirs["id"]})
        assert stolen.is_error and stolen.text.startswith("Not found")
        assert stolen.structured["status"] == 404

        patched = alice.call_tool("orders_partial_update", {"pk": mine["id"], "note": "for mum"})
        assert patched.structured["note"] == "for mum" and patched.structured["quantity"] == 2
        replaced = alice.call_tool(
            "orders_update", {"pk": mine["id"], "product": shop.tea.pk, "quantity": 7, "shipping": "express"}
        )
        assert replaced.structured["product"] == shop.tea.pk
        # PUT as DRF does it: optional fields left out keep their values.
        assert replaced.structured["shipping"] == "express" and replaced.structured["note"] == "for mum"
        hijack = bob.call_tool("orders_partial_update", {"pk": mine["id"], "note": "mine now"})
        assert hijack.is_error

        summary = bob.call_tool("orders_summary", {})
        assert summary.structured == {"total": 1, "by_status": {"pending": 1}}
        # Alice cannot delete Bob's order even with a confirmation at hand.
        seen: list[str] = []
        gone = alice.call_tool("orders_destroy", {"pk": theirs["id"]}, answer=confirm_with(True, seen))
        assert gone.is_error and seen == []
        assert Order.objects.get(pk=mine["id"]).note == "for mum"
        assert Order.objects.filter(pk=theirs["id"]).exists()

    def test_validation_errors_come_back_as_tool_errors_with_field_errors(self) -> None:
        shop, client = self.shop, self.alice
        # The serializer's own rule (stock in the database): DRF's field errors, as isError.
        result = client.call_tool("orders_create", {"product": shop.mug.pk, "quantity": 4})
        assert result.is_error
        assert result.structured == {"status": 400, "errors": {"quantity": ["Only 3 of Mug in stock."]}}
        assert "quantity: Only 3 of Mug in stock." in result.text
        # An unknown product: the serializer's relation check.
        missing = client.call_tool("orders_create", {"product": 999999, "quantity": 1})
        assert missing.is_error and "product" in missing.structured["errors"]
        # What the input schema says is checked before the view runs.
        schema_error = client.call_tool("orders_create", {"product": shop.mug.pk, "quantity": 0})
        assert schema_error.is_error and "quantity" in schema_error.text
        assert not Order.objects.exists()

    def test_permission_denials(self) -> None:
        shop, client = self.shop, self.alice
        shipped = Order.objects.create(owner=shop.alice, product=shop.tea, quantity=1, status=Order.Status.SHIPPED)
        # A tool the caller may not use is not listed, and calling it is refused as unknown.
        with pytest.raises(JSONRPCError) as refused:
            client.call_tool("products_create", {"name": "Pot", "sku": "POT-01", "price": 3})
        assert refused.value.code == -32602
        # The view's object permission (only pending orders change): its 403, as a tool error.
        denied = client.call_tool("orders_partial_update", {"pk": shipped.pk, "note": "hurry"})
        assert denied.is_error
        assert denied.text == "Permission denied: Only pending orders can be changed or deleted."
        assert denied.structured["status"] == 403
        assert not Product.objects.filter(sku="POT-01").exists()
        assert Order.objects.get(pk=shipped.pk).note == ""

    def test_filtered_and_paginated_list(self) -> None:
        shop, client = self.shop, self.alice
        for i in range(5):
            Order.objects.create(owner=shop.alice, product=shop.tea, quantity=i + 1, note=f"batch {i}")
        Order.objects.create(
            owner=shop.alice, product=shop.mug, quantity=1, status=Order.Status.PAID, note="batch paid"
        )
        Order.objects.create(owner=shop.bob, product=shop.tea, quantity=9, note="batch bob")
        args = {"status": "pending", "search": "batch", "ordering": "-quantity", "page_size": 2}
        first = client.call_tool("orders_list", args).structured
        assert first["count"] == 5
        assert [o["quantity"] for o in first["results"]] == [5, 4]
        assert first["previous"] is None and "page=2" in first["next"]
        assert first["next"].startswith("http://testserver/api/orders/")  # the view's own URL
        third = client.call_tool("orders_list", {**args, "page": 3}).structured
        assert [o["quantity"] for o in third["results"]] == [1] and third["next"] is None
        filtered = client.call_tool("orders_list", {"min_quantity": 4, "product": shop.tea.pk}).structured
        assert sorted(o["quantity"] for o in filtered["results"]) == [4, 5]
        beyond = client.call_tool("orders_list", {"page": 9})
        assert beyond.is_error and beyond.structured["status"] == 404
        products = client.call_tool("products_list", {"search": "mug"}).structured
        assert [p["sku"] for p in products["results"]] == ["MUG-01"]

    def test_destroy_asks_to_confirm_first(self) -> None:
        shop, client = self.shop, self.alice
        keep = Order.objects.create(owner=shop.alice, product=shop.tea, quantity=1)
        drop = Order.objects.create(owner=shop.alice, product=shop.tea, quantity=2)
        seen: list[str] = []
        kept = client.call_tool("orders_destroy", {"pk": keep.pk}, answer=confirm_with(False, seen))
        assert not kept.is_error and kept.structured == {"deleted": False, "detail": f"Order #{keep.pk} was kept."}
        assert seen == [f"Delete order #{keep.pk} (1 x Tea)?"]
        assert Order.objects.filter(pk=keep.pk).exists()
        deleted = client.call_tool("orders_destroy", {"pk": drop.pk}, answer=confirm_with(True, seen))
        assert not deleted.is_error and deleted.text == "Done (HTTP 204)."
        assert len(deleted.rounds) == 1 and deleted.runs == 2
        cancelled = client.call_tool("orders_cancel", {"pk": keep.pk}, answer=confirm_with(True, seen))
        assert cancelled.structured["status"] == "cancelled"
        again = client.call_tool("orders_cancel", {"pk": keep.pk}, answer=confirm_with(True, seen))
        assert again.is_error and again.structured["errors"] == {"status": "A cancelled order cannot be cancelled."}
        assert seen[1:] == [f"Delete order #{drop.pk} (2 x Tea)?", f"Cancel order #{keep.pk}?"]
        assert not Order.objects.filter(pk=drop.pk).exists()
        assert Order.objects.get(pk=keep.pk).status == Order.Status.CANCELLED

    def test_destroy_on_a_legacy_session(self) -> None:
        shop = self.shop
        order = Order.objects.create(owner=shop.alice, product=shop.tea, quantity=1)
        seen: list[str] = []
        client = MCPClient(token=shop.alice_token, revision="2025-11-25")
        deleted = client.call_tool("orders_destroy", {"pk": order.pk}, answer=confirm_with(True, seen))
        assert deleted.text == "Done (HTTP 204)." and deleted.runs == 1
        assert seen == [f"Delete order #{order.pk} (1 x Tea)?"]
        assert not Order.objects.filter(pk=order.pk).exists()
        client.close()

    def test_destroy_without_elicitation_capability_is_refused_before_deleting(self) -> None:
        shop = self.shop
        order = Order.objects.create(owner=shop.alice, product=shop.tea, quantity=1)
        with pytest.raises(JSONRPCError) as refused:
            MCPClient(token=shop.alice_token, capabilities={}).call_tool("orders_destroy", {"pk": order.pk})
        assert refused.value.code == -32021
        assert Order.objects.filter(pk=order.pk).exists()

    def test_plain_django_view_and_permissions_on_prompts_and_resources(self) -> None:
        shop, client = self.shop, self.alice
        assert "shop://catalogue" not in {r["uri"] for r in client.list_resources()}
        assert "order_help" in {p["name"] for p in client.list_prompts()}
        with pytest.raises(JSONRPCError):
            client.read_resource("shop://catalogue")
        shop.alice.user_permissions.add(Permission.objects.get(codename="view_product"))
        report = client.call_tool("stock_report", {"at_most": 5})
        assert report.structured == {"at_most": 5, "products": [{"sku": "MUG-01", "name": "Mug", "stock": 3}]}
        contents = client.read_resource("shop://catalogue").contents
        assert '"sku": "TEA-01"' in contents[0]["text"]
        prompt = client.get_prompt("order_help", {"question": "where is my tea?"})
        assert prompt.text.startswith("alice asks about their shop orders")

    def test_anonymous_callers(self) -> None:
        # The test settings allow anonymous callers: they see no shop tool and the prompt is hidden.
        client = MCPClient()
        names = {t["name"] for t in client.list_tools()}
        assert "echo" in names and not any(n.startswith(("orders_", "products_")) for n in names)
        assert "order_help" not in {p["name"] for p in client.list_prompts()}
        with pytest.raises(JSONRPCError):
            client.call_tool("orders_list", {})
        with mcp_settings(ALLOW_ANONYMOUS=False):
            with pytest.raises(JSONRPCError) as refused:
                MCPClient().list_tools()
            assert refused.value.status == 401
            assert "orders_list" in {t["name"] for t in self.alice.list_tools()}


# Over a real socket: the REST API and the MCP endpoint side by side in the served project.


def orm(func: Callable[[], Any]) -> Any:
    """Run ORM code from a test body on the SDK client's event loop, on the test's own connection."""
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "1"
    try:
        return func()
    finally:
        if before is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def shop(live_url: str) -> Shop:
    return Shop()


@pytest.mark.anyio
async def test_rest_endpoint_works_unchanged_beside_the_tools(live_url: str, shop: Shop) -> None:
    headers = {"Authorization": f"Token {shop.alice_token}"}
    async with httpx.AsyncClient(base_url=live_url.rsplit("/mcp", 1)[0] + "/api", headers=headers) as http:
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


# The formats JSON Schema 2020-12 defines (its format vocabulary): a client's validator knows these,
# and warns of any other (the TypeScript SDK's printed one warning per "decimal" per tools/list).
STANDARD_FORMATS = {
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex",
}  # fmt: skip


def formats_in(node: Any) -> set[str]:
    if isinstance(node, dict):
        own = {node["format"]} if isinstance(node.get("format"), str) else set()
        return own.union(*(formats_in(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(formats_in(v) for v in node))
    return set()


@pytest.mark.anyio
async def test_decimal_round_trip_with_the_sdk_and_only_standard_formats(live_url: str, shop: Shop) -> None:
    """A DRF decimal comes out as the string DRF makes ("9.50"); sending that string back is accepted, as
    DRF accepts it, and no schema of tools/list uses a format outside JSON Schema's."""
    orm(lambda: shop.alice.user_permissions.add(*Permission.objects.filter(codename__endswith="_product")))
    async with sdk_client(live_url, token=shop.alice_token) as client:
        listed = await client.list_tools()
        used: set[str] = set()
        for tool in listed.tools:
            used |= formats_in(tool.input_schema) | formats_in(tool.output_schema)
        assert used and used <= STANDARD_FORMATS, used - STANDARD_FORMATS
        price = {t.name: t for t in listed.tools}["products_partial_update"].input_schema["properties"]["price"]
        assert price["type"] == ["number", "string"] and "format" not in price

        got = (await client.call_tool("products_retrieve", {"pk": shop.mug.pk})).structured_content
        assert got["price"] == "9.50"
        sent_back = await client.call_tool("products_partial_update", {"pk": shop.mug.pk, "price": got["price"]})
        assert not sent_back.is_error, sent_back.content
        assert sent_back.structured_content["price"] == "9.50"
        changed = await client.call_tool("products_partial_update", {"pk": shop.mug.pk, "price": 12.5})
        assert changed.structured_content["price"] == "12.50"
        # What is no decimal is refused before the view runs, naming the field; DRF's own checks still apply.
        for bad in ("twelve", "1.2.3", True):
            refused = await client.call_tool("products_partial_update", {"pk": shop.mug.pk, "price": bad})
            assert refused.is_error and "price" in refused.content[0].text, bad
        too_precise = await client.call_tool("products_partial_update", {"pk": shop.mug.pk, "price": "1.234"})
        assert too_precise.is_error and "decimal places" in too_precise.content[0].text
    assert orm(lambda: Product.objects.get(pk=shop.mug.pk).price) == Decimal("12.50")
