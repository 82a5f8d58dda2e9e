"""MCP tasks (the io.modelcontextprotocol/tasks extension, docs/tasks.md), in process.

The runs of a task execute in the test's thread (MCPClient(run_tasks=True), or
client.run_task, or run below), exactly as a worker runs them (mcp_django.tasks.runner.arun); the
multi-process tests with a real worker are in tests/test_tasks_worker.py.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from importlib.util import find_spec
from io import StringIO
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.db.models.sql.compiler import SQLCompiler
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mcp_django import audit
from mcp_django.models import AuditEvent, Kind
from mcp_django.tasks.models import MCPTask, Status
from mcp_django.tasks.store import NOT_FOUND, SILENT, UNCLAIMED, WORKER_LOST
from mcp_django.testing import JSONRPCError, MCPClient, accept
from tests.conftest import Raw, mcp_settings, meta, served_before_expiry, wait_past

EXT = "io.modelcontextprotocol/tasks"
TASK_CAPS = {"elicitation": {}, "extensions": {EXT: {}}}
# Django's own task backends: django.tasks's on Django 6, the django_tasks backport's on Django 5.2.
BACKENDS = "django.tasks.backends" if find_spec("django.tasks") is not None else "django_tasks.backends"


def run(task_id: str) -> None:
    """One run of the task from the test's thread, as the worker's job runs it (runner.run_task)."""
    from asgiref.sync import async_to_sync

    from mcp_django.tasks.runner import arun

    async_to_sync(arun)(task_id)


def _ack(result: dict) -> bool:
    """The empty acknowledgment of tasks/update and tasks/cancel: no task envelope."""
    return result["resultType"] == "complete" and result.keys() - {"_meta"} == {"resultType"}


class TaskTools(TestCase):
    def setUp(self) -> None:
        self.alice = User.objects.create_user("alice", password="pw")
        self.bob = User.objects.create_user("bob", password="pw")

    def test_without_the_opt_in_an_optional_task_tool_runs_synchronously(self) -> None:
        result = MCPClient().call_tool("slow_compute", {"seconds": 0, "label": "now"})
        assert result.text == "computed now in 0s"
        assert result.task_id is None and result.task_status is None
        assert not MCPTask.objects.exists()

    def test_without_the_opt_in_a_required_task_tool_is_32021(self) -> None:
        with pytest.raises(JSONRPCError) as raised:
            MCPClient().call_tool("failing_job")
        assert raised.value.code == -32021
        assert raised.value.data == {"requiredCapabilities": {"extensions": {EXT: {}}}}
        assert raised.value.status == 400

    def test_legacy_revisions_run_task_tools_synchronously(self) -> None:
        result = MCPClient(revision="2025-11-25").call_tool("failing_job")
        assert result.is_error and "failing_job failed" in result.text
        assert not MCPTask.objects.exists()

    def test_a_task_asks_is_answered_by_tasks_update_and_completes(self) -> None:
        result = MCPClient(user=self.alice, tasks=True).call_tool(
            "confirm_delete", {"filename": "a.txt"}, answer=lambda request: True
        )
        assert result.text == "Deleted a.txt."
        assert result.task_states == ["working", "input_required", "working", "completed"]
        assert [r.keys for r in result.rounds] == [["confirm_delete"]]
        row = MCPTask.objects.get(pk=result.task_id)
        assert (row.status, row.rounds, row.runs, row.principal) == (
            Status.COMPLETED,
            1,
            2,
            f"auth.user:{self.alice.pk}",
        )
        assert row.input_requests == {} and list(row.answers) == ["confirm_delete"]

    def test_a_tool_error_is_a_completed_task_and_a_protocol_error_a_failed_one(self) -> None:
        client = MCPClient(tasks=True)
        failing = client.call_tool("failing_job")
        assert failing.task_status == "completed" and failing.is_error
        with pytest.raises(JSONRPCError) as raised:
            client.call_tool("protocol_error_job")
        assert raised.value.code == -32603
        assert raised.value.task_states == ["working", "failed"]  # type: ignore[attr-defined]
        task = client.get_task(raised.value.task_id)  # type: ignore[attr-defined]
        assert task["error"] == {"code": -32603, "message": "protocol_error_job hit an internal error"}
        assert "result" not in task and task["resultType"] == "complete"

    def test_create_task_result_is_flat_and_durable(self) -> None:
        client = MCPClient(tasks=True)
        created = client.start_tool("slow_compute", {"seconds": 5})
        assert created["resultType"] == "task" and created["status"] == "working"
        assert set(created) >= {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
        assert not {"result", "error", "inputRequests", "requestState", "task"} & set(created)
        assert len(created["taskId"]) >= 40  # 256 random bits
        got = client.get_task(created["taskId"])
        assert got["taskId"] == created["taskId"] and got["status"] == "working"
        assert got["resultType"] == "complete"

    def test_partial_answers_keep_the_task_waiting_with_the_open_keys_only(self) -> None:
        client = MCPClient(tasks=True)
        task_id = client.start_tool("multi_input")["taskId"]
        client.run_task(task_id)
        task = client.get_task(task_id)
        assert task["status"] == "input_required"
        assert sorted(task["inputRequests"]) == ["multi_confirm", "multi_name"]
        # Unknown keys are ignored; a partial answer keeps the other key open.
        assert _ack(client.update_task(task_id, {"never-asked": {"action": "accept"}}))
        name = {"action": "accept", "content": {"name": "Ada"}}
        assert _ack(client.update_task(task_id, {"multi_name": name}))
        task = client.get_task(task_id)
        assert task["status"] == "input_required" and list(task["inputRequests"]) == ["multi_confirm"]
        # An answered key cannot be answered again.
        client.update_task(task_id, {"multi_name": {"action": "accept", "content": {"name": "Eve"}}})
        client.update_task(task_id, {"multi_confirm": {"action": "accept", "content": {"confirm": True}}})
        assert client.get_task(task_id)["status"] == "working"
        client.run_task(task_id)
        task = client.get_task(task_id)
        assert task["status"] == "completed"
        assert task["result"]["content"][0]["text"] == "name=Ada, proceed=True"

    def test_cancel_is_acknowledged_idempotent_and_a_queued_task_ends_cancelled(self) -> None:
        client = MCPClient(tasks=True)
        task_id = client.start_tool("slow_compute", {"seconds": 60})["taskId"]
        assert _ack(client.cancel_task(task_id))
        assert client.get_task(task_id)["status"] == "cancelled"
        assert _ack(client.cancel_task(task_id))
        client.run_task(task_id)  # a run enqueued before the cancel does nothing
        assert MCPTask.objects.get(pk=task_id).runs == 0

    def test_a_cancel_seen_by_a_running_task_ends_it_cancelled(self) -> None:
        client = MCPClient(tasks=True)
        task_id = client.start_tool("slow_compute", {"seconds": 60})["taskId"]
        # Running elsewhere (a lease), so the cancel is a request the handler must see.
        MCPTask.objects.filter(pk=task_id).update(lease_until=timezone.now() + timedelta(seconds=30))
        client.cancel_task(task_id)
        row = MCPTask.objects.get(pk=task_id)
        assert row.status == Status.WORKING and row.cancel_requested
        MCPTask.objects.filter(pk=task_id).update(lease_until=None)
        client.run_task(task_id)
        assert client.get_task(task_id)["status"] == "cancelled"

    def test_a_task_whose_worker_died_runs_again_then_fails_instead_of_working_for_ever(self) -> None:
        client = MCPClient(tasks=True)
        task_id = client.start_tool("slow_compute", {"seconds": 60})["taskId"]
        first_job = MCPTask.objects.get(pk=task_id).job_id
        MCPTask.objects.filter(pk=task_id).update(lease_until=timezone.now() - timedelta(seconds=1), runs=1)
        with self.captureOnCommitCallbacks(execute=True) as hooks:
            task = client.get_task(task_id)
        assert hooks  # the announcement and the new run's enqueue
        # Lost to its infrastructure: run again from the start (TASK_RETRIES, 2 by default).
        assert task["status"] == "working"
        assert task["statusMessage"] == f"running again from the start: {SILENT} (retry 1 of 2)"
        row = MCPTask.objects.get(pk=task_id)
        assert (row.retried, row.lease_until) == (1, None) and row.job_id != first_job
        with mcp_settings(TASK_RETRIES=1):
            MCPTask.objects.filter(pk=task_id).update(lease_until=timezone.now() - timedelta(seconds=1), runs=2)
            task = client.get_task(task_id)
        assert task["status"] == "failed"
        assert task["error"] == {"code": -32603, "message": f"{WORKER_LOST} (2 runs, all lost): {SILENT}"}

    def test_a_run_lost_between_the_backend_and_its_claim_fails_after_a_lease(self) -> None:
        """A worker killed after the backend marked its job running and before the run took the
        task's lease: the task has no lease to run out, and the backend's job tells."""
        from django_tasks_db.backend import DatabaseBackend
        from django_tasks_db.models import DBTaskResult

        from mcp_django.tasks import runner

        client = MCPClient(tasks=True)
        lease = timedelta(seconds=30)
        long_ago = timezone.now() - 2 * lease
        lost, queued, starting = (client.start_tool("slow_compute", {"seconds": 60})["taskId"] for _ in range(3))
        for task_id in (lost, queued, starting):
            runner.enqueue(task_id)  # on the database backend, as after a commit
        jobs = dict(MCPTask.objects.filter(pk__in=[lost, queued, starting]).values_list("pk", "job_id"))
        assert all(jobs.values())
        MCPTask.objects.filter(pk__in=jobs).update(updated=long_ago)
        DBTaskResult.objects.filter(pk=jobs[lost]).update(status="RUNNING", started_at=long_ago)
        DBTaskResult.objects.filter(pk=jobs[starting]).update(status="RUNNING", started_at=timezone.now())
        backend = DatabaseBackend.get_result
        asked: list[str] = []

        def get_result(self: Any, result_id: str) -> Any:
            asked.append(result_id)
            return backend(self, result_id)

        with (
            mcp_settings(TASK_LEASE_SECONDS=lease.total_seconds(), TASK_RETRIES=0),
            mock.patch.object(DatabaseBackend, "get_result", get_result),
        ):
            task = client.get_task(lost)
            assert task["status"] == "failed"
            assert task["error"] == {"code": -32603, "message": f"{WORKER_LOST}: {UNCLAIMED}"}
            # Waiting in the queue, or started a moment ago: working, however old the task.
            for _ in range(3):
                assert client.get_task(queued)["status"] == "working"
                assert client.get_task(starting)["status"] == "working"
            # The backend is asked once a lease, not at every poll.
            assert asked == [jobs[lost], jobs[queued], jobs[starting]]
            MCPTask.objects.filter(pk=starting).update(run_checked=long_ago)
            DBTaskResult.objects.filter(pk=jobs[starting]).update(started_at=long_ago)
            assert client.get_task(starting)["status"] == "failed"
        # Its run, should it start after all, finds the task failed and does nothing.
        client.run_task(lost)
        assert MCPTask.objects.get(pk=lost).runs == 0

    def test_a_poll_is_one_query_by_primary_key_whose_sql_is_not_built_again(self) -> None:
        client = MCPClient(user=self.alice, tasks=True)
        task_id = client.start_tool("slow_compute", {"seconds": 60})["taskId"]
        first = client.get_task(task_id)
        audited = AuditEvent.objects.count()
        built: list[object] = []
        as_sql = SQLCompiler.as_sql

        def counted(compiler: SQLCompiler, *args: Any, **kwargs: Any) -> Any:
            built.append(compiler.query.model)
            return as_sql(compiler, *args, **kwargs)

        with mock.patch.object(SQLCompiler, "as_sql", counted), CaptureQueriesContext(connection) as queries:
            again = client.get_task(task_id)
        assert MCPTask not in built  # the poll's SQL was compiled once, by the first poll
        assert [q["sql"] for q in queries.captured_queries if "mcp_django_mcptask" in q["sql"]] == [
            q["sql"] for q in queries.captured_queries
        ]
        assert len(queries.captured_queries) == 1
        polled = queries.captured_queries[0]["sql"]
        assert task_id in polled and '"arguments"' not in polled and '"answers"' not in polled
        assert again == first and again["status"] == "working" and again["createdAt"].endswith("Z")
        assert AuditEvent.objects.count() == audited  # a read writes no audit row
        # The bob who does not own it still gets the unknown task's answer from the same path.
        with pytest.raises(JSONRPCError) as raised:
            MCPClient(user=self.bob, tasks=True).get_task(task_id)
        assert (raised.value.code, raised.value.message) == (-32602, NOT_FOUND)

    def test_another_principals_task_is_refused_like_an_unknown_one(self) -> None:
        task_id = MCPClient(user=self.alice, tasks=True).start_tool("slow_compute", {"seconds": 60})["taskId"]
        answers = []
        for caller, task in ((self.bob, task_id), (None, task_id), (self.alice, "no-such-task")):
            for method, params in (
                ("tasks/get", {"taskId": task}),
                ("tasks/update", {"taskId": task, "inputResponses": {}}),
                ("tasks/cancel", {"taskId": task}),
            ):
                with pytest.raises(JSONRPCError) as raised:
                    MCPClient(user=caller, tasks=True).request(method, params)
                answers.append((raised.value.code, raised.value.message, raised.value.status))
        assert set(answers) == {(-32602, NOT_FOUND, 400)}
        assert MCPTask.objects.get(pk=task_id).status == Status.WORKING  # bob's cancel did nothing
        assert MCPClient(user=self.alice, tasks=True).get_task(task_id)["status"] == "working"

    def test_a_password_change_ends_the_binding(self) -> None:
        task_id = MCPClient(user=self.alice, tasks=True).start_tool("slow_compute", {"seconds": 60})["taskId"]
        self.alice.set_password("new")
        self.alice.save()
        with pytest.raises(JSONRPCError) as raised:
            MCPClient(user=self.alice, tasks=True).get_task(task_id)
        assert raised.value.code == -32602

    def test_an_expired_task_is_unknown_and_purged(self) -> None:
        client = MCPClient(tasks=True)
        started: list[str] = []

        def start(seconds: float) -> tuple[str, datetime]:
            with mcp_settings(TASK_TTL_MS=int(seconds * 1000)):
                created = client.start_tool("slow_compute", {"seconds": 60})
            assert created["ttlMs"] == int(seconds * 1000)
            started.append(created["taskId"])
            expires = MCPTask.objects.get(pk=created["taskId"]).expires
            assert expires is not None
            return created["taskId"], expires

        def poll(task_id: str) -> int:
            try:
                status = client.get_task(task_id)["status"]
            except JSONRPCError as exc:
                return 404 if exc.message == NOT_FOUND else 500
            return 200 if status == "working" else 500

        task_id = served_before_expiry(start, poll)  # a poll before the expiry finds it
        wait_past(MCPTask.objects.get(pk=task_id).expires)
        with pytest.raises(JSONRPCError) as raised:
            client.get_task(task_id)
        assert (raised.value.code, raised.value.message) == (-32602, NOT_FOUND)
        kept = MCPClient(tasks=True).start_tool("slow_compute", {"seconds": 60})["taskId"]
        out = StringIO()
        call_command("mcp_tasks_purge", stdout=out)
        assert f"Deleted {len(started)} expired" in out.getvalue()  # one, or more on a loaded machine
        assert list(MCPTask.objects.values_list("pk", flat=True)) == [kept]

    def test_input_before_the_task_is_the_requests_own_round(self) -> None:
        result = MCPClient(tasks=True).call_tool("test_tool_with_task", answer=lambda r: accept({"name": "Alice"}))
        assert result.text == "Hello, Alice, from a task!"
        assert [r.keys for r in result.rounds] == [["user_name"]]
        row = MCPTask.objects.get(pk=result.task_id)
        assert list(row.answers) == ["user_name"] and row.rounds == 0

    def test_audit_rows_for_a_tasks_life(self) -> None:
        with mcp_settings(AUDIT={"ENABLED": True, "ASYNC_WRITES": False}):
            result = MCPClient(tasks=True).call_tool("confirm_delete", {"filename": "b"}, answer=lambda r: True)
            MCPClient(tasks=True).cancel_task(
                MCPClient(tasks=True).start_tool("slow_compute", {"seconds": 9})["taskId"]
            )
            audit.flush()
        kinds = list(AuditEvent.objects.order_by("id").values_list("kind", flat=True))
        assert kinds == [
            Kind.TASK_CREATED,
            Kind.TASK_INPUT_REQUIRED,
            Kind.TASK_COMPLETED,
            Kind.TASK_CREATED,
            Kind.TASK_CANCELLED,
        ]
        assert AuditEvent.objects.filter(target="confirm_delete").count() == 3
        assert result.task_status == "completed"

    def test_every_audit_row_of_a_task_names_its_user(self) -> None:
        """The rows a worker writes (input_required, completed, failed, cancelled) know the task's
        principal only by its label: they still point at its user, as task_created does. The
        lost run fails at once (TASK_RETRIES=0): with retries left it would run again."""
        with mcp_settings(AUDIT={"ENABLED": True, "ASYNC_WRITES": False}, TASK_RETRIES=0):
            MCPClient(user=self.alice, tasks=True).call_tool("confirm_delete", {"filename": "b"}, answer=lambda r: True)
            client = MCPClient(user=self.alice, tasks=True)
            client.cancel_task(client.start_tool("slow_compute", {"seconds": 9})["taskId"])
            lost = client.start_tool("slow_compute", {"seconds": 9})["taskId"]
            MCPTask.objects.filter(pk=lost).update(lease_until=timezone.now() - timedelta(seconds=1))
            assert client.get_task(lost)["status"] == "failed"
            audit.flush()
        rows = list(AuditEvent.objects.filter(kind__startswith="task_").values_list("kind", "user_id", "principal"))
        assert {kind for kind, *_ in rows} == {
            Kind.TASK_CREATED,
            Kind.TASK_INPUT_REQUIRED,
            Kind.TASK_COMPLETED,
            Kind.TASK_CANCELLED,
            Kind.TASK_FAILED,
        }
        assert {(user, principal) for _, user, principal in rows} == {(self.alice.pk, f"auth.user:{self.alice.pk}")}
        self.client.force_login(User.objects.create_superuser("root", password="pw"))
        page = self.client.get("/admin/mcp_django/auditevent/").content.decode()
        assert "(deleted)" not in page and "alice" in page


class InATestCase(TestCase):
    """A project's own TestCase on startproject's defaults (audit rows written in the
    background, SQLite): the task's run, its heartbeat and its audit rows stay in the test's
    transaction, where its rows are, and print nothing."""

    def test_a_task_run_by_the_test_client_logs_nothing(self) -> None:
        alice = User.objects.create_user("alice", password="pw")
        with (
            mcp_settings(AUDIT={"ENABLED": True, "ASYNC_WRITES": True}),
            self.assertNoLogs(level="WARNING"),
        ):
            asked = MCPClient(user=alice, tasks=True).call_tool(
                "confirm_delete", {"filename": "a"}, answer=lambda r: True
            )
            # Long enough for a few beats (CANCEL_POLL) of its heartbeat.
            slow = MCPClient(user=alice, tasks=True).call_tool("slow_compute", {"seconds": 1})
        assert (asked.task_status, slow.text) == ("completed", "computed result in 1s")
        # Written here, in the test's transaction, not by the writer thread after it.
        assert AuditEvent.objects.filter(kind=Kind.TASK_COMPLETED, user=alice).count() == 2

    def test_the_heartbeat_of_a_run_in_the_test_client_sees_a_cancel(self) -> None:
        from mcp_django import Context, mcp

        async def cancels_itself(ctx: Context) -> str:
            await MCPTask.objects.filter(tool="tasktest_cancels_itself").aupdate(cancel_requested=True)
            for _ in range(50):  # the heartbeat reads the flag every CANCEL_POLL seconds
                await ctx.check_cancelled()
                await asyncio.sleep(0.1)
            return "never cancelled"

        mcp.tool(name="tasktest_cancels_itself", task="required")(cancels_itself)
        try:
            with self.assertNoLogs(level="WARNING"):
                client = MCPClient(tasks=True)
                task_id = client.start_tool("tasktest_cancels_itself")["taskId"]
                client.run_task(task_id)
            assert client.get_task(task_id)["status"] == "cancelled"
        finally:
            mcp.remove("tools", "tasktest_cancels_itself")


@pytest.mark.django_db
def test_tasks_methods_without_the_opt_in_are_32021(raw_inprocess: Raw) -> None:
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        params = {"taskId": "x", "inputResponses": {}}
        response = raw_inprocess.post(method, params, headers={"mcp-name": "x"})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32021


LEGACY_TASKS = "(tasks are the io.modelcontextprotocol/tasks extension of MCP 2026-07-28; this connection speaks "


@pytest.mark.django_db
def test_tasks_methods_do_not_exist_on_legacy_revisions() -> None:
    """A legacy client cannot declare the extension's opt-in: no -32021 naming it, but the
    -32601 of a method its revision does not have, saying which revision has it."""
    for revision in ("2025-11-25", "2025-03-26"):
        client = MCPClient(revision=revision, tasks=True)
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            with pytest.raises(JSONRPCError) as raised:
                client.request(method, {"taskId": "x", "inputResponses": {}})
            assert raised.value.code == -32601, (revision, method)
            assert raised.value.message == f"Method not found: {method} {LEGACY_TASKS}{revision})"


@pytest.mark.django_db
def test_tasks_methods_need_mcp_name_and_removed_ones_are_32601(raw_inprocess: Raw) -> None:
    response = raw_inprocess.post("tasks/get", {"taskId": "x"}, caps=TASK_CAPS)
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32020)
    response = raw_inprocess.post("tasks/get", {"taskId": "x"}, caps=TASK_CAPS, headers={"mcp-name": "y"})
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32020)
    response = raw_inprocess.post("tasks/get", {"taskId": "x"}, caps=TASK_CAPS, headers={"mcp-name": "x"})
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32602)
    for method in ("tasks/result", "tasks/list"):
        response = raw_inprocess.post(method, {"taskId": "x"}, caps=TASK_CAPS, headers={"mcp-name": "x"})
        assert response.json()["error"]["code"] == -32601


@pytest.mark.django_db
def test_malformed_tasks_requests_are_errors_not_500s(raw_inprocess: Raw) -> None:
    created = raw_inprocess.call("slow_compute", {"seconds": 60}, caps=TASK_CAPS).json()["result"]
    task_id = created["taskId"]
    bad = [
        ("tasks/get", {"taskId": 7}, "7"),
        ("tasks/get", {}, ""),
        ("tasks/update", {"taskId": task_id, "inputResponses": []}, task_id),
        ("tasks/update", {"taskId": task_id}, task_id),
        ("tasks/get", {"taskId": "x" * 500}, "x" * 500),
    ]
    for method, params, name in bad:
        response = raw_inprocess.post(method, params, caps=TASK_CAPS, headers={"mcp-name": name})
        assert response.status_code == 400, (method, params)
        assert response.json()["error"]["code"] in (-32602, -32020), (method, params)


def test_a_nul_in_a_task_id_is_an_unknown_task(raw: Raw, live_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """PostgreSQL's text holds no NUL: a task id with one never reaches a query (it was a
    DataError, -32603 and a traceback per request), and is answered as any unknown task,
    over HTTP (a base64 Mcp-Name carries it) and over websockets."""
    import base64
    import logging

    from tests.legacy_fixtures import ws_client

    task_id = raw.call("slow_compute", {"seconds": 60}, caps=TASK_CAPS).json()["result"]["taskId"]
    requests = [
        (method, {"taskId": bad, "inputResponses": {}})
        for bad in (task_id[:10] + "\x00" + task_id[11:], "\x00", task_id + "\x00")
        for method in ("tasks/get", "tasks/update", "tasks/cancel")
    ]
    caplog.set_level(logging.WARNING)
    for method, params in requests:
        name = "=?base64?" + base64.b64encode(params["taskId"].encode()).decode() + "?="
        response = raw.post(method, params, caps=TASK_CAPS, headers={"mcp-name": name})
        assert response.status_code == 400, (method, params)
        assert response.json()["error"] == {"code": -32602, "message": NOT_FOUND}

    async def over_websockets() -> list[dict[str, Any]]:
        async with ws_client(live_url) as client:
            return [
                (await client.request(method, {**params, "_meta": meta(TASK_CAPS)}))["error"]
                for method, params in requests
            ]

    assert asyncio.run(over_websockets()) == [{"code": -32602, "message": NOT_FOUND}] * len(requests)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert _get(raw, task_id)["status"] == "working"


def test_a_database_outage_is_a_503_said_once_by_the_breaker(
    raw_inprocess: Raw, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/deployment.md, "What an outage logs": the breaker's two lines, no traceback per poll."""
    import logging

    from django.db import OperationalError

    from mcp_django import breaker
    from mcp_django.tasks import store

    task_id = raw_inprocess.call("slow_compute", {"seconds": 60}, caps=TASK_CAPS).json()["result"]["taskId"]

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("the database 'outage' refuses connections since 0.1 s (connection refused)")

    monkeypatch.setattr(store, "_polled", refused)
    gate = breaker.database("outage")
    try:
        with caplog.at_level(logging.WARNING):
            gate.failed(OperationalError("connection refused"))
            for method in ("tasks/get", "tasks/update", "tasks/cancel") * 3:
                params = {"taskId": task_id, "inputResponses": {}}
                response = raw_inprocess.post(method, params, caps=TASK_CAPS, headers={"mcp-name": task_id})
                assert response.status_code == 503, response.text
                assert response.json()["error"]["code"] == -32603
            gate.closed()
    finally:
        gate.reset()
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().split(" (")[0] for r in lines] == [
        "the database 'outage' is unavailable",
        "the database 'outage' answers again",
    ]
    assert not any(r.exc_info for r in lines)
    monkeypatch.undo()
    assert _get(raw_inprocess, task_id)["status"] == "working"


