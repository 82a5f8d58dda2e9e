"""MCP tasks of an endpoint other than the default one (a Registry of its own), and the poll's
fast path (mcp_django.tasks.runner, mcp_django.tasks.lost, mcp_django.tasks.store)."""

from __future__ import annotations

import sys
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections
from django.test import TestCase

from mcp_django import Context, endpoints
from mcp_django.registry import Registry, mcp
from mcp_django.tasks import lost, store
from mcp_django.tasks.models import MCPTask, Status
from mcp_django.tasks.store import NOT_FOUND
from mcp_django.testing import JSONRPCError, MCPClient
from mcp_django.transports.asgi import MCPApplication

# A second endpoint's registry, with a task tool named like one of the default registry's
# (the demo's slow_compute), so the right registry's tool is seen to run.
second = Registry("tasks_second")


@second.tool(task="optional")
async def slow_compute(ctx: Context, seconds: float = 0.0, label: str = "") -> str:
    """The second endpoint's own slow_compute."""
    await ctx.check_cancelled()
    if await ctx.confirm(f"Compute {label}?", key="go"):
        return f"second computed {label}"
    return "second declined"


# Another, with a tool that runs only as a task.
staff = Registry("tasks_staff")


@staff.tool(task="required")
def audit_books(ctx: Context) -> str:
    """Staff only."""
    return "books audited"


@staff.tool(task="required")
def reconcile_books(ctx: Context) -> str:
    """Fails with an error that is no ToolError: a bug in the tool."""
    raise RuntimeError("the ledger at db-7 is locked")


def _forgotten(*names: str) -> Any:
    """A worker process that has not imported the modules making these endpoints yet."""
    table = {name: registry for name, registry in endpoints._named.items() if name not in names}
    return mock.patch.object(endpoints, "_named", table)


