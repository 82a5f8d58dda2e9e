"""MCP tasks of a registry other than the default one (a second endpoint), and the poll's
fast path (mcp_django.tasks.registries, mcp_django.tasks.store)."""

from __future__ import annotations

import weakref
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections
from django.test import TestCase

from mcp_django import Context
from mcp_django.registry import Registry, mcp
from mcp_django.tasks import registries, store
from mcp_django.tasks.models import MCPTask, Status
from mcp_django.tasks.store import NOT_FOUND
from mcp_django.testing import JSONRPCError, MCPClient
from mcp_django.transports.asgi import MCPApplication

# A second endpoint's registry, with a task tool named like one of the default registry's
# (the demo's slow_compute), so the right registry's tool is seen to run.
second = Registry()


@second.tool(task="optional")
async def slow_compute(ctx: Context, seconds: float = 0.0, label: str = "") -> str:
    """The second endpoint's own slow_compute."""
    await ctx.check_cancelled()
    if await ctx.confirm(f"Compute {label}?", key="go"):
        return f"second computed {label}"
    return "second declined"


# A registry with a name of its own (as several endpoints per project give them).
staff = Registry()
staff.name = "staff"  # type: ignore[attr-defined]


@staff.tool(task="required")
def audit_books(ctx: Context) -> str:
    """Staff only."""
    return "books audited"


def _forgotten() -> Any:
    """The registry caches of a process that never served a task: a worker's."""
    return mock.patch.multiple(registries, _known=weakref.WeakValueDictionary(), _names=weakref.WeakKeyDictionary())


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
        assert (row.registry, row.tool, row.status) == (
            "tests.test_tasks_registries:second",
            "slow_compute",
            "completed",
        )
        # The default registry's tasks are recorded as before.
        default = MCPClient(user=self.alice, tasks=True).start_tool("slow_compute", {"seconds": 60})
        assert MCPTask.objects.get(pk=default["taskId"]).registry == ""

    def test_a_named_registry_is_recorded_by_its_name(self) -> None:
        result = self.mcp_client(staff).call_tool("audit_books")
        assert (result.text, result.task_status) == ("books audited", "completed")
        assert MCPTask.objects.get(pk=result.task_id).registry == "staff"

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
        client = self.mcp_client(second, run_tasks=False)
        task_id = client.start_tool("slow_compute", {"label": "z"})["taskId"]
        with _forgotten():
            client.run_task(task_id)  # found by importing "tests.test_tasks_registries:second"
        assert client.get_task(task_id)["status"] == "input_required"
        with _forgotten():
            assert registries.named("staff") is staff  # found by name among module-level registries
            assert registries.named("tests.test_tasks_registries:nothing") is None
            assert registries.named("no.such.module:second") is None
        assert registries.named("") is mcp

    def test_a_registry_no_other_process_can_find_fails_its_task_saying_so(self) -> None:
        local = Registry()

        @local.tool(task="optional")
        def tiny() -> str:
            return "tiny"

        client = self.mcp_client(local, run_tasks=False)
        task_id = client.start_tool("tiny")["taskId"]
        assert MCPTask.objects.get(pk=task_id).registry.startswith("registry-")
        with _forgotten():
            client.run_task(task_id)
        task = client.get_task(task_id)
        assert task["status"] == "failed" and "not loaded in the worker's process" in task["error"]["message"]


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
