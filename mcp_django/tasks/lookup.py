"""The endpoint a task was made at, found from any process (the runner's, and :mod:`.lost`'s for
the tool's ``retries``), a worker's too, which may not have imported the module that makes it."""

from __future__ import annotations

import logging
from importlib import import_module

from ..registry import Registry, registry_named

logger = logging.getLogger("mcp_django.tasks")


def endpoint(name: str) -> Registry | None:
    """The endpoint named ``name``, or None; the URLconf, where endpoints are routed, imported first."""
    found = registry_named(name)
    if found is None:
        from django.conf import settings

        urlconf = getattr(settings, "ROOT_URLCONF", None)
        if isinstance(urlconf, str):
            try:
                import_module(urlconf)
            except Exception:  # a URLconf that cannot load here: the endpoints already made are searched
                logger.warning("the task worker could not import ROOT_URLCONF %r", urlconf, exc_info=True)
        found = registry_named(name)
    return found