@pytest.mark.django_db
def test_discover_advertises_the_extension(raw_inprocess: Raw) -> None:
    caps = raw_inprocess.post("server/discover", {}, caps={}).json()["result"]["capabilities"]
    assert caps["extensions"][EXT] == {}
    assert "tasks" not in caps
    assert meta()  # the shared helper still builds the default _meta


class Operators(TestCase):
    def setUp(self) -> None:
        self.admin = User.objects.create_superuser("root", password="pw")

    def test_the_admin_lists_filters_and_cancels_tasks(self) -> None:
        client = MCPClient(tasks=True)
        waiting = client.start_tool("confirm_delete", {"filename": "c"})["taskId"]
        client.run_task(waiting)
        running = client.start_tool("slow_compute", {"seconds": 60})["taskId"]
        MCPTask.objects.filter(pk=running).update(lease_until=timezone.now() + timedelta(seconds=30))
        done = client.start_tool("slow_compute", {"seconds": 0})["taskId"]
        client.run_task(done)
        self.client.force_login(self.admin)
        url = "/admin/mcp_django/mcptask/"
        page = self.client.get(url).content.decode()
        assert "confirm_delete" in page and "slow_compute" in page
        filtered = self.client.get(url + "?status__exact=input_required").content.decode()
        assert waiting[:10] in filtered and running[:10] not in filtered
        assert self.client.get(url + "add/").status_code == 403
        response = self.client.post(url, {"action": "cancel_tasks", "_selected_action": [waiting, running, done]})
        assert response.status_code == 302
        statuses = dict(MCPTask.objects.values_list("pk", "status"))
        assert statuses[waiting] == Status.CANCELLED
        assert statuses[running] == Status.WORKING and MCPTask.objects.get(pk=running).cancel_requested
        assert statuses[done] == Status.COMPLETED  # a finished task stays as it ended

    def test_checks_report_a_backend_that_cannot_run_tasks(self) -> None:
        from django.core.checks import run_checks
        from django.test import override_settings

        def ids() -> set[str]:
            return {m.id for m in run_checks() if m.id and m.id.startswith(("mcp_django.E03", "mcp_django.W03"))}

        with override_settings(TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}):
            assert ids() == set()
        with override_settings(TASKS={"default": {"BACKEND": f"{BACKENDS}.dummy.DummyBackend"}}):
            assert ids() == {"mcp_django.W031"}
        with override_settings(TASKS={"default": {"BACKEND": f"{BACKENDS}.immediate.ImmediateBackend"}}):
            assert ids() == {"mcp_django.W030"}  # DEBUG is off in the tests
        with mcp_settings(TASK_BACKEND="nowhere"):
            assert ids() == {"mcp_django.E030"}

    def test_mcp_handlers_marks_task_tools(self) -> None:
        import json

        out = StringIO()
        call_command("mcp_handlers", "--json", "--type", "tool", stdout=out)
        tools = {row["name"]: row.get("task") for row in json.loads(out.getvalue())}
        assert (tools["slow_compute"], tools["failing_job"], tools["greet"]) == ("optional", "required", None)

    def test_the_demo_report_runs_as_a_task_and_asks_once(self) -> None:
        from project.demo import mcp as demo

        # Its steps' sleeps (eight seconds over its two attempts) are not what is tested.
        with mock.patch.object(demo, "REPORT_STEP_SECONDS", 0):
            result = MCPClient(tasks=True).call_tool("sales_report", {"quarter": "Q2"}, answer={"refunds": False})
        assert result.text == "Sales report for Q2: 1,204 orders, without refunds."
        assert result.task_states == ["working", "input_required", "working", "completed"]


