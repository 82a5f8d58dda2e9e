"""An endpoint made where only a URLconf import finds it: tests/test_tasks_registries.py
points ROOT_URLCONF here to play a task worker that has not imported it yet."""

from __future__ import annotations

from mcp_django import Context
from mcp_django.registry import Registry

lazy = Registry("tasks_lazy")


@lazy.tool(task="optional")
async def slow_compute(ctx: Context, label: str = "") -> str:
    """The lazy endpoint's own slow_compute."""
    if await ctx.confirm(f"Compute {label}?", key="go"):
        return f"lazy computed {label}"
    return "lazy declined"


urlpatterns: list[object] = []
