"""Demo tools: what an mcp-django project's handlers look like."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Literal

from mcp_django import Context, SyncContext, mcp


@mcp.tool()
def echo(text: Annotated[str, "The text to send back"]) -> str:
    """Send the text back."""
    return text


@mcp.tool()
async def reverse(text: Annotated[str, "The text to reverse"]) -> str:
    """Send the text back reversed (an async tool: it runs on the event loop, no thread)."""
    return text[::-1]


@mcp.tool()
async def whoami(ctx: Context) -> dict[str, object]:
    """Who the server thinks is calling."""
    user = ctx.user
    return {"principal": ctx.principal, "username": user.get_username() if user.is_authenticated else None}


@dataclass
class Trip:
    destination: str
    nights: int
    budget: Literal["low", "medium", "high"] = "medium"


@mcp.tool()
async def plan_trip(ctx: Context, traveller: str) -> str:
    """Plan a trip: asks the traveller for details and the client's model for ideas, in one round.

    Nothing here changes data before the last ask, so replaying it is safe.
    """
    trip, roots = await asyncio.gather(
        ctx.elicit(f"Where should {traveller} go?", Trip),
        ctx.list_roots() if ctx.supports("roots") else asyncio.sleep(0, result=[]),
    )
    if not trip:
        return "No trip planned."
    plan: Trip = trip.data  # a Trip: a budget the client left out is the default, "medium"
    ctx.state["destination"] = plan.destination
    ideas = await ctx.sample(
        f"Suggest three things to do in {plan.destination} over {plan.nights} nights on a {plan.budget} budget.",
        max_tokens=200,
    )
    if not await ctx.confirm(f"Book {plan.nights} nights in {plan.destination}?"):
        return "Trip not booked."
    return f"Booked {traveller} to {plan.destination} ({len(roots)} root(s) seen). Ideas: {ideas.text}"


@mcp.tool()
def clear_cache(ctx: SyncContext, region: str) -> str:
    """A sync handler: confirm, then act."""
    if not ctx.confirm(f"Clear the {region} cache?"):
        return "Left the cache alone."
    return f"Cleared the {region} cache."


# How long each of the sales report's five steps takes (a test makes them instant).
REPORT_STEP_SECONDS = 1.0


@mcp.tool(task="optional")
async def sales_report(ctx: Context, quarter: Literal["Q1", "Q2", "Q3", "Q4"] = "Q1") -> str:
    """Build a sales report (takes a few seconds): an MCP task for clients that opt in.

    It asks one question on the way; in a task the question parks it as ``input_required``
    and the answer arrives by ``tasks/update``; the handler is the same either way.
    """
    for step in range(3):
        await ctx.check_cancelled()
        await ctx.report_progress(step, 5, f"Reading the {quarter} orders")  # the task's statusMessage
        await asyncio.sleep(REPORT_STEP_SECONDS)
    with_refunds = await ctx.confirm(f"Include refunds in the {quarter} report?", key="refunds")
    for step in range(3, 5):
        await ctx.check_cancelled()
        await ctx.report_progress(step, 5, "Writing the report")
        await asyncio.sleep(REPORT_STEP_SECONDS)
    return f"Sales report for {quarter}: 1,204 orders, {'with' if with_refunds else 'without'} refunds."
