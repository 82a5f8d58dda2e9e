"""Test-only tools that use the ORM, async and sync, on the default registry.

Imported by tests/test_lifecycle.py and by the server processes it starts. Each
counts the users named ``probe``: the name shows up in ``pg_stat_activity``, so a
test can find the connection that ran the query.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from mcp_django import mcp


@mcp.tool()
async def lifecycle_async_orm(probe: str) -> str:
    """An async handler's ORM call: asgiref runs it in a database thread."""
    return str(await get_user_model().objects.filter(username=probe).acount())


@mcp.tool()
def lifecycle_sync_orm(probe: str) -> str:
    """A sync handler's ORM call, in the worker pool."""
    return str(get_user_model().objects.filter(username=probe).count())
