"""The shop's staff endpoint, ``/staff/mcp``: tools customers never see, behind its own rules.

A second :class:`~mcp_django.registry.Registry`, named ``"staff"``: project/asgi.py routes
it with ``mcp_urlpatterns("staff/mcp", registry=staff_mcp)`` (project/urls.py too, for
WSGI), and ``MCP_DJANGO["ENDPOINTS"]["staff"]`` in project/settings.py gives it its own
authentication (the admin's session or an MCP token; no anonymous callers, no OAuth).
Its handlers are not on ``/mcp``, and ``/mcp``'s are not here (docs/endpoints.md).
"""

from __future__ import annotations

from django.db.models import Count
from rest_framework.permissions import IsAdminUser

from mcp_django import Context, Registry

from .models import Order

staff_mcp = Registry("staff")


@staff_mcp.tool(read_only=True, permission_classes=[IsAdminUser])
def orders_by_status() -> dict[str, int]:
    """How many orders the shop has in each status, every customer's (staff only)."""
    counts = dict(Order.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    return {status: counts.get(status, 0) for status in Order.Status.values}


@staff_mcp.tool(permission_classes=[IsAdminUser], idempotent=True)
async def mark_shipped(ctx: Context, order_id: int) -> str:
    """Mark a paid order as shipped, after you confirm (staff only)."""
    order = await Order.objects.select_related("owner", "product").filter(pk=order_id).afirst()
    if order is None:
        return f"No order #{order_id}."
    if order.status != Order.Status.PAID:
        return f"Order #{order_id} is {order.get_status_display().lower()}, not paid: nothing changed."
    if not await ctx.confirm(f"Mark order #{order_id} ({order}, for {order.owner.get_username()}) as shipped?"):
        return "Nothing changed."
    # Only after the last ask (docs/replay.md), and only if it is still paid.
    updated = await Order.objects.filter(pk=order_id, status=Order.Status.PAID).aupdate(status=Order.Status.SHIPPED)
    return f"Order #{order_id} is shipped." if updated else f"Order #{order_id} changed meanwhile: nothing changed."
