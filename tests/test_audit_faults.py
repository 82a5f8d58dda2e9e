"""The audit log loses nothing it can keep: NUL in client-chosen values, one bad row in a
batch, a full queue. (The database going away is tests/test_audit_outage.py.)"""

from __future__ import annotations

import base64
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from mcp_django import audit, checks, signals
from mcp_django.auth import ANONYMOUS
from mcp_django.models import AuditEvent, Kind
from mcp_django.protocol.revisions import Era
from tests.conftest import Raw

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = "test_input_required_result_elicitation"
ADA = {"action": "accept", "content": {"name": "Ada"}}


def _mcp(**changes: Any) -> dict[str, Any]:
    from django.conf import settings

    return {**settings.MCP_DJANGO, **changes}


@pytest.fixture(autouse=True)
def _background_writes(settings: Any, transactional_db: None) -> Iterator[None]:
    # The production default: rows queued, written by the writer thread after the answer.
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "AUDIT": {"ASYNC_WRITES": True}}
    audit.flush()
    AuditEvent.objects.all().delete()
    yield
    audit.flush()


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def event(**fields: Any) -> signals.Event:
    base: dict[str, Any] = {
        "kind": "completed",
        "era": Era.MODERN,
        "transport": "http",
        "method": "tools/call",
        "target": "t",
        "principal": ANONYMOUS,
    }
    return signals.Event(**{**base, **fields})


@contextlib.contextmanager
def busy(writer: audit.Writer) -> Iterator[None]:
    """``writer``'s thread busy until the block ends: what is put meanwhile waits for it."""
    held, resume = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        resume.wait(10)

    writer.put(None, hold)
    assert held.wait(5)
    try:
        yield
    finally:
        resume.set()


def test_rows_never_hold_nul() -> None:
    row = audit.row_for(
        event(target="to\x00ol", request_id="id\x00", asks={"k\x00": "elicitation/create"}, client_address="a\x00")
    )
    assert not any("\x00" in str(v) for v in row.values())
    assert row["target"] == "to\\u0000ol" and row["request_id"] == "id\\u0000"
    assert list(row["asks"]) == ["k\\u0000"]


def test_nul_in_a_refused_request_id_is_on_record_before_the_answer(raw: Raw) -> None:
    params = {"name": TOOL, "arguments": {}, "inputResponses": {"user_name": ADA}, "requestState": "not-a-state"}
    r = raw.post("tools/call", params, request_id="refused\x00-1")
    assert r.json()["error"]["code"] == -32602
    # No flush: the refusal's row is committed before the client hears the refusal.
    (row,) = AuditEvent.objects.filter(kind=Kind.STATE_REFUSED)
    assert row.request_id == "refused\\u0000-1" and row.target == TOOL


def test_nul_in_a_tool_name_and_a_uri(raw: Raw) -> None:
    name = "no\x00such-tool"
    r = raw.post("tools/call", {"name": name, "arguments": {}}, headers={"mcp-name": b64(name)}, request_id="n\x00")
    assert r.json()["error"]["code"] == -32602
    uri = "test://template/7\x00/data"
    r = raw.post("resources/read", {"uri": uri}, headers={"mcp-name": b64(uri)})
    assert r.status_code in (200, 400)
    assert audit.flush()
    targets = set(AuditEvent.objects.values_list("target", flat=True))
    assert "no\\u0000such-tool" in targets
    assert "test://template/7\\u0000/data" in targets


def test_one_bad_row_never_takes_the_others_with_it(caplog: pytest.LogCaptureFixture) -> None:
    writer = audit.Writer()
    good = [(event(request_id=f"good-{i}"), None, time.time()) for i in range(10)]
    # A row the database refuses on its own (round is a positive integer column).
    bad = (event(request_id="bad", round=-5), None, time.time())
    with caplog.at_level(logging.ERROR, logger="mcp_django.audit"):
        with busy(writer):  # every row below lands in one batch
            for row in [*good[:5], bad, *good[5:]]:
                writer.put(row)
        writer.flush()
    stored = sorted(AuditEvent.objects.values_list("request_id", flat=True))
    assert stored == sorted(f"good-{i}" for i in range(10))
    assert writer.rejected == 1
    assert any("refused an audit row" in r.getMessage() for r in caplog.records)


