"""The same MCP tasks on a second backend: django-tasks-rq (RQ on a redis-server of the test's
own), with RQ's worker kept alive through its Redis' outages (``manage.py rqworker --job-class
django_tasks_rq.Job --worker-class mcp_django.tasks.rq.Worker``) and the sweeper RQ's workers
lack (``manage.py mcp_tasks sweep --every 1``).

A task with a question runs, asks, is answered and completes, heard by a listener, as on the
database backend (tests/test_tasks_worker.py). Then RQ's Redis is killed for 3 s and started
again empty (no persistence): the worker lives on, the task it was running completes (its
state is in the database), and the task that waited in RQ's forgotten queue is found by the
sweeper (its job is gone) and run again: both complete, and a task made after completes too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest

from tests import shared_services
from tests.processes import ROOT, free_port, serve_demo
from tests.run_names import redis_prefix
from tests.test_faults import Redis
from tests.test_tasks_outages import Listener, settle
from tests.test_tasks_worker import Client

pytestmark = [
    shared_services.needs_postgres,
    shared_services.needs_redis,
    pytest.mark.skipif(
        find_spec("django_tasks_rq") is None and not os.environ.get("CI"),
        reason="needs django-tasks-rq (requirements-test.txt)",
    ),
]

LEASE = 4.0
# RQ's worker class (MCP_TEST_RQ_WORKER=rq.Worker shows that RQ's own quits in the outage).
WORKER = os.environ.get("MCP_TEST_RQ_WORKER", "mcp_django.tasks.rq.Worker")


@dataclass
class RQRig:
    redis: Redis
    env: dict[str, str]
    url: str
    logs: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, *command: str) -> None:
        with open(self.logs / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                [sys.executable, "manage.py", *command], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )


@pytest.fixture(scope="module")
def rig() -> Iterator[RQRig]:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("needs redis-server")
        pytest.skip("needs redis-server")
    db_name, db_url = shared_services.migrated_database("tasks_rq")
    logs = Path(tempfile.mkdtemp(prefix="mcp-tasks-rq-"))
    redis = Redis(logs)
    redis.start()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
        "DATABASE_URL": db_url,
        "REDIS_URL": shared_services.redis(),  # the channel layer: pushes cross processes
        "REDIS_PREFIX": redis_prefix("tasks-rq"),
        "MCP_TASKS_RQ_URL": redis.url,  # RQ's queue: a Redis of its own, which the test kills
        "MCP_REQUEST_STATE_KEY": "tasks-rq-test-key-0123456789abcdef",
        "MCP_ALLOW_ANONYMOUS": "1",
        "MCP_TASK_LEASE_SECONDS": str(LEASE),
        "DJANGO_DEBUG": "0",
    }
    port = free_port()
    server_log = open(logs / "uvicorn.log", "wb")
    out = RQRig(redis, env, f"http://127.0.0.1:{port}/mcp", logs)
    try:
        out.processes["server"] = serve_demo(port, env, server_log)
        out.start("worker", "rqworker", "default", "--job-class", "django_tasks_rq.Job", "--worker-class", WORKER)
        out.start("sweeper", "mcp_tasks", "sweep", "--every", "1")
        yield out
    finally:
        for process in out.processes.values():
            if process.poll() is None:
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(20)
        server_log.close()
        redis.stop()
        shared_services.drop_database(db_name)
        shutil.rmtree(logs, ignore_errors=True)


def wait_claimed(rig: RQRig, task_id: str, timeout: float = 20) -> None:
    """Until the worker's run holds the task's lease."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(rig.env["DATABASE_URL"], autocommit=True) as conn:
        query = "SELECT 1 FROM mcp_django_mcptask WHERE id = %s AND lease_until IS NOT NULL"
        while not conn.execute(query, (task_id,)).fetchone():
            assert time.monotonic() < deadline, f"the worker did not start {task_id} in {timeout} s"
            time.sleep(0.05)


def test_a_task_asks_and_completes_on_rq_as_on_the_database_backend(rig: RQRig) -> None:
    with httpx.Client(timeout=30) as http:
        client = Client(http)
        task_id = client.call(rig.url, "confirm_delete", {"filename": "rq.csv"})["taskId"]
        listener = Listener(rig.url, [task_id])
        listener.start()
        assert listener.ready.wait(10)
        task = client.wait(rig.url, task_id, "input_required", timeout=30)
        assert list(task["inputRequests"]) == ["confirm_delete"]
        # A push reads the task as it is when it goes out: answered before the listener heard of the
        # question, the push would already say working. The listener hears it first, as a client would.
        deadline = time.monotonic() + 10
        while "input_required" not in listener.statuses(task_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        answer = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}
        client.result(rig.url, "tasks/update", {"taskId": task_id, "inputResponses": answer}, name=task_id)
        done = settle(client, rig.url, task_id, 30)
        assert done["result"]["content"][0]["text"] == "Deleted rq.csv."
        deadline = time.monotonic() + 5
        while listener.statuses(task_id)[-1:] != ["completed"] and time.monotonic() < deadline:
            time.sleep(0.05)
        listener.close()
        assert listener.statuses(task_id)[-1:] == ["completed"], listener.statuses(task_id)
        assert "input_required" in listener.statuses(task_id)


def test_rq_redis_killed_and_started_empty_loses_no_task(rig: RQRig) -> None:
    with httpx.Client(timeout=30) as http:
        client = Client(http)
        # One worker: the first task runs, the second waits in RQ's queue.
        running = client.call(rig.url, "slow_compute", {"seconds": 3, "label": "running"})["taskId"]
        queued = client.call(rig.url, "slow_compute", {"seconds": 1, "label": "queued"})["taskId"]
        wait_claimed(rig, running)
        began = time.monotonic()
        rig.redis.stop()
        time.sleep(3)
        rig.redis.start()
        # Bound: the outage, a lease until the forgotten job counts as lost, the sweep, both runs.
        bound = 3 + LEASE + 1 + 3 + 1 + 15
        for task_id, text in ((running, "computed running in 3s"), (queued, "computed queued in 1s")):
            task = settle(client, rig.url, task_id, bound - (time.monotonic() - began))
            assert task["status"] == "completed", task
            assert task["result"]["content"][0]["text"] == text
        print(f"both tasks ended {time.monotonic() - began:.1f} s after RQ's Redis went away")
        for name, process in rig.processes.items():
            assert process.poll() is None, f"{name} exited in the outage"
        fresh = client.call(rig.url, "slow_compute", {"seconds": 0, "label": "after"})["taskId"]
        assert settle(client, rig.url, fresh, 20)["result"]["content"][0]["text"] == "computed after in 0s"
