"""GC_FREEZE: the ASGI lifespan's startup moves what start-up made out of the collector's reach."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_django.routing import lifespan
from tests.conftest import mcp_settings


async def _startup_and_shutdown() -> list[str]:
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    await lifespan({"type": "lifespan"}, receive, send)
    return sent


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()  # the test process's later collections see every object again


def test_the_startup_freezes_the_objects_start_up_made(unfrozen: None) -> None:
    assert gc.get_freeze_count() == 0
    made_at_startup = [[]]
    assert any(found is made_at_startup for found in gc.get_objects())
    sent = asyncio.run(_startup_and_shutdown())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    # The modules and classes of a set-up Django process: far more than one list.
    assert gc.get_freeze_count() > 10_000
    # The collector's passes no longer see them (gc.get_objects() lists what they walk).
    assert not any(found is made_at_startup for found in gc.get_objects())


def test_off_nothing_is_frozen(unfrozen: None) -> None:
    with mcp_settings(GC_FREEZE=False):
        asyncio.run(_startup_and_shutdown())
    assert gc.get_freeze_count() == 0
