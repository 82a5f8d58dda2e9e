"""The audit log over the real endpoint: every event kind and refusal reason, and what a row holds."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import types
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.authtoken.models import Token

import tests.modern_tools  # noqa: F401 - registers modtest_url
from mcp_django import audit, signals
from mcp_django.asks.call import Call
from mcp_django.auth import ANONYMOUS, Principal
from mcp_django.conf import mcp_settings
from mcp_django.keyring import principal_digests
from mcp_django.models import AuditEvent, Kind
from mcp_django.pipeline import Pipeline
from mcp_django.protocol.revisions import ClientCapabilities, Era
from mcp_django.registry import Registry
from mcp_django.request_state import Claims, Reason, params_digest, seal
from mcp_django.testing import JSONRPCError, MCPClient
from tests.conftest import Raw

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = "test_input_required_result_elicitation"
ADA = {"action": "accept", "content": {"name": "Ada-the-secret-answer"}}
SECRET_ARGUMENT = "argument-secret-7f3a"


@pytest.fixture(autouse=True)
def _background_writes(settings: Any) -> None:
    # The production default, whatever the suite's settings say: rows queued, written after the answer.
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "AUDIT": {"ASYNC_WRITES": True}}


@pytest.fixture(autouse=True)
def _flushed(_background_writes: None, transactional_db: None) -> Iterator[None]:
    # Rows queued by earlier tests (this module's or others') must not count in this one.
    audit.flush()
    AuditEvent.objects.all().delete()
    yield
    audit.flush()


def rows(**filters: Any) -> list[AuditEvent]:
    audit.flush()
    return list(AuditEvent.objects.filter(**filters).order_by("id"))


def result(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert "error" not in body, body
    return body["result"]


def first_state(raw: Raw, name: str = TOOL) -> str:
    out = result(raw.call(name))
    assert out["resultType"] == "input_required"
    return out["requestState"]


def sealed(**overrides: Any) -> str:
    claims: dict[str, Any] = {
        "method": "tools/call",
        "target": TOOL,
        "principal": ANONYMOUS.digest,
        "digest": params_digest({"name": TOOL, "arguments": {}}),
        "round": 1,
        "asked": {},
    }
    now = overrides.pop("now", None)
    claims.update(overrides)
    return seal(Claims(**claims), now=now)


def assert_secret_free(row: AuditEvent, *secrets: str) -> None:
    stored = json.dumps({f.attname: getattr(row, f.attname) for f in AuditEvent._meta.fields}, default=str)
    for secret in secrets:
        assert secret not in stored, (secret, stored)


# -- rounds and outcomes ------------------------------------------------------------------


def test_round_then_completion(raw: Raw) -> None:
    first = raw.call(TOOL, request_id="first-id")
    state = result(first)["requestState"]
    done = raw.call(TOOL, inputResponses={"user_name": ADA}, requestState=state, request_id=42)
    assert result(done)["content"][0]["text"] == "Hello, Ada-the-secret-answer!"

    round_row, completed = rows()
    assert round_row.kind == Kind.ROUND and completed.kind == Kind.COMPLETED
    assert round_row.round == 1
    assert round_row.asks == {"user_name": "elicitation/create"}
    assert round_row.request_id == "first-id" and completed.request_id == "42"
    for row in (round_row, completed):
        assert (row.method, row.target, row.version, row.era, row.transport) == (
            "tools/call",
            TOOL,
            "2026-07-28",
            "modern",
            "http",
        )
        assert row.principal == "anonymous" and row.user_id is None
        assert row.client_address == "127.0.0.1"
        assert row.duration_ms is not None and row.duration_ms >= 0
        assert row.created is not None
        assert_secret_free(row, state, "Ada-the-secret-answer", state.split(".")[-1])
    assert "input round" in str(round_row) and TOOL in str(round_row) and "anonymous" in str(round_row)


def test_prompt_and_resource_calls(raw: Raw) -> None:
    assert "messages" in result(raw.post("prompts/get", {"name": "test_simple_prompt"}))
    assert "contents" in result(raw.post("resources/read", {"uri": "test://template/7/data"}))
    prompt, resource = rows()
    assert (prompt.kind, prompt.method, prompt.target) == (Kind.COMPLETED, "prompts/get", "test_simple_prompt")
    assert (resource.kind, resource.method, resource.target) == (
        Kind.COMPLETED,
        "resources/read",
        "test://template/7/data",
    )


def test_failed_tool_and_failed_request(raw: Raw) -> None:
    assert result(raw.call("test_error_handling"))["isError"] is True
    assert "error" in raw.post("prompts/get", {"name": "test_prompt_with_arguments"}).json()  # missing arguments
    tool_error, bad_request = rows()
    assert (tool_error.kind, tool_error.reason) == (Kind.FAILED, "tool error")
    assert (bad_request.kind, bad_request.reason, bad_request.method) == (Kind.FAILED, "error -32602", "prompts/get")


def test_arguments_are_not_stored(raw: Raw) -> None:
    assert result(raw.call("echo", {"text": SECRET_ARGUMENT}))["content"][0]["text"] == SECRET_ARGUMENT
    (row,) = rows()
    assert row.kind == Kind.COMPLETED and row.target == "echo"
    assert_secret_free(row, SECRET_ARGUMENT)


def test_cancelled_call_is_recorded() -> None:
    registry = Registry()
    started = asyncio.Event()

    @registry.tool()
    async def slow() -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    call = Call(
        method="tools/call",
        params={"name": "slow", "arguments": {}},
        request_id=9,
        version="2026-07-28",
        era=Era.MODERN,
        transport="http",
        capabilities=ClientCapabilities({}),
        principal=ANONYMOUS,
    )

    async def run() -> None:
        task = asyncio.ensure_future(Pipeline(registry).handle(call))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    (row,) = rows()
    assert (row.kind, row.target, row.request_id) == (Kind.CANCELLED, "slow", "9")


def test_a_refusal_the_client_gave_up_on_is_one_row() -> None:
    # The client goes away while the refusal waits for its row's commit (held here): the
    # request is cancelled, and the log keeps the refusal without a "cancelled" row besides.
    registry = Registry()

    @registry.tool()
    async def asks(ctx: Any) -> str:
        return "yes" if await ctx.confirm("Sure?", key="sure") else "no"

    call = Call(
        method="tools/call",
        params={"name": "asks", "arguments": {}, "inputResponses": {"sure": ADA}, "requestState": "junk"},
        request_id="gave-up",
        version="2026-07-28",
        era=Era.MODERN,
        transport="http",
        capabilities=ClientCapabilities({"elicitation": {}}),
        principal=ANONYMOUS,
    )
    blocked, resume = threading.Event(), threading.Event()

    def hold() -> None:
        blocked.set()
        resume.wait(10)

    async def run() -> None:
        task = asyncio.ensure_future(Pipeline(registry).handle(call))
        while audit.writer.waiting() == 0:  # the refusal's row is queued, its commit awaited
            assert not task.done(), task
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    audit.writer.put(None, hold)
    assert blocked.wait(5)
    try:
        asyncio.run(run())
    finally:
        resume.set()
    assert [(r.kind, r.request_id) for r in rows()] == [(Kind.STATE_REFUSED, "gave-up")]


# -- refusals -----------------------------------------------------------------------------


def refuse(raw: Raw, state: str, name: str = TOOL) -> AuditEvent:
    """Send a bad requestState; its row must be committed when the answer arrives (no flush)."""
    response = raw.call(name, inputResponses={"user_name": ADA}, requestState=state, request_id="refused-1")
    assert response.json()["error"]["code"] == -32602
    found = list(AuditEvent.objects.filter(kind=Kind.STATE_REFUSED))
    assert len(found) == 1, "the refusal's row was not committed before the client was answered"
    row = found[0]
    assert (row.method, row.target, row.request_id, row.principal) == ("tools/call", name, "refused-1", "anonymous")
    assert row.version == "2026-07-28" and row.transport == "http" and row.client_address == "127.0.0.1"
    assert row.duration_ms is not None
    assert_secret_free(row, state, "Ada-the-secret-answer")
    return row


def tampered_mac(state: str) -> str:
    head, mac = state.rsplit(".", 1)
    return f"{head}.{('A' if mac[0] != 'A' else 'B')}{mac[1:]}"


def other_kid(state: str) -> str:
    version, _kid, rest = state.split(".", 2)
    return f"{version}.AAAAAAAA.{rest}"


@pytest.mark.parametrize(
    ("reason", "make"),
    [
        (Reason.MALFORMED, lambda raw: "not-a-request-state"),
        (Reason.BAD_SIGNATURE, lambda raw: tampered_mac(first_state(raw))),
        (Reason.UNKNOWN_KEY, lambda raw: other_kid(first_state(raw))),
        (Reason.EXPIRED, lambda raw: sealed(now=time.time() - mcp_settings.REQUEST_STATE_LIFETIME - 5)),
        (Reason.WRONG_METHOD, lambda raw: sealed(method="prompts/get")),
        (Reason.WRONG_TARGET, lambda raw: first_state(raw, "test_input_required_result_tampered_state")),
        (Reason.WRONG_PRINCIPAL, lambda raw: sealed(principal=principal_digests("auth.user:999")[0])),
        (Reason.WRONG_PARAMS, lambda raw: sealed(digest=params_digest({"name": TOOL, "arguments": {"x": 1}}))),
    ],
)
def test_each_refusal_reason(raw: Raw, reason: Reason, make: Any) -> None:
    row = refuse(raw, make(raw))
    assert row.reason == reason


def test_too_large(raw: Raw) -> None:
    state = first_state(raw)
    with override_settings(MCP_DJANGO={**_mcp(), "MAX_REQUEST_STATE_BYTES": 64}):
        row = refuse(raw, state)
    assert row.reason == Reason.TOO_LARGE


def test_round_cap(raw: Raw) -> None:
    with override_settings(MCP_DJANGO={**_mcp(), "MAX_INPUT_ROUNDS": 0}):
        response = raw.call(TOOL, request_id="capped")
        assert response.json()["error"]["code"] == -32602
        (row,) = AuditEvent.objects.filter(kind=Kind.STATE_REFUSED)
    assert (row.reason, row.request_id) == (Reason.ROUND_CAP, "capped")
    assert not rows(kind=Kind.ROUND)  # the round over the cap was never issued


def test_missing_capability(raw: Raw) -> None:
    response = raw.call("test_input_required_result_sampling", caps={"elicitation": {}}, request_id=5)
    assert response.json()["error"]["code"] == -32021
    (row,) = AuditEvent.objects.filter(kind=Kind.MISSING_CAPABILITY)  # committed before the answer
    assert (row.reason, row.target, row.request_id) == ("sampling", "test_input_required_result_sampling", "5")
    assert not rows(kind=Kind.FAILED)  # one row per refusal, not a second "failed" one


def test_missing_capability_on_a_legacy_revision() -> None:
    """The legacy engine's -32021 is audited as the replay engine's is: one row, no "failed" one."""
    client = MCPClient(revision="2025-11-25", capabilities={"elicitation": {}})
    with pytest.raises(JSONRPCError) as raised:
        client.call_tool("test_input_required_result_sampling")
    assert raised.value.code == -32021
    (row,) = AuditEvent.objects.filter(kind=Kind.MISSING_CAPABILITY)
    assert (row.reason, row.target, row.era) == ("sampling", "test_input_required_result_sampling", "legacy")
    assert not rows(kind=Kind.FAILED)


def test_missing_url_elicitation_names_the_sub_capability(raw: Raw) -> None:
    # A client that declares elicitation without its URL mode, asked for a URL elicitation.
    response = raw.call("modtest_url", caps={"elicitation": {}}, request_id="url-1")
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"elicitation": {"url": {}}}
    (row,) = AuditEvent.objects.filter(kind=Kind.MISSING_CAPABILITY)  # committed before the answer
    assert (row.reason, row.target, row.request_id) == ("elicitation.url", "modtest_url", "url-1")
    assert [r.kind for r in rows()] == [Kind.MISSING_CAPABILITY]  # and no "failed" row besides


# -- principals ---------------------------------------------------------------------------


def test_user_foreign_key_survives_deletion(raw: Raw) -> None:
    user = get_user_model().objects.create_user("auditor", password="x")
    token = Token.objects.create(user=user)
    response = raw.call("echo", {"text": "hi"}, headers={"Authorization": f"Token {token.key}"})
    assert result(response)["content"][0]["text"] == "hi"
    (row,) = rows()
    assert row.user_id == user.pk and row.principal == f"auth.user:{user.pk}"
    assert_secret_free(row, token.key)
    pk = user.pk
    user.delete()
    row.refresh_from_db()
    assert row.user_id is None and row.principal == f"auth.user:{pk}"


# -- settings -----------------------------------------------------------------------------


def _mcp() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.MCP_DJANGO)


def test_rounds_off_keeps_refusals(raw: Raw) -> None:
    with override_settings(MCP_DJANGO={**_mcp(), "AUDIT": {"ROUNDS": False}}):
        state = first_state(raw)  # a round was issued, and is not written
        refused = refuse(raw, tampered_mac(state))  # a refusal is, committed before the answer
        assert result(raw.call("echo", {"text": "x"}))["content"][0]["text"] == "x"  # and a call is
    assert refused.reason == Reason.BAD_SIGNATURE
    assert [r.kind for r in rows()] == [Kind.STATE_REFUSED, Kind.COMPLETED]
    # The same requests with rounds on: the round's row is what the setting left out.
    first_state(raw)
    assert [r.kind for r in rows()][2:] == [Kind.ROUND]


def test_legacy_rounds_setting_still_works(raw: Raw) -> None:
    with override_settings(MCP_DJANGO={**_mcp(), "AUDIT_ROUNDS": False}):
        assert mcp_settings.AUDIT_ROUNDS is False
        with pytest.warns(DeprecationWarning, match="AUDIT_ROUNDS"):
            first_state(raw)
    assert not rows(kind=Kind.ROUND)


def test_audit_disabled_writes_nothing_but_signals_still_fire(raw: Raw) -> None:
    seen: list[signals.Event] = []

    async def sink(sender: Any, event: signals.Event, **kwargs: Any) -> None:
        seen.append(event)

    signals.round_started.connect(sink)
    signals.state_refused.connect(sink)
    try:
        with override_settings(MCP_DJANGO={**_mcp(), "AUDIT": {"ENABLED": False}}):
            state = first_state(raw)
            assert raw.call(TOOL, requestState="junk").json()["error"]["code"] == -32602
            result(raw.call(TOOL, inputResponses={"user_name": ADA}, requestState=state))
    finally:
        signals.round_started.disconnect(sink)
        signals.state_refused.disconnect(sink)
    assert [e.kind for e in seen] == ["round", "state_refused"]
    assert seen[1].reason == Reason.MALFORMED
    assert rows() == []


# -- legacy asks (the legacy engine sends ask_finished; here the signal is sent directly) ---


@pytest.mark.parametrize("outcome", ["answered", "declined", "cancelled", "error", "timeout", "disconnect"])
def test_ask_finished_outcomes(outcome: str) -> None:
    user = get_user_model().objects.create_user("legacy")
    event = signals.Event(
        kind="ask",
        era=Era.LEGACY,
        transport="websocket",
        method="tools/call",
        target="test_elicitation",
        principal=Principal(user),
        request_id=3,
        client_address="10.0.0.8",
        version="2025-11-25",
        asks={"elicitation-abc": "elicitation/create"},
        outcome=outcome,
        duration_ms=12.5,
    )
    asyncio.run(signals.ask_finished.asend("tool", event=event))
    (row,) = rows()
    assert row.kind == Kind.ASK and row.outcome == outcome
    assert (row.era, row.transport, row.version, row.client_address) == (
        "legacy",
        "websocket",
        "2025-11-25",
        "10.0.0.8",
    )
    assert row.asks == {"elicitation-abc": "elicitation/create"} and row.duration_ms == 12.5
    assert row.user_id == user.pk and row.principal == f"auth.user:{user.pk}"
    assert outcome in str(row)


def test_asks_off_skips_ask_rows() -> None:
    event = signals.Event(
        kind="ask",
        era=Era.LEGACY,
        transport="http",
        method="tools/call",
        target="t",
        principal=ANONYMOUS,
        outcome="answered",
    )
    with override_settings(MCP_DJANGO={**_mcp(), "AUDIT": {"ASKS": False}}):
        asyncio.run(signals.ask_finished.asend("tool", event=event))
    assert rows() == []


def test_synchronous_writes_commit_before_the_answer(raw: Raw) -> None:
    with override_settings(MCP_DJANGO={**_mcp(), "AUDIT": {"ASYNC_WRITES": False}}):
        assert result(raw.call("echo", {"text": "x"}))["content"][0]["text"] == "x"
        # No flush: the row is there as soon as the client has its answer.
        assert [r.kind for r in AuditEvent.objects.all()] == [Kind.COMPLETED]


def test_only_listed_fields_reach_the_row() -> None:
    event = signals.Event(
        kind="state_refused",
        era=Era.MODERN,
        transport="http",
        method="tools/call",
        target="x" * 900,
        principal="a-label",
        request_id={"odd": "id"},
    )
    event.secret = "should-not-be-stored"  # type: ignore[attr-defined]
    row = audit.row_for(event)
    assert len(row["target"]) == 500 and row["principal"] == "a-label" and row["user_id"] is None
    assert "should-not-be-stored" not in json.dumps(row, default=str)


def _row_by_truncate(event: signals.Event, kind: str | None = None) -> dict[str, Any]:
    """row_for as it was, every text through _truncate: what row_for's tests in line must equal."""
    principal = event.principal
    label = getattr(principal, "label", None)
    if label is None:
        label = principal if isinstance(principal, str) else ""
    t = audit._truncate
    credential = str(getattr(getattr(principal, "auth", None), "mcp_credential_label", "") or "")
    return {
        "kind": t(kind or event.kind, 24),
        "reason": t(event.reason, 48),
        "outcome": t(event.outcome, 16),
        "version": t(event.version, 16),
        "era": t(event.era, 8),
        "transport": t(event.transport, 16),
        "method": t(event.method, 64),
        "target": t(event.target, 500),
        "principal": t(label, 150),
        "credential": t(credential, 150),
        "request_id": t(event.request_id, 100),
        "asks": {t(k, 200): t(m, 64) for k, m in (event.asks or {}).items() if isinstance(m, str)},
        "client_address": t(event.client_address, 64),
        "endpoint": t(getattr(event, "endpoint", ""), 64),
    }


