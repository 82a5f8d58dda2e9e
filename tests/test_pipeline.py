"""The per-call path (mcp_django.pipeline) and what it is built of."""

from __future__ import annotations

import gc
import weakref

from mcp_django.registry import Registry
from mcp_django.transports.legacy_http import endpoint_for


def test_an_endpoint_lives_no_longer_than_its_registry() -> None:
    registry = Registry()
    endpoint = endpoint_for(registry)
    assert endpoint_for(registry) is endpoint  # one per registry, shared by its transports
    assert endpoint_for(Registry()) is not endpoint
    registry_ref, endpoint_ref = weakref.ref(registry), weakref.ref(endpoint)
    del registry, endpoint
    gc.collect()
    assert registry_ref() is None and endpoint_ref() is None
