"""The shop's views as MCP tools, and a prompt and a resource guarded by Django permissions."""

from __future__ import annotations

import json

from rest_framework.permissions import IsAuthenticated

from mcp_django import Context, SyncContext, ToolError, ToolResult, mcp
from mcp_django.completion import from_queryset

from . import staff  # noqa: F401 - the staff endpoint's tools (/staff/mcp), registered with these
from .models import Order, Product

# The views by dotted path: .views (DRF's viewsets, serializers, filters and pagination) is
# imported when a listing or a call first needs these tools, not by a process that never does.

# products_list, products_retrieve, products_create, products_update,
# products_partial_update, products_destroy: the write tools are listed only for users
# with the matching shop.*_product permission (the viewset's DjangoModelPermissions).
mcp.register_view("project.shop.views.ProductViewSet")

# orders_list ... orders_destroy, and orders_cancel from the @action. An OAuth access
# token needs the "shop" scope for them (a session or a DRF token is the user's own).
mcp.register_view("project.shop.views.OrderViewSet", scopes=["shop"])

mcp.register_view("project.shop.views.OrderSummary", name="orders_summary")

mcp.register_view(
    "project.shop.views.stock_report",
    name="stock_report",
    input_schema={
        "type": "object",
        "properties": {"at_most": {"type": "integer", "minimum": 0, "default": 5, "description": "Stock threshold"}},
    },
    permissions=["shop.view_product"],
)


CART = ["shop/icons/cart.svg"]


@mcp.resource("shop://catalogue", mime_type="application/json", permissions=["shop.view_product"], icons=CART)
def catalogue() -> str:
    """Every product with its price and stock."""
    rows = Product.objects.order_by("name").values("sku", "name", "price", "stock")
    return json.dumps([{**row, "price": str(row["price"])} for row in rows])


# Completing {sku} offers the catalogue's SKUs that start with what the user typed.
@mcp.resource(
    "shop://products/{sku}",
    mime_type="application/json",
    permissions=["shop.view_product"],
    completions={"sku": from_queryset(Product.objects.all(), "sku")},
    icons=CART,
)
def product(sku: str) -> str:
    """One product of the catalogue, by its SKU."""
    row = Product.objects.values("sku", "name", "price", "stock").get(sku=sku)
    return json.dumps({**row, "price": str(row["price"])})


# status completes from the model field's choices; product from the caller's own orders.
@mcp.prompt(
    permission_classes=[IsAuthenticated],
    completions={
        "status": Order.status,
        "product": from_queryset(lambda ctx: Product.objects.filter(orders__owner=ctx.user), "name"),
    },
    icons=CART,
)
def order_help(ctx: Context, question: str, status: str = "", product: str = "") -> str:
    """Ask for help with your orders, using the shop's tools.

    Args:
        question: What you want to know.
        status: Only orders in this status (pending, paid, shipped, cancelled).
        product: Only orders of this product (its name).
    """
    where = "".join(
        (f" in status {status}" if status else "", f" for {product}" if product else ""),
    )
    return (
        f"{ctx.user.get_username()} asks about their shop orders{where}: {question}\n"
        "Use orders_list (filters: status, shipping, product; search; ordering; page) and orders_retrieve to look."
    )


@mcp.tool(
    permission_classes=[IsAuthenticated],
    title="Refund an order",
    destructive=True,
    idempotent=False,
    open_world=False,
    icons=[{"src": "shop/icons/refund.svg", "sizes": ["48x48"], "theme": "light"}],
)
def refund_order(ctx: SyncContext, order_id: int) -> str:
    """Refund one of your paid orders. It asks first; the write comes after the last ask."""
    order = (
        Order.objects.select_related("product").filter(pk=order_id, owner=ctx.user, status=Order.Status.PAID).first()
    )
    if order is None:  # the model reads it: no server error, no traceback in the log
        raise ToolError(f"You have no paid order #{order_id}.")
    if not ctx.confirm(f"Refund order #{order.pk} ({order.total})?", key="refund"):
        return "Refund cancelled."
    order.status = Order.Status.CANCELLED
    order.save(update_fields=["status"])  # after the last ask: runs once
    return f"Refunded {order.total}."


# -- an MCP Apps view (docs/apps.md): the order with its lines, and a button to order it again --


def _order_data(order: Order) -> dict[str, object]:
    line = {
        "product": order.product.name,
        "sku": order.product.sku,
        "quantity": order.quantity,
        "price": str(order.product.price),
        "total": str(order.total),
    }
    return {
        "id": order.pk,
        "status": order.status,
        "shipping": order.shipping,
        "note": order.note,
        "lines": [line],
        "total": str(order.total),
    }


def _your_order(ctx: SyncContext, order_id: int) -> Order:
    order = Order.objects.select_related("product").filter(pk=order_id, owner=ctx.user).first()
    if order is None:  # the model reads it: no server error, no traceback in the log
        raise ToolError(f"You have no order #{order_id}.")
    return order


@mcp.tool(app="shop/order_view.html", permission_classes=[IsAuthenticated], read_only=True, title="Show an order")
def show_order(ctx: SyncContext, order_id: int) -> ToolResult:
    """One of your orders with its lines; a client that renders MCP Apps shows it with a re-order button."""
    order = _your_order(ctx, order_id)
    text = f"Order #{order.pk} ({order.get_status_display()}): {order.quantity} x {order.product.name}, {order.total}."
    return ToolResult(content=[text], structured=_order_data(order))


@mcp.tool(visibility=["app"], permission_classes=[IsAuthenticated], title="Order again")
def reorder(ctx: SyncContext, order_id: int) -> ToolResult:
    """Place a new order with the same lines as one of yours (the order view's button). It asks first."""
    order = _your_order(ctx, order_id)
    if not ctx.confirm(f"Order {order.quantity} x {order.product.name} again, for {order.total}?", key="reorder"):
        return ToolResult(content=["Not ordered again."], structured={"reordered": None})
    again = Order.objects.create(
        owner=ctx.user, product=order.product, quantity=order.quantity, shipping=order.shipping, note=order.note
    )  # after the last ask: runs once
    return ToolResult(content=[f"Ordered again as #{again.pk}."], structured={"reordered": _order_data(again)})