class OtherRegistries(TestCase):
    def setUp(self) -> None:
        self.alice = User.objects.create_user("alice", password="pw")

    def mcp_client(self, registry: Registry, **kwargs: Any) -> MCPClient:
        return MCPClient(user=self.alice, tasks=True, app=MCPApplication(registry), **kwargs)

    def test_a_task_tool_of_another_registry_runs_as_a_task_there(self) -> None:
        result = self.mcp_client(second).call_tool("slow_compute", {"label": "x"}, answer={"go": True})
        assert result.text == "second computed x"
        assert result.task_states == ["working", "input_required", "working", "completed"]
        row = MCPTask.objects.get(pk=result.task_id)
        assert (row.endpoint, row.tool, row.status) == ("tasks_second", "slow_compute", "completed")
        # The default registry's tasks are recorded as before.
        default = MCPClient(user=self.alice, tasks=True).start_tool("slow_compute", {"seconds": 60})
        assert MCPTask.objects.get(pk=default["taskId"]).endpoint == "default"

    def test_a_named_registry_is_recorded_by_its_name(self) -> None:
        result = self.mcp_client(staff).call_tool("audit_books")
        assert (result.text, result.task_status) == ("books audited", "completed")
        assert MCPTask.objects.get(pk=result.task_id).endpoint == "tasks_staff"

    def test_a_task_tool_that_raises_completes_with_an_error_that_says_no_more(self) -> None:
        with self.assertLogs("mcp_django", "ERROR") as logged:
            result = self.mcp_client(staff).call_tool("reconcile_books")
        assert (result.task_status, result.is_error) == ("completed", True)
        assert result.text == "Error executing tool reconcile_books"  # the exception's text is the log's
        assert any("tool reconcile_books failed in MCP task" in line for line in logged.output)
        assert "the ledger at db-7 is locked" in "\n".join(logged.output)

    def test_only_the_endpoint_that_made_a_task_answers_for_it(self) -> None:
        theirs = self.mcp_client(second, run_tasks=False).start_tool("slow_compute", {"label": "y"})["taskId"]
        ours = MCPClient(user=self.alice, tasks=True).start_tool("slow_compute", {"seconds": 60})["taskId"]
        answers = []
        for client, task_id in ((MCPClient(user=self.alice, tasks=True), theirs), (self.mcp_client(second), ours)):
            for method, params in (
                ("tasks/get", {"taskId": task_id}),
                ("tasks/update", {"taskId": task_id, "inputResponses": {"go": {"action": "accept"}}}),
                ("tasks/cancel", {"taskId": task_id}),
            ):
                with pytest.raises(JSONRPCError) as raised:
                    client.request(method, params)
                answers.append((raised.value.code, raised.value.message))
        assert set(answers) == {(-32602, NOT_FOUND)}
        assert MCPTask.objects.get(pk=theirs).status == Status.WORKING
        assert self.mcp_client(second).get_task(theirs)["status"] == "working"

    def test_a_worker_that_never_served_the_registry_finds_it(self) -> None:
        from tests import tasks_lazy_endpoint

        client = self.mcp_client(tasks_lazy_endpoint.lazy, run_tasks=False)
        task_id = client.start_tool("slow_compute", {"label": "z"})["taskId"]
        # The worker's process: the module that makes the endpoint was never imported there.
        with (
            _forgotten("tasks_lazy"),
            mock.patch.dict(sys.modules),
            mock.patch("django.conf.settings.ROOT_URLCONF", "tests.tasks_lazy_endpoint"),
        ):
            del sys.modules["tests.tasks_lazy_endpoint"]
            assert endpoints.named("tasks_lazy") is None
            client.run_task(task_id)  # found once the URLconf is imported
            assert endpoints.named("tasks_lazy") is not tasks_lazy_endpoint.lazy  # made anew, there
            assert lost.endpoint("no_such_endpoint") is None
        assert client.get_task(task_id)["status"] == "input_required"
        assert lost.endpoint("default") is mcp

    def test_a_registry_no_other_process_can_find_fails_its_task_saying_so(self) -> None:
        client = self.mcp_client(second, run_tasks=False)
        task_id = client.start_tool("slow_compute", {"label": "gone"})["taskId"]
        with _forgotten("tasks_second"), mock.patch("django.conf.settings.ROOT_URLCONF", "project.urls"):
            client.run_task(task_id)
        task = client.get_task(task_id)
        assert task["status"] == "failed" and "not loaded in the worker's process" in task["error"]["message"]

    def test_a_task_tool_of_a_registry_without_a_name_is_refused_not_run_as_the_defaults(self) -> None:
        local = Registry()  # audited as the default endpoint: a worker would find mcp_django.mcp by that name

        @local.tool(task="optional")
        def slow_compute() -> str:
            return "local"

        with pytest.raises(JSONRPCError) as raised:
            self.mcp_client(local, run_tasks=False).start_tool("slow_compute")
        assert raised.value.code == -32603 and "has no name of its own" in raised.value.message
        assert not MCPTask.objects.exists()


class PollFastPath(TestCase):
    def test_the_poll_reads_what_the_orm_reads_on_either_path(self) -> None:
        client = MCPClient(tasks=True)
        result = client.call_tool("confirm_delete", {"filename": "b.txt"}, answer=lambda request: True)
        row = MCPTask.objects.get(pk=result.task_id)
        # Nothing observes this connection's queries: the DB-API cursor, not Django's.
        with mock.patch.object(connections["default"], "cursor", side_effect=AssertionError("Django's cursor")):
            fast = store._polled(row.pk)
        assert fast is not None
        seen: list[str] = []

        def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            seen.append(sql)
            return execute(sql, params, many, context)

        # Anything observing the connection's queries sees the poll's: it takes Django's cursor.
        with connection.execute_wrapper(watch):
            observed = store._polled(row.pk)
        assert len(seen) == 1 and "mcp_django_mcptask" in seen[0] and "ORDER BY" not in seen[0]
        assert observed is not None
        for polled in (fast, observed):
            assert [getattr(polled, name) for name in store._POLLED] == [getattr(row, name) for name in store._POLLED]
        assert fast.result == row.result and fast.result["content"][0]["text"] == "Deleted b.txt."
        assert fast.created.tzinfo is not None and fast.status == Status.COMPLETED
        assert store._polled("no-such-task") is None