class _Text(str):
    """A str subclass whose text is not itself: only _truncate's str() says what it writes."""

    def __str__(self) -> str:
        return "other"


def test_row_for_texts_are_truncates_own() -> None:
    """row_for tests a plain short string in line and looks the kinds and eras up: each column
    holds what _truncate makes of the value, of the same type, whatever the value."""
    long, nul = "x" * 600, "a\x00b"
    values: list[Any] = [
        "",
        None,
        "tools/call",
        long,
        nul,
        nul * 100,
        7,
        {"odd": "id"},
        _Text("short"),
        _Text("round"),
        _Text("legacy"),
        Kind.ROUND,
        Kind.STATE_REFUSED,
        Era.LEGACY,
        "state_refused",
        "legacy",
        # Each column's length and one more.
        *("y" * n for n in (8, 9, 16, 17, 24, 25, 48, 49, 64, 65, 100, 101, 150, 151, 200, 201, 500, 501)),
    ]
    texts = ["kind", "reason", "outcome", "version", "era", "transport", "method", "target"]
    texts += ["request_id", "client_address", "endpoint"]
    for value in values:
        for name in texts:
            base: dict[str, Any] = dict(
                kind="completed", era=Era.MODERN, transport="http", method="tools/call", target="t", principal="p"
            )
            event = signals.Event(**{**base, name: value})
            for kind in (None, value) if name == "kind" else (None,):
                mine, theirs = audit.row_for(event, kind), _row_by_truncate(event, kind)
                for column, text in theirs.items():
                    assert mine[column] == text and type(mine[column]) is type(text), (name, value, column)
                    if column != "asks":
                        assert type(text) is str
        # A principal's label, and a credential that names itself for the log (an MCP token's label).
        credential = types.SimpleNamespace(mcp_credential_label=value)
        for principal in (value if isinstance(value, str) else "p", Principal(None), Principal(None, credential)):
            event = signals.Event(
                kind="round",
                era=Era.MODERN,
                transport="http",
                method="tools/call",
                target="t",
                principal=principal,
                asks={value: value, "k": value, long: "elicitation/create"} if isinstance(value, str) else {"k": value},
            )
            mine, theirs = audit.row_for(event), _row_by_truncate(event)
            assert mine["principal"] == theirs["principal"] and type(mine["principal"]) is str
            assert mine["credential"] == theirs["credential"] and type(mine["credential"]) is str
            assert mine["asks"] == theirs["asks"], value
            assert [type(x) for item in mine["asks"].items() for x in item] == [
                type(x) for item in theirs["asks"].items() for x in item
            ]


