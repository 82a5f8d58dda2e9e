"""The example of docs/testing.md, verbatim: what a user copies must pass."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import TestCase

from mcp_django.testing import JSONRPCError, MCPClient, decline
from project.shop.models import Order, Product


class RefundTests(TestCase):
    def setUp(self):
        self.alice = User.objects.create_user("alice")
        mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.50"), stock=3)
        self.order = Order.objects.create(owner=self.alice, product=mug, quantity=2, status=Order.Status.PAID)

    def test_refund_after_confirmation(self):
        client = MCPClient(user=self.alice)
        result = client.call_tool("refund_order", {"order_id": self.order.pk}, answer=lambda req: True)

        assert result.text == "Refunded 9.00."
        assert len(result.rounds) == 1  # one round of input
        assert result.rounds[0].input_requests["refund"].message == f"Refund order #{self.order.pk} (9.00)?"
        assert result.runs == 2  # under 2026-07-28 the handler ran twice: to the ask, then to the end
        self.order.refresh_from_db()
        assert self.order.status == Order.Status.CANCELLED

    def test_declined(self):
        client = MCPClient(user=self.alice)
        result = client.call_tool("refund_order", {"order_id": self.order.pk}, answer=lambda req: decline())
        assert result.text == "Refund cancelled."
        self.order.refresh_from_db()
        assert self.order.status == Order.Status.PAID

    def test_someone_elses_order(self):
        bob = User.objects.create_user("bob")
        result = MCPClient(user=bob).call_tool("refund_order", {"order_id": self.order.pk}, answer=lambda r: True)
        assert result.is_error  # Order.DoesNotExist: a generic tool error (logged), as a client sees it
        assert result.rounds == []  # bob was never asked to confirm
        self.order.refresh_from_db()
        assert self.order.status == Order.Status.PAID  # and alice's order is as it was

    def test_anonymous_callers_do_not_see_it(self):
        with pytest.raises(JSONRPCError) as caught:
            MCPClient().call_tool("refund_order", {"order_id": self.order.pk})
        assert caught.value.code == -32602  # "Unknown tool": IsAuthenticated hides it

    def test_legacy_client(self):
        # 2025-11-25: a session and a real server-to-client request; the handler runs once.
        client = MCPClient(user=self.alice, revision="2025-11-25")
        message = f"Refund order #{self.order.pk} (9.00)?"
        result = client.call_tool("refund_order", {"order_id": self.order.pk}, answer={message: True})
        assert result.text == "Refunded 9.00." and result.runs == 1
        client.close()


class AsyncRefundTests(TestCase):
    async def test_refund(self):
        alice = await User.objects.acreate(username="alice")
        mug = await Product.objects.acreate(name="Mug", sku="MUG-01", price=Decimal("4.50"))
        order = await Order.objects.acreate(owner=alice, product=mug, quantity=1, status=Order.Status.PAID)
        result = await MCPClient(user=alice).acall_tool("refund_order", {"order_id": order.pk}, answer=lambda r: True)
        assert result.text == "Refunded 4.50."


# The same with pytest: the mcp_client fixture comes with the package (a pytest11 entry point,
# like pytest-django's fixtures). Called, it makes another client: mcp_client(user=..., revision=...).
@pytest.mark.django_db
def test_refund_with_pytest(mcp_client, django_user_model):
    alice = django_user_model.objects.create_user("alice")
    mug = Product.objects.create(name="Mug", sku="MUG-01", price=Decimal("4.50"))
    order = Order.objects.create(owner=alice, product=mug, quantity=1, status=Order.Status.PAID)
    result = mcp_client(user=alice).call_tool("refund_order", {"order_id": order.pk}, answer={"refund": True})
    assert result.text == "Refunded 4.50."