class Handlers(TestCase):
    """Task handlers written in other ways: sync ones, ones that misuse keys, ImmediateBackend."""

    def test_a_sync_handler_runs_as_a_task_and_sees_the_cancel(self) -> None:
        from mcp_django import SyncContext, mcp

        seen: list[str] = []

        def sync_task(ctx: SyncContext, n: int) -> str:
            ctx.check_cancelled()
            if not ctx.confirm(f"Go with {n}?", key="go"):
                return "stopped"
            seen.append("ran")
            return f"went with {n}"

        mcp.tool(name="tasktest_sync", task="optional")(sync_task)
        try:
            result = MCPClient(tasks=True).call_tool("tasktest_sync", {"n": 3}, answer=lambda r: True)
            assert (result.text, result.task_status, seen) == ("went with 3", "completed", ["ran"])
            client = MCPClient(tasks=True)
            task_id = client.start_tool("tasktest_sync", {"n": 4})["taskId"]
            MCPTask.objects.filter(pk=task_id).update(cancel_requested=True)
            client.run_task(task_id)
            assert client.get_task(task_id)["status"] == "cancelled" and seen == ["ran"]
        finally:
            mcp.remove("tools", "tasktest_sync")

    def test_a_key_asked_again_with_another_question_fails_the_task(self) -> None:
        from mcp_django import Context, mcp

        async def rekey(ctx: Context) -> str:
            first = await ctx.confirm("First?", key="k")
            await ctx.confirm(f"Second, after {first}?", key="k")
            return "never"

        mcp.tool(name="tasktest_rekey", task="optional")(rekey)
        try:
            with pytest.raises(JSONRPCError) as raised:
                MCPClient(tasks=True).call_tool("tasktest_rekey", answer=lambda r: True)
            assert raised.value.code == -32603 and "'k'" in raised.value.message
        finally:
            mcp.remove("tools", "tasktest_rekey")

    def test_an_answer_of_the_wrong_shape_fails_the_task_with_32602(self) -> None:
        client = MCPClient(tasks=True)
        task_id = client.start_tool("confirm_delete", {"filename": "d"})["taskId"]
        client.run_task(task_id)
        client.update_task(task_id, {"confirm_delete": "yes please"})
        client.run_task(task_id)
        task = client.get_task(task_id)
        assert task["status"] == "failed" and task["error"]["code"] == -32602