def test_the_queue_is_bounded_and_overflow_is_counted(raw: Raw, caplog: pytest.LogCaptureFixture) -> None:
    before = audit.stats()["dropped"]
    try:
        with (
            busy(audit.writer),
            override_settings(MCP_DJANGO=_mcp(AUDIT={"ASYNC_WRITES": True, "QUEUE_SIZE": 3})),
            caplog.at_level(logging.ERROR, logger="mcp_django.audit"),
        ):
            for i in range(8):
                # Calls are answered whatever happens to their rows.
                assert raw.call("echo", {"text": str(i)}).json()["result"]["content"][0]["text"] == str(i)
            assert audit.stats()["dropped"] - before == 5
            warnings = checks.check_audit_losses()
    finally:
        audit.writer.dropped = before  # later tests' checks see a clean process
    assert audit.flush()
    assert AuditEvent.objects.filter(kind=Kind.COMPLETED).count() == 3
    assert [w.id for w in warnings] == ["mcp_django.W020"]
    assert any("audit queue is full" in r.getMessage() for r in caplog.records)
    # Logged once (then at most every few seconds), not once per dropped row.
    assert sum("audit queue is full" in r.getMessage() for r in caplog.records) == 1


def test_a_flush_that_times_out_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # The writer's INSERT waits (a lock held elsewhere; here a statement that does not
    # return): a flush gives up loudly, instead of returning as if the rows were in.
    entered, release = threading.Event(), threading.Event()
    insert = audit._insert_many

    def stuck(rows: list[dict[str, Any]]) -> None:
        entered.set()
        assert release.wait(20)
        insert(rows)

    monkeypatch.setattr(audit, "_insert_many", stuck)
    audit.record(event(request_id="late"))
    try:
        assert entered.wait(10)
        started = time.monotonic()
        with pytest.raises(audit.FlushTimeout, match=r"writing a batch of 1 row\(s\) for \d+\.\d s"):
            audit.flush(timeout=0.5)
        assert time.monotonic() - started < 5
    finally:
        release.set()
    assert audit.flush()
    assert list(AuditEvent.objects.values_list("request_id", flat=True)) == ["late"]


def test_a_refusal_waits_for_its_commit_at_most_its_bound(caplog: pytest.LogCaptureFixture) -> None:
    """record_now waits for the row's commit, up to ``wait``; a commit that lands later, once the
    waiting loop is closed, is still written, and nothing fails or logs on its way back."""
    import asyncio

    with busy(audit.writer), caplog.at_level(logging.WARNING):
        started = time.monotonic()
        asyncio.run(audit.record_now(event(request_id="late"), Kind.STATE_REFUSED, wait=0.3))
        assert 0.25 < time.monotonic() - started < 3
    assert audit.flush()
    started = time.monotonic()
    asyncio.run(audit.record_now(event(request_id="on-time"), Kind.STATE_REFUSED, wait=5))
    assert time.monotonic() - started < 3  # its commit ended the wait
    assert sorted(AuditEvent.objects.values_list("request_id", flat=True)) == ["late", "on-time"]
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_a_flush_blocked_by_a_lock_held_elsewhere_raises() -> None:
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("a table lock that makes another connection wait is PostgreSQL's")
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("LOCK TABLE mcp_django_auditevent IN ACCESS EXCLUSIVE MODE")
        audit.record(event(request_id="behind-a-lock"))
        with pytest.raises(audit.FlushTimeout, match="writing a batch of 1 row"):
            audit.flush(timeout=1)
    finally:
        other.rollback()
        other.close()
    assert audit.flush()
    assert AuditEvent.objects.filter(request_id="behind-a-lock").count() == 1


def test_a_batch_whose_commit_landed_but_whose_reply_was_lost_is_not_written_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The database goes away between committing a batch and saying so: the writer sees an
    # OperationalError, keeps the batch and retries it. Each event must still be one row.
    from django.db import connections

    wrapper = type(connections["default"])
    real_commit = wrapper._commit
    lost = threading.Event()

    def commit_then_lose_the_reply(self: Any) -> None:
        real_commit(self)
        if threading.current_thread().name == "mcp-django-audit" and not lost.is_set():
            lost.set()
            # As Django's own _commit raises it: the driver's error, wrapped in django.db's.
            with self.wrap_database_errors:
                raise self.Database.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(wrapper, "_commit", commit_then_lose_the_reply)
    for i in range(5):
        audit.record(event(request_id=f"r{i}", duration_ms=float(i)))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not (lost.is_set() and audit.writer.waiting() == 0):
        time.sleep(0.05)
    assert lost.is_set(), "the writer never committed the batch"
    assert audit.flush()
    stored = sorted(AuditEvent.objects.values_list("request_id", flat=True))
    assert stored == [f"r{i}" for i in range(5)]
    assert AuditEvent.objects.filter(event_id__isnull=True).count() == 0