def test_kinds_and_eras_fit_their_columns() -> None:
    """row_for writes a kind's and an era's text without cutting it: each must fit its column."""
    assert all(len(str(kind)) <= AuditEvent._meta.get_field("kind").max_length for kind in Kind)
    assert all(len(str(era)) <= AuditEvent._meta.get_field("era").max_length for era in Era)


# -- the writer ---------------------------------------------------------------------------


def test_completions_are_batched_off_the_request_path(raw: Raw) -> None:
    # Hold the writer: while it is blocked, calls must still be answered, and their rows queue up.
    blocked = threading.Event()
    resume = threading.Event()

    def hold() -> None:
        blocked.set()
        resume.wait(10)

    audit.writer.put(None, hold)  # the writer runs hold() after this (empty) batch
    assert blocked.wait(5)
    try:
        for i in range(5):
            assert result(raw.call("echo", {"text": str(i)}))["content"][0]["text"] == str(i)
    finally:
        resume.set()
    assert len(rows(kind=Kind.COMPLETED)) == 5


def test_flush_without_a_writer_thread_writes_inline() -> None:
    writer = audit.Writer()
    event = signals.Event(
        kind="round", era=Era.MODERN, transport="http", method="tools/call", target="t", principal=ANONYMOUS
    )
    writer._queue.put(audit._Item((event, Kind.ROUND, time.time())))
    assert writer.flush()
    assert [r.kind for r in AuditEvent.objects.all()] == [Kind.ROUND]