@pytest.mark.django_db(transaction=True)
def test_immediate_backend_runs_the_task_before_the_create_answers() -> None:
    from django.test import override_settings

    with override_settings(TASKS={"default": {"BACKEND": f"{BACKENDS}.immediate.ImmediateBackend"}}):
        client = MCPClient(tasks=True, run_tasks=False)
        created = client.start_tool("slow_compute", {"seconds": 0, "label": "now"})
        task = client.get_task(created["taskId"])
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"] == "computed now in 0s"


def _listen(raw: Raw, task_ids: list[str]) -> Any:
    params = {"_meta": meta(TASK_CAPS), "notifications": {"taskIds": task_ids}}
    body = {"jsonrpc": "2.0", "id": "listen-tasks", "method": "subscriptions/listen", "params": params}
    return raw.client.stream("POST", raw.url, json=body, headers=raw.headers("subscriptions/listen", params))


def _get(raw: Raw, task_id: str) -> dict[str, Any]:
    response = raw.post("tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers={"mcp-name": task_id})
    result = response.json()["result"]
    result.pop("_meta")
    result.pop("resultType")
    return result


def test_listen_pushes_the_tasks_status_changes_it_names(raw: Raw) -> None:
    from tests.test_subscriptions import data_events

    task_id = raw.call("confirm_delete", {"filename": "a.csv"}, caps=TASK_CAPS).json()["result"]["taskId"]
    other = raw.call("confirm_delete", {"filename": "b.csv"}, caps=TASK_CAPS).json()["result"]["taskId"]
    foreign = raw.call("confirm_delete", {"filename": "c.csv"}, caps=TASK_CAPS).json()["result"]["taskId"]
    # Bound to someone else from now on: its changes are not this listener's to see.
    MCPTask.objects.filter(pk=foreign).update(principal="user:999")
    tag = {"io.modelcontextprotocol/subscriptionId": "listen-tasks"}
    with _listen(raw, [task_id, foreign, task_id, "no-such-task"]) as stream:
        events = data_events(stream.iter_lines())
        ack = next(events)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"taskIds": [task_id, foreign, "no-such-task"]}
        run(other)  # not named: no push
        run(foreign)  # named, but another principal's: no push
        run(task_id)
        pushed = next(events)
        assert pushed["method"] == "notifications/tasks"
        assert pushed["params"] == {**_get(raw, task_id), "_meta": tag}
        assert pushed["params"]["status"] == "input_required"
        assert list(pushed["params"]["inputRequests"]) == ["confirm_delete"]
        answer = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}
        raw.post(
            "tasks/update",
            {"taskId": task_id, "inputResponses": answer},
            caps=TASK_CAPS,
            headers={"mcp-name": task_id},
        )
        assert next(events)["params"]["status"] == "working"
        run(task_id)
        done = next(events)["params"]
        assert done == {**_get(raw, task_id), "_meta": tag}
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Deleted a.csv."
        assert done["result"]["resultType"] == "complete"  # the CallToolResult as tools/call answers it


