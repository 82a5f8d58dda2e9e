"""Tools for the in-process test client's tests (prefix tctest_): they read and write the database."""

from __future__ import annotations

from collections import Counter

from mcp_django import Context, SyncContext, mcp
from project.shop.models import Product

runs: Counter[str] = Counter()


@mcp.tool()
def tctest_stock(ctx: SyncContext, sku: str) -> str:
    """A sync tool reading what the test created, after a confirm."""
    product = Product.objects.get(sku=sku)
    if not ctx.confirm(f"Show the stock of {product.name}?", key="show"):
        return "not shown"
    return f"{product.name}: {product.stock}"


@mcp.tool()
async def tctest_astock(ctx: Context, sku: str) -> str:
    """The same in an async tool (the async ORM, thread-sensitive)."""
    product = await Product.objects.aget(sku=sku)
    if not await ctx.confirm(f"Show the stock of {product.name}?", key="show"):
        return "not shown"
    return f"{product.name}: {product.stock}"


@mcp.tool()
def tctest_restock_early(ctx: SyncContext, sku: str) -> str:
    """Replay-unsafe: writes before its ask, so every round writes again."""
    Product.objects.filter(sku=sku).update(stock=models_F("stock") + 1)
    if not ctx.confirm("Restocked. Tell the supplier?", key="tell"):
        return "kept quiet"
    return "told"


@mcp.tool()
def tctest_restock_late(ctx: SyncContext, sku: str) -> str:
    """Replay-safe: asks first, writes after its last ask."""
    if not ctx.confirm("Restock?", key="go"):
        return "left alone"
    Product.objects.filter(sku=sku).update(stock=models_F("stock") + 1)
    return "restocked"


@mcp.tool(atomic=True)
def tctest_restock_atomic(ctx: SyncContext, sku: str) -> str:
    """Writes before its asks, but atomic=True rolls back every attempt that ends with input_required."""
    runs["atomic"] += 1
    Product.objects.filter(sku=sku).update(stock=models_F("stock") + 1)
    ctx.confirm("First?", key="first")
    ctx.confirm("Second?", key="second")
    return "restocked once"


@mcp.tool()
async def tctest_arestock_early(ctx: Context, sku: str) -> str:
    """An async tool writing before its ask."""
    await Product.objects.filter(sku=sku).aupdate(stock=models_F("stock") + 1)
    return "told" if await ctx.confirm("Tell the supplier?", key="tell") else "kept quiet"


@mcp.prompt(atomic=True)
def tctest_atomic_prompt(ctx: SyncContext, sku: str) -> str:
    """A prompt with atomic=True: the write before the ask is kept only from the final attempt."""
    Product.objects.filter(sku=sku).update(stock=models_F("stock") + 10)
    tone = ctx.confirm("Friendly?", key="friendly")
    return f"Write about {sku} {'kindly' if tone else 'plainly'}."


@mcp.resource("tctest://stock/{sku}", atomic=True)
def tctest_atomic_resource(ctx: SyncContext, sku: str) -> str:
    Product.objects.filter(sku=sku).update(stock=models_F("stock") + 100)
    return "read" if ctx.confirm("Read?", key="read") else "refused"


def models_F(name: str):  # noqa: N802 - django.db.models.F, imported late like a handler would
    from django.db.models import F

    return F(name)
