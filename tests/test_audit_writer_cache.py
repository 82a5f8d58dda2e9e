"""The audit writer's SQLite connection keeps a small page cache: it only appends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from mcp_django import audit
from mcp_django.models import AuditEvent
from tests.conftest import Raw


@pytest.fixture(autouse=True)
def _background_writes(settings: Any) -> Iterator[None]:
    # The production default: rows queued, written by the writer thread after the answer.
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "AUDIT": {"ASYNC_WRITES": True}}
    audit.flush()
    yield
    audit.flush()


@pytest.mark.django_db(transaction=True)
def test_the_writers_sqlite_connection_keeps_a_small_page_cache(raw: Raw, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default each SQLite connection caches up to 2 MiB of pages; the writer's filled it
    with the rows it had appended and kept them while it lived (docs/performance.md)."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's page cache")
    seen: list[tuple[str, int]] = []
    real = audit._small_cache

    def spy(conn: Any) -> None:
        real(conn)
        seen.append((conn.alias, conn.connection.execute("PRAGMA cache_size").fetchone()[0]))

    monkeypatch.setattr(audit, "_small_cache", spy)
    before = AuditEvent.objects.count()
    for _ in range(3):
        assert raw.call("echo", {"text": "hi"}).status_code == 200
    assert audit.flush()
    assert AuditEvent.objects.count() == before + 3
    assert seen and all(size == -audit.WRITER_CACHE_KIB for _, size in seen), seen