def test_listen_for_tasks_needs_the_opt_in_and_a_list_of_ids(raw_inprocess: Raw) -> None:
    params = {"notifications": {"taskIds": ["x"]}}
    response = raw_inprocess.post("subscriptions/listen", params, caps={"elicitation": {}})
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {EXT: {}}}}
    for bad in ("x", [7], [""]):
        response = raw_inprocess.post("subscriptions/listen", {"notifications": {"taskIds": bad}}, caps=TASK_CAPS)
        assert response.json()["error"]["code"] == -32602, bad


def test_progress_reports_are_the_tasks_status_message_polled_and_pushed(raw: Raw) -> None:
    """``ctx.report_progress(...)`` inside a task: its message and count are the task's
    ``statusMessage`` in ``tasks/get`` and in the pushes to its listeners, within a beat."""
    import threading

    from mcp_django import Context, SyncContext, mcp
    from tests.test_subscriptions import data_events

    polled: list[str] = []

    async def counts(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "Counting orders")
        await asyncio.sleep(1)  # several heartbeats (CANCEL_POLL) while it works
        await ctx.report_progress(2, 2)
        await asyncio.sleep(1)
        return "counted"

    def counts_sync(ctx: SyncContext) -> str:
        ctx.report_progress(1, message="Reading the ledger")
        time.sleep(1)
        return "read"

    mcp.tool(name="tasktest_progress", task="required")(counts)
    mcp.tool(name="tasktest_progress_sync", task="required")(counts_sync)
    try:
        for tool, expected in (
            ("tasktest_progress", ["Counting orders (1/2)", "2/2"]),
            ("tasktest_progress_sync", ["Reading the ledger (1)"]),
        ):
            task_id = raw.call(tool, caps=TASK_CAPS).json()["result"]["taskId"]
            with _listen(raw, [task_id]) as stream:
                events = data_events(stream.iter_lines())
                assert next(events)["method"] == "notifications/subscriptions/acknowledged"
                worker = threading.Thread(target=run, args=(task_id,))
                worker.start()
                pushed = []
                while not pushed or pushed[-1]["status"] == "working":
                    pushed.append(next(events)["params"])
                    if pushed[-1]["status"] == "working" and len(polled) < len(pushed):
                        polled.append(_get(raw, task_id).get("statusMessage", ""))
                worker.join(10)
            messages = [p.get("statusMessage") for p in pushed if p["status"] == "working"]
            assert messages == expected, pushed
            assert pushed[-1]["status"] == "completed" and "statusMessage" not in pushed[-1]
        assert "Counting orders (1/2)" in polled
    finally:
        mcp.remove("tools", "tasktest_progress")
        mcp.remove("tools", "tasktest_progress_sync")
