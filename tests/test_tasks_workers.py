"""Task workers you can see (their heartbeat rows, ``manage.py mcp_tasks status``, the check
W032, the admin's list, a new task's ``statusMessage``), the sweep they run, and a TTL that
stops the work: in process (tests/test_tasks_outages.py has real workers and outages)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.core.management import CommandError, call_command
from django.test import TestCase
from django.utils import timezone

from mcp_django.models import AuditEvent, Kind
from mcp_django.tasks import workers
from mcp_django.tasks.lost import TTL_ENDED
from mcp_django.tasks.models import MCPTask, MCPWorker, Status
from mcp_django.tasks.store import SILENT
from mcp_django.testing import MCPClient
from tests.conftest import mcp_settings

NO_WORKER = "queued, but no task worker has been seen alive lately"


def forget_notice() -> None:
    workers._notice = (float("-inf"), "")  # the per-process second a verdict is kept


def worker(name: str = "w1", seen_ago: float = 0.0) -> MCPWorker:
    now = timezone.now()
    return MCPWorker.objects.create(
        id=name, host="box", pid=42, backend="default", started=now, seen=now - timedelta(seconds=seen_ago)
    )


class Liveness(TestCase):
    def setUp(self) -> None:
        forget_notice()
        self.addCleanup(forget_notice)

    def test_a_new_task_says_when_no_worker_is_alive_and_its_run_clears_it(self) -> None:
        client = MCPClient(tasks=True)
        worker("gone", seen_ago=3600)  # a worker that died long ago does not count
        created = client.start_tool("slow_compute", {"seconds": 0})
        assert created["statusMessage"].startswith(NO_WORKER)
        assert client.get_task(created["taskId"])["statusMessage"].startswith(NO_WORKER)
        client.run_task(created["taskId"])
        assert "statusMessage" not in client.get_task(created["taskId"])
        worker("alive")
        forget_notice()
        assert "statusMessage" not in client.start_tool("slow_compute", {"seconds": 0})

    def test_mcp_tasks_status_lists_the_live_workers_and_the_queue(self) -> None:
        client = MCPClient(tasks=True)
        client.start_tool("slow_compute", {"seconds": 60})
        client.run_task(client.start_tool("confirm_delete", {"filename": "x"})["taskId"])
        out = StringIO()
        with pytest.raises(CommandError) as raised:
            call_command("mcp_tasks", "status", stdout=out)
        assert raised.value.returncode == 2 and "no task worker is alive" in str(raised.value)
        assert "0 task worker(s) alive" in out.getvalue()
        assert "1 task(s) queued, 0 running, 1 waiting for input" in out.getvalue()
        worker("w1")
        worker("old", seen_ago=3600)
        out = StringIO()
        call_command("mcp_tasks", "status", stdout=out)
        assert "1 task worker(s) alive" in out.getvalue() and "w1  box:42" in out.getvalue()
        assert "old" not in out.getvalue()
        out = StringIO()
        call_command("mcp_tasks", "status", "--json", stdout=out)
        assert '"queued": 1' in out.getvalue() and '"id": "w1"' in out.getvalue()

    def test_the_deployment_check_warns_when_no_worker_is_alive(self) -> None:
        client = MCPClient(tasks=True)
        assert client.list_tools()  # the demo's task tools are registered

        def ids(deploy: bool) -> set[str]:
            found = run_checks(include_deployment_checks=deploy, databases=["default"])
            return {m.id for m in found if m.id and m.id.startswith("mcp_django.W032")}

        assert ids(deploy=True) == {"mcp_django.W032"}
        assert ids(deploy=False) == set()  # migrate, runserver and the test runner: not theirs
        assert not [m for m in run_checks(include_deployment_checks=True) if m.id == "mcp_django.W032"]
        worker("w1")
        assert ids(deploy=True) == set()

    def test_the_admin_list_shows_the_workers_and_the_queue(self) -> None:
        admin = User.objects.create_superuser("root", password="pw")
        self.client.force_login(admin)
        MCPClient(tasks=True).start_tool("slow_compute", {"seconds": 60})
        page = self.client.get("/admin/mcp_django/mcptask/").content.decode()
        assert "No task worker seen alive lately" in page and "Queued: 1, running: 0" in page
        worker("w1")
        page = self.client.get("/admin/mcp_django/mcptask/").content.decode()
        assert "1 task worker alive" in page and "box:42" in page


class Sweep(TestCase):
    def test_the_sweep_runs_lost_runs_again_and_ends_tasks_past_their_ttl(self) -> None:
        client = MCPClient(tasks=True)
        lost, running, queued, asking = (client.start_tool("slow_compute", {"seconds": 60})["taskId"] for _ in range(4))
        past = timezone.now() - timedelta(seconds=1)
        MCPTask.objects.filter(pk=lost).update(lease_until=past, runs=1)
        MCPTask.objects.filter(pk=running).update(lease_until=timezone.now() + timedelta(seconds=30), expires=past)
        MCPTask.objects.filter(pk=queued).update(expires=past)
        MCPTask.objects.filter(pk=asking).update(status=Status.INPUT_REQUIRED, expires=past)
        with self.captureOnCommitCallbacks(execute=True):
            found = workers.sweep()
        assert found == {"retried": 1, "failed": 0, "cancelled": 2, "asked_to_stop": 1}
        rows = {row.pk: row for row in MCPTask.objects.all()}
        assert rows[lost].status == Status.WORKING and rows[lost].retried == 1 and rows[lost].lease_until is None
        assert SILENT in rows[lost].status_message
        assert rows[running].status == Status.WORKING and rows[running].cancel_requested
        assert (rows[queued].status, rows[queued].status_message) == (Status.CANCELLED, TTL_ENDED)
        assert rows[asking].status == Status.CANCELLED
        # The retried run is a run like the first: it completes (here, at once).
        MCPTask.objects.filter(pk=lost).update(arguments={"seconds": 0})
        client.run_task(lost)
        assert MCPTask.objects.get(pk=lost).status == Status.COMPLETED

    def test_mcp_tasks_sweep_sweeps_once_and_says_what_it_did(self) -> None:
        client = MCPClient(tasks=True)
        queued = client.start_tool("slow_compute", {"seconds": 60})["taskId"]
        MCPTask.objects.filter(pk=queued).update(expires=timezone.now() - timedelta(seconds=1))
        out = StringIO()
        call_command("mcp_tasks", "sweep", stdout=out)
        assert out.getvalue().strip() == "retried 0, failed 0, cancelled 1, asked_to_stop 0"
        assert MCPTask.objects.get(pk=queued).status == Status.CANCELLED


class TTL(TestCase):
    def test_a_task_whose_ttl_ends_while_it_runs_is_stopped_and_never_completed(self) -> None:
        client = MCPClient(tasks=True)
        with mcp_settings(TASK_TTL_MS=600):
            task_id = client.start_tool("slow_compute", {"seconds": 30})["taskId"]
        started = timezone.now()
        client.run_task(task_id)  # its heartbeat sees the TTL end and asks the handler to stop
        assert (timezone.now() - started).total_seconds() < 5
        row = MCPTask.objects.get(pk=task_id)
        assert (row.status, row.status_message) == (Status.CANCELLED, TTL_ENDED)
        kinds = list(AuditEvent.objects.filter(request_id=task_id[:12]).values_list("kind", flat=True))
        assert Kind.TASK_COMPLETED not in kinds and Kind.TASK_CANCELLED in kinds


class LostOrNot(TestCase):
    def test_a_handler_error_is_not_retried_and_ends_with_its_real_reason(self) -> None:
        client = MCPClient(tasks=True)
        tool_error = client.start_tool("failing_job")["taskId"]
        client.run_task(tool_error)
        protocol_error = client.start_tool("protocol_error_job")["taskId"]
        client.run_task(protocol_error)
        task = client.get_task(tool_error)
        assert task["status"] == "completed" and task["result"]["isError"]
        assert "failing_job failed" in task["result"]["content"][0]["text"]
        task = client.get_task(protocol_error)
        assert task["status"] == "failed" and task["error"]["message"] == "protocol_error_job hit an internal error"
        assert list(MCPTask.objects.values_list("retried", flat=True)) == [0, 0]

    def test_a_run_whose_database_connection_fails_under_it_runs_again(self) -> None:
        from django.db import OperationalError

        from mcp_django.tasks import runner

        async def cut_off(*args: object) -> None:
            raise OperationalError("terminating connection due to administrator command")

        client = MCPClient(tasks=True)
        task_id = client.start_tool("slow_compute", {"seconds": 0, "label": "again"})["taskId"]
        with mock.patch.object(runner, "attempt", cut_off), self.captureOnCommitCallbacks(execute=True):
            client.run_task(task_id)
        row = MCPTask.objects.get(pk=task_id)
        assert (row.status, row.retried, row.runs, row.lease_until) == (Status.WORKING, 1, 1, None)
        assert "its database connection failed (terminating connection" in row.status_message
        client.run_task(task_id)  # the run enqueued again
        assert client.get_task(task_id)["result"]["content"][0]["text"] == "computed again in 0s"
        kinds = list(AuditEvent.objects.filter(request_id=task_id[:12]).values_list("kind", flat=True))
        assert sorted(kinds) == [Kind.TASK_COMPLETED, Kind.TASK_CREATED]
