"""The limits cache's system checks, E051 and W050, registered by ``mcp_django.checks`` (docs/limits.md);
E050, a malformed ``LIMITS``, is reported by the settings check of :mod:`mcp_django.conf`."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register

from ..conf import mcp_settings
from ..registry import endpoints


@register()
def check_limits_cache(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    try:
        limits = mcp_settings.LIMITS
    except Exception:
        return []  # E050, reported with the other settings
    configured = limits["RATES"] or limits["MAX_OPEN_ASKS"] is not None or limits["MAX_OPEN_TASKS"] is not None
    if not configured and not any(registry.throttled for registry in endpoints()):
        return []
    alias = limits["CACHE"]
    found = settings.CACHES.get(alias)
    if found is None:
        return [
            Error(
                f'MCP_DJANGO["LIMITS"]["CACHE"] names the cache {alias!r}, which CACHES does not have',
                hint="Name a cache of CACHES (a shared one, such as Redis, when several instances serve).",
                id="mcp_django.E051",
            )
        ]
    if str(found.get("BACKEND", "")).endswith("LocMemCache"):
        return [
            Warning(
                f"limits are counted in the cache {alias!r}, which is LocMemCache: each process counts on its own",
                hint='Use a shared cache (Redis) for MCP_DJANGO["LIMITS"]["CACHE"] when several processes serve.',
                id="mcp_django.W050",
            )
        ]
    return []