def _call_event(request_id: str, **extra: Any) -> signals.Event:
    return signals.Event(
        kind="completed",
        era=Era.MODERN,
        transport="http",
        method="tools/call",
        target="echo",
        principal=ANONYMOUS,
        request_id=request_id,
        **extra,
    )


def _call_row(request_id: str, **extra: Any) -> tuple[Any, ...]:
    return audit._values_for(_call_event(request_id, **extra), Kind.COMPLETED, None, None)


def test_a_batch_is_one_executemany_of_its_rows() -> None:
    """37 rows are one statement run for each row, their values prepared and in order
    (multi-row statements were measured dearer: bench/HISTORY.md)."""
    from django.db import connection

    calls: list[tuple[str, int, bool]] = []

    def spy(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        calls.append((sql, len(params or ()), many))
        return execute(sql, params, many, context)

    batch = [_call_row(f"multi-{i}") for i in range(37)]
    with connection.execute_wrapper(spy):
        audit._insert_many(batch)
    assert [(count, many) for sql, count, many in calls if "INSERT" in sql.upper()] == [(37, True)]
    stored = AuditEvent.objects.filter(request_id__startswith="multi-").order_by("id")
    assert [row.request_id for row in stored] == [f"multi-{i}" for i in range(37)]
    event_id = audit._COLUMNS.index("event_id")
    assert [row.event_id for row in stored] == [row[event_id] for row in batch]


def test_a_queued_events_time_is_what_timezone_now_made_when_it_was_recorded() -> None:
    """record() stamps the event with time.time(); the writer makes the time the row keeps,
    aware UTC with USE_TZ and naive local time without, as timezone.now() would have then."""
    from django.utils import timezone

    def recorded(request_id: str) -> tuple[Any, Any, Any]:
        before = timezone.now()
        audit.record(_call_event(request_id), Kind.COMPLETED)
        after = timezone.now()
        assert audit.flush()
        return before, AuditEvent.objects.get(request_id=request_id).created, after

    before, created, after = recorded("stamped-utc")
    assert timezone.is_aware(created) and before <= created <= after
    with override_settings(USE_TZ=False):
        before, created, after = recorded("stamped-local")
        assert timezone.is_naive(created) and before <= created <= after


def test_a_row_the_writer_makes_is_row_fors_values_in_the_statements_order() -> None:
    """The writer makes a row as a tuple of values in the statement's column order (no dict,
    no values taken from one): the same row, stored the same, as row_for's dict."""
    from django.db import connection
    from django.utils import timezone

    quote = connection.ops.quote_name
    columns = ", ".join(quote(name) for name in audit._COLUMNS)
    assert f"({columns})" in audit._statement(connection).sql
    user = get_user_model().objects.create_user("columns")
    event = signals.Event(
        kind="round",
        era=Era.MODERN,
        transport="http",
        method="tools/call",
        target="echo",
        principal=Principal(user),
        request_id=3,
        asks={"k": "elicitation/create"},
        round=1,
        duration_ms=1.23456,
    )
    created = timezone.now()
    first, second = audit.event_ids(2)
    values = audit._values_for(event, Kind.ROUND, created, first.int)
    assert dict(zip(audit._COLUMNS, values, strict=True)) == {
        **audit.row_for(event, Kind.ROUND, created, event_id=first),
        "event_id": first.int,
    }
    without = dict(zip(audit._COLUMNS, audit._without_user(values), strict=True))
    assert without == {**dict(zip(audit._COLUMNS, values, strict=True)), "user_id": None}
    assert values[audit._USER] == user.pk
    audit._insert_many([values, audit._values_for(event, Kind.ROUND, created, second)])
    stored = [
        {
            f.attname: getattr(row, f.attname)
            for f in AuditEvent._meta.concrete_fields
            if f.attname not in ("id", "event_id")
        }
        for row in AuditEvent.objects.filter(event_id__in=[first, second]).order_by("id")
    ]
    assert len(stored) == 2 and stored[0] == stored[1] and stored[0]["user_id"] == user.pk
    ids = AuditEvent.objects.filter(event_id__in=[first, second]).order_by("id").values_list("event_id", flat=True)
    assert list(ids) == [first, second]


def test_the_writers_rows_are_stored_byte_for_byte_as_the_orms() -> None:
    """The writer's own statement, with only the dates, the JSON and the UUID prepared (by _preparer,
    the fields' own shortcut), stores each column as the ORM's ``create`` does: the same text, the same types."""
    import datetime

    from django.db import connection
    from django.utils import timezone

    user = get_user_model().objects.create_user("bytes")
    times = [
        timezone.now(),
        # UTC without microseconds: SQLite's text then has none either.
        datetime.datetime(2026, 3, 29, 1, 30, tzinfo=datetime.UTC),
        datetime.datetime(2026, 3, 29, 1, 30, 0, 1, tzinfo=datetime.UTC),
        datetime.datetime(2026, 3, 29, 1, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=5))),
    ]
    asks: list[dict[str, str]] = [
        {},
        {"k": "elicitation/create", "j": "roots/list"},
        {"a\x00b": "sampling/createMessage"},
    ]
    pairs = []
    for n, (created, asked) in enumerate(itertools.product(times, asks)):
        event = signals.Event(
            kind="round",
            era=Era.MODERN,
            transport="http",
            method="tools/call",
            target=f"t{n}",
            principal=Principal(user) if n % 2 else "label",
            request_id=n,
            asks=asked,
            round=1,
            duration_ms=1.23456,
        )
        mine, theirs = audit.event_ids(2)
        audit._insert_many([audit._values_for(event, Kind.ROUND, created, mine.int)])
        AuditEvent.objects.create(**audit.row_for(event, Kind.ROUND, created, event_id=theirs))
        pairs.append((mine, theirs))
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    columns = [f.column for f in AuditEvent._meta.concrete_fields if f.column != "id"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT {} FROM {} ORDER BY {}".format(
                ", ".join(connection.ops.quote_name(c) for c in columns), table, connection.ops.quote_name("id")
            )
        )
        stored = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    assert len(stored) == 2 * len(pairs)
    for (mine, theirs), written, created in zip(pairs, stored[::2], stored[1::2], strict=True):
        assert str(written.pop("event_id")).replace("-", "") == mine.hex
        assert str(created.pop("event_id")).replace("-", "") == theirs.hex
        assert written == created
        assert [type(v) for v in written.values()] == [type(v) for v in created.values()]


def test_event_ids_are_unique_and_ordered_by_time() -> None:
    """A row's event id is a version 7 UUID: its first 48 bits the milliseconds it was made at,
    so a batch's ids go in together at the end of the unique index."""
    before = time.time_ns() // 1_000_000
    ids = [audit.event_ids(1)[0] for _ in range(2000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for made in ids:
        assert made.version == 7 and made.variant == uuid.RFC_4122
        assert before <= made.int >> 80 <= after
    assert [made.int >> 80 for made in ids] == sorted(made.int >> 80 for made in ids)


def test_a_batchs_event_ids_are_made_together() -> None:
    """The writer makes a batch's ids in one step: each a version 7 UUID of the moment, all different."""
    before = time.time_ns() // 1_000_000
    batches = [audit.event_ids(n) for n in (0, 1, 2, 500)]
    after = time.time_ns() // 1_000_000
    assert [len(batch) for batch in batches] == [0, 1, 2, 500]
    ids = [made for batch in batches for made in batch]
    assert len(set(ids)) == len(ids)
    for made in ids:
        assert made.version == 7 and made.variant == uuid.RFC_4122
        assert before <= made.int >> 80 <= after
    assert [made.int >> 80 for made in ids] == sorted(made.int >> 80 for made in ids)
