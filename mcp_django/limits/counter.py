"""Counting in the shared cache: fixed windows and open-at-once counters, each call bounded by
``LIMITS["CACHE_TIMEOUT"]`` behind a breaker of its own (docs/limits.md); the cache away is
:class:`CacheDown`, and the stage decides."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from ..breaker import CacheBreaker
from ..conf import mcp_settings

PREFIX = "mcp_django:limit"


class CacheDown(Exception):
    """The limits cache failed, did not answer in time, or is known to be away."""


def _incr(cache: Any, key: str, timeout: float) -> int:
    """``cache.incr(key)``, the key first added (for ``timeout``) when missing: Django's incr refuses one."""
    try:
        return int(cache.incr(key))
    except ValueError:
        return 1 if cache.add(key, 1, timeout) else int(cache.incr(key))


def hit(cache: Any, windows: Sequence[tuple[str, int]]) -> list[int]:
    """Count one call in each ``(key, seconds)`` window; each window's count after it."""
    # A second past the window's end, so a clock a little behind does not find it gone.
    return [_incr(cache, key, seconds + 1) for key, seconds in windows]


def take(cache: Any, key: str, cap: int, lifetime: float) -> bool:
    """One more of what ``key`` counts is open, unless ``cap`` are: whether it was taken (the count
    outlives a process that died holding it by ``lifetime``)."""
    if _incr(cache, key, lifetime) > cap:
        release(cache, key)
        return False
    cache.touch(key, lifetime)
    return True


def release(cache: Any, key: str) -> None:
    """One of what ``key`` counts is over."""
    with contextlib.suppress(ValueError):  # expired: nothing left to take back
        if cache.decr(key) < 0:
            cache.delete(key)  # an expired count taken again meanwhile: never below nothing


breaker = CacheBreaker(
    "the limits cache",
    lambda: mcp_settings.LIMITS["CACHE"],
    lambda: mcp_settings.LIMITS["CACHE_TIMEOUT"],
    f"{PREFIX}:probe",
    CacheDown,
)
