"""MCP tasks outlive their infrastructure: a PostgreSQL cluster of the test's own stopped for
3 s and for 20 s, restarted, frozen, and a worker killed with SIGKILL in the middle of a run.

Two ``manage.py mcp_worker`` processes (one runs the task, the other waits for work), one uvicorn instance and a ``subscriptions/listen``
stream (the run's Redis carries the workers' pushes to it). In each case every task ends
``completed`` (run again from the start when its run was lost) within the bound each test
states, the workers are still running, no task was claimed by a second run while its first
held the lease (``runs <= retried + 1``: a run starts only when the last one was taken for
lost), the listener hears the task's every status change, and the audit log has the task's
``task_created`` and ``task_completed`` rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import shared_services
from tests.processes import ROOT, free_port, serve_demo
from tests.run_names import redis_prefix
from tests.test_database_faults import Postgres, _admin, _pg_bin
from tests.test_tasks_worker import Client, listen_request

pytestmark = [shared_services.needs_postgres, shared_services.needs_redis]

# The lease of a run (MCP_TASK_LEASE_SECONDS): longer than the 3 s outage and the freeze, which
# a run survives without starting again; shorter than the 20 s one, after which it runs again.
LEASE = 9.0
WORK = 3  # seconds of slow_compute per task
# The worker command (MCP_TEST_TASK_WORKER=db_worker shows what django-tasks-db's own does).
WORKER = os.environ.get("MCP_TEST_TASK_WORKER", "mcp_worker")


@dataclass
class Rig:
    pg: Postgres
    env: dict[str, str]
    url: str
    logs: Path
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def database(self) -> str:
        return self.env["DATABASE_URL"].replace("postgres://", "postgresql://")

    def start_worker(self, name: str) -> None:
        log = open(self.logs / f"{name}.log", "ab")
        self.workers[name] = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                WORKER,
                "--interval",
                "0.05",
                "--no-startup-delay",
                "--no-reload",
                "--worker-id",
                name,
                "-v1",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.database, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql, args).fetchall()


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    if _pg_bin("initdb") is None or shutil.which("runuser") is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("needs initdb, pg_ctl and runuser (as root)")
        pytest.skip("needs initdb, pg_ctl and runuser (as root)")
    pg = Postgres()
    server = None
    out = None
    try:
        pg.init()
        pg.start()
        _admin(pg, "CREATE DATABASE app")
        env = {
            **{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
            "DATABASE_URL": pg.url.rsplit("/", 1)[0] + "/app",
            "REDIS_URL": shared_services.redis(),
            "REDIS_PREFIX": redis_prefix("task-outages"),
            "MCP_REQUEST_STATE_KEY": "task-outages-test-key-0123456789abcdef",
            "MCP_ALLOW_ANONYMOUS": "1",
            "MCP_TASK_LEASE_SECONDS": str(LEASE),
            "DJANGO_DB_CONNECT_TIMEOUT": "2",
            "DJANGO_DEBUG": "0",
        }
        dump = shared_services.migrated_dump()
        if dump is not None:
            shared_services.load_dump(dump, env["DATABASE_URL"])
        else:
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        port = free_port()
        server_log = open(pg.dir / "uvicorn.log", "wb")
        server = serve_demo(port, env, server_log)
        out = Rig(pg, env, f"http://127.0.0.1:{port}/mcp", pg.dir)
        for name in ("w1", "w2"):
            out.start_worker(name)
        yield out
    finally:
        for process in [server, *(out.workers.values() if out else [])]:
            if process is not None and process.poll() is None:
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(20)
        with contextlib.suppress(Exception):
            pg.freeze(False)
        with contextlib.suppress(Exception):
            pg.stop()
        shutil.rmtree(pg.dir, ignore_errors=True)


class Listener(threading.Thread):
    """A ``subscriptions/listen`` stream naming the tasks: every ``notifications/tasks`` it hears."""

    def __init__(self, url: str, task_ids: list[str]) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.task_ids = task_ids
        self.heard: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.client = httpx.Client(timeout=httpx.Timeout(10, read=None))

    def run(self) -> None:
        body, headers = listen_request(self.task_ids)
        with (
            contextlib.suppress(httpx.HTTPError),
            self.client.stream("POST", self.url, json=body, headers=headers) as s,
        ):
            for line in s.iter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                event = json.loads(line[5:])
                if event.get("method") == "notifications/tasks":
                    self.heard.append(event["params"])
                else:
                    self.ready.set()  # the acknowledgement: listening from here on

    def statuses(self, task_id: str) -> list[str]:
        return [event["status"] for event in self.heard if event["taskId"] == task_id]

    def close(self) -> None:
        self.client.close()


def settle(client: Client, url: str, task_id: str, bound: float) -> dict[str, Any]:
    """The task once it ended, polled through the outage's 503s, within ``bound`` seconds."""
    deadline = time.monotonic() + bound
    while True:
        with contextlib.suppress(httpx.HTTPError):
            response = client.post(url, "tasks/get", {"taskId": task_id}, name=task_id)
            if response.status_code == 200:
                task = response.json()["result"]
                if task["status"] in ("completed", "failed", "cancelled"):
                    return task
        assert time.monotonic() < deadline, f"task {task_id[:8]} did not end within {bound} s"
        time.sleep(0.2)


def wait_claimed(rig: Rig, task_ids: list[str], timeout: float = 30) -> dict[str, str]:
    """Until a worker's run holds each task's lease: the worker running each."""
    deadline = time.monotonic() + timeout
    while True:
        rows = rig.query(
            "SELECT t.id, r.worker_ids FROM mcp_django_mcptask t JOIN django_tasks_database_dbtaskresult r"
            " ON r.id::text = t.job_id WHERE t.id = ANY(%s) AND t.lease_until IS NOT NULL AND r.status = 'RUNNING'",
            task_ids,
        )
        if len(rows) == len(task_ids):
            return {task_id: workers[-1] for task_id, workers in rows}
        assert time.monotonic() < deadline, f"the workers did not start {task_ids} in {timeout} s"
        time.sleep(0.05)


@contextlib.contextmanager
def tasks_through(
    rig: Rig, count: int, label: str, bound: float, rerun: bool | None = False, poll: bool = True
) -> Iterator[list[str]]:
    """``count`` slow tasks, running once the block begins; after it, each must end completed
    within ``bound`` seconds, heard by a listener, with its audit rows and no second run at once;
    ``rerun``: whether its run was lost and started again (None: either); ``poll=False``: no
    client polls until the listener heard the end (so the workers alone found a lost run)."""
    with httpx.Client(timeout=30) as http:
        client = Client(http)
        task_ids = [
            client.call(rig.url, "slow_compute", {"seconds": WORK, "label": label})["taskId"] for _ in range(count)
        ]
        listener = Listener(rig.url, task_ids)
        listener.start()
        assert listener.ready.wait(10), "the listen stream did not start"
        wait_claimed(rig, task_ids)
        began = time.monotonic()
        yield task_ids
        while not poll and any(listener.statuses(t)[-1:] != ["completed"] for t in task_ids):
            assert time.monotonic() - began < bound, f"the listener heard {listener.heard} in {bound} s"
            time.sleep(0.05)
        tasks = {task_id: settle(client, rig.url, task_id, bound - (time.monotonic() - began)) for task_id in task_ids}
        took = time.monotonic() - began
        for name, worker in rig.workers.items():
            assert worker.poll() is None, f"worker {name} exited ({worker.returncode}) in the outage"
        for task in tasks.values():
            assert task["status"] == "completed", task
            assert task["result"]["content"][0]["text"] == f"computed {label} in {WORK}s"
        # Every change pushed: the last push the listener hears is the task as tasks/get shows it.
        deadline = time.monotonic() + 5
        while any(listener.statuses(t)[-1:] != ["completed"] for t in task_ids) and time.monotonic() < deadline:
            time.sleep(0.05)
        listener.close()
        for task_id in task_ids:
            assert listener.statuses(task_id)[-1:] == ["completed"], listener.statuses(task_id)
        rows = dict(
            (task_id, (runs, retried))
            for task_id, runs, retried in rig.query(
                "SELECT id, runs, retried FROM mcp_django_mcptask WHERE id = ANY(%s)", task_ids
            )
        )
        for runs, retried in rows.values():
            # A run starts only once the last one was taken for lost (a lost run that finished
            # before its retry started may still store its outcome: then runs < retried + 1).
            assert 1 <= runs <= retried + 1, (runs, retried)
            assert rerun is None or bool(retried) == rerun, (runs, retried)
            if retried:  # the retry said so to the listener, before its run
                assert any("running again from the start" in e.get("statusMessage", "") for e in listener.heard)
        deadline = time.monotonic() + 10
        while True:
            audited = rig.query(
                "SELECT request_id, kind FROM mcp_django_auditevent WHERE request_id = ANY(%s)",
                [t[:12] for t in task_ids],
            )
            if len(audited) >= 2 * count or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for task_id in task_ids:
            kinds = sorted(kind for request_id, kind in audited if request_id == task_id[:12])
            assert kinds == ["task_completed", "task_created"], kinds
        print(
            f"{label}: {count} tasks ended {took:.1f} s after the fault began; retried {sum(r for _, r in rows.values())}"
        )


def test_a_3_second_outage_is_waited_out_by_the_runs(rig: Rig) -> None:
    # Bound: the work, the outage, a lease and a beat (a run the outage cut off runs again), slack.
    with tasks_through(rig, 1, "through-3s", bound=WORK + 3 + LEASE + 15):
        rig.pg.stop()
        time.sleep(3)
        rig.pg.start()


def test_a_20_second_outage_costs_a_second_run_not_the_task(rig: Rig) -> None:
    with tasks_through(rig, 1, "through-20s", bound=20 + WORK + 2 * LEASE + 20, rerun=None):
        rig.pg.stop()
        time.sleep(20)
        rig.pg.start()


def test_a_restart_under_the_runs_is_survived(rig: Rig) -> None:
    # Every connection of the workers is terminated ("administrator command") and replaced.
    with tasks_through(rig, 1, "through-restart", bound=WORK + LEASE + 15):
        rig.pg.stop()
        rig.pg.start()


def test_a_frozen_database_is_waited_out(rig: Rig) -> None:
    with tasks_through(rig, 1, "through-freeze", bound=WORK + 4 + LEASE + 15):
        rig.pg.freeze(True)
        try:
            time.sleep(4)
        finally:
            rig.pg.freeze(False)


def test_a_worker_killed_mid_run_leaves_its_task_to_the_other(rig: Rig) -> None:
    # Bound: the lease runs out, the other worker's sweep (a beat) starts it again, the work, slack.
    with tasks_through(rig, 1, "through-kill", bound=LEASE + LEASE / 3 + WORK + 15, rerun=True, poll=False) as task_ids:
        running = wait_claimed(rig, task_ids)[task_ids[0]]
        victim = rig.workers.pop(running)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    rig.start_worker(running)
