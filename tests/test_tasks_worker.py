"""MCP tasks with everything real: two server processes, a task worker process
(``manage.py mcp_worker``, django-tasks-db's worker kept alive) and PostgreSQL, driven by a
plain httpx client.

A task is created on one instance and polled, answered and cancelled on the other; a
worker killed in the middle of a task leaves it to the next worker, which runs it again
once its lease runs out; a task id is refused to another user exactly like an unknown one.
tests/test_tasks_outages.py takes the database away under the workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import shared_services
from tests.processes import ROOT, free_port, serve_demo
from tests.run_names import redis_prefix

pytestmark = [shared_services.needs_postgres]

MODERN = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
LEASE = 2.0

_USERS = """
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
for name in ("alice", "bob"):
    user = User.objects.create_user(name, password="pw")
    print(Token.objects.create(user=user).key)
"""


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "mcp_worker", "--interval", "0.05", "--no-startup-delay", "--no-reload", "-v0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_running(deployment: Deployment, task_id: str, timeout: float = 30) -> None:
    """Until the worker's run has claimed the task: the MCP task holds a lease (set by the
    run's claim, after django-tasks marked its own row RUNNING). MCP says "working" before
    that too, so only the database tells.

    The django-tasks row alone is not enough: on a loaded machine the worker can be killed
    after it marked that row and before the run's claim, and a task nobody claimed has no
    lease to run out (it is indistinguishable from one waiting in the queue)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(deployment.env["DATABASE_URL"], autocommit=True) as conn:
        while not conn.execute(
            "SELECT 1 FROM django_tasks_database_dbtaskresult r JOIN mcp_django_mcptask t"
            " ON t.id = r.args_kwargs->'args'->>0"
            " WHERE r.status = 'RUNNING' AND t.id = %s AND t.status = 'working' AND t.lease_until IS NOT NULL",
            (task_id,),
        ).fetchone():
            assert time.monotonic() < deadline, f"the worker did not start task {task_id} in {timeout} s"
            time.sleep(0.02)


class Deployment:
    def __init__(self, urls: list[str], env: dict[str, str], tokens: list[str]) -> None:
        self.urls = urls
        self.env = env
        self.tokens = tokens
        self.worker: subprocess.Popen[bytes] | None = None


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    db_name, db_url = shared_services.fresh_database("tasks_worker")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
        "DATABASE_URL": db_url,
        "REDIS_PREFIX": redis_prefix("tasks"),
        "MCP_REQUEST_STATE_KEY": "tasks-worker-test-key-0123456789abcdef",
        "MCP_ALLOW_ANONYMOUS": "1",
        "MCP_TASK_LEASE_SECONDS": str(LEASE),
        "DJANGO_DEBUG": "0",
    }
    # With the run's Redis, the instances and the worker share a channel layer (status pushes
    # cross processes through it); without one each process has its own.
    if shared_services.REDIS_URL:
        env["REDIS_URL"] = shared_services.REDIS_URL
    else:
        env.pop("REDIS_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v0", "-c", _USERS], cwd=ROOT, env=env, check=True, capture_output=True
    )
    tokens = made.stdout.decode().split()
    ports = [free_port(), free_port()]
    servers = [serve_demo(port, env) for port in ports]
    out = Deployment([f"http://127.0.0.1:{port}/mcp" for port in ports], env, tokens)
    out.worker = start_worker(env)
    try:
        yield out
    finally:
        for process in [*servers, out.worker]:
            if process is not None and process.poll() is None:
                process.terminate()
        for process in [*servers, out.worker]:
            if process is not None:
                process.wait(20)
        shared_services.drop_database(db_name)


class Client:
    """A plain httpx client speaking 2026-07-28 with the tasks extension, no SDK."""

    def __init__(self, http: httpx.Client, token: str | None = None) -> None:
        self.http = http
        self.token = token
        self.ids = 0

    def post(self, url: str, method: str, params: dict[str, Any], *, name: str | None = None) -> httpx.Response:
        self.ids += 1
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {EXT: {}}},
            },
        }
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": method,
        }
        if name is not None:
            headers["mcp-name"] = name
        if self.token:
            headers["authorization"] = f"Token {self.token}"
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        return self.http.post(url, json=body, headers=headers)

    def result(self, url: str, method: str, params: dict[str, Any], *, name: str | None = None) -> dict[str, Any]:
        response = self.post(url, method, params, name=name)
        assert response.status_code == 200, response.text
        return response.json()["result"]

    def call(self, url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.result(url, "tools/call", {"name": tool, "arguments": arguments}, name=tool)

    def get(self, url: str, task_id: str) -> dict[str, Any]:
        return self.result(url, "tasks/get", {"taskId": task_id}, name=task_id)

    def wait(self, url: str, task_id: str, *statuses: str, timeout: float = 40) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task = self.get(url, task_id)
            if task["status"] in statuses:
                return task
            assert time.monotonic() < deadline, f"task still {task['status']}, waiting for {statuses}"
            time.sleep(0.1)


def listen_request(task_ids: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of a ``subscriptions/listen`` naming ``task_ids`` (with the opt-in)."""
    params = {
        "notifications": {"taskIds": task_ids},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}},
        },
    }
    body = {"jsonrpc": "2.0", "id": "listen", "method": "subscriptions/listen", "params": params}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "subscriptions/listen",
    }
    return body, headers


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def test_created_on_one_instance_answered_and_finished_on_the_other(deployment: Deployment, http: httpx.Client) -> None:
    a, b = deployment.urls
    client = Client(http)
    created = client.call(a, "confirm_delete", {"filename": "report.csv"})
    assert created["resultType"] == "task" and created["status"] == "working"
    task_id = created["taskId"]
    # Durable create: the other instance knows the task at once.
    assert client.get(b, task_id)["taskId"] == task_id
    task = client.wait(b, task_id, "input_required")
    assert list(task["inputRequests"]) == ["confirm_delete"]
    assert task["inputRequests"]["confirm_delete"]["method"] == "elicitation/create"
    ack = client.result(
        b,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}},
        name=task_id,
    )
    assert ack["resultType"] == "complete" and "status" not in ack
    done = client.wait(a, task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Deleted report.csv."


def test_a_running_task_cancelled_on_the_other_instance_ends_cancelled(
    deployment: Deployment, http: httpx.Client
) -> None:
    a, b = deployment.urls
    client = Client(http)
    task_id = client.call(a, "slow_compute", {"seconds": 60, "label": "long"})["taskId"]
    wait_running(deployment, task_id)  # so the cancel is cooperative
    ack = client.result(b, "tasks/cancel", {"taskId": task_id}, name=task_id)
    assert ack["resultType"] == "complete"
    started = time.monotonic()
    assert client.wait(a, task_id, "cancelled", "completed", "failed", timeout=20)["status"] == "cancelled"
    assert time.monotonic() - started < 15  # long before the 60 s of work
    # Idempotent on a finished task.
    assert client.result(b, "tasks/cancel", {"taskId": task_id}, name=task_id)["resultType"] == "complete"


@shared_services.needs_redis
def test_status_changes_reach_a_listen_stream_on_the_other_instance(deployment: Deployment, http: httpx.Client) -> None:
    a, b = deployment.urls
    client = Client(http)
    task_id = client.call(a, "confirm_delete", {"filename": "pushed.csv"})["taskId"]
    client.wait(a, task_id, "input_required")
    body, headers = listen_request([task_id])
    with http.stream("POST", b, json=body, headers=headers) as stream:
        events = (json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:") and line[5:].strip())
        assert next(events)["params"]["notifications"] == {"taskIds": [task_id]}
        # Answered on instance a, finished by the worker process: both pushes cross processes.
        answer = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}
        client.result(a, "tasks/update", {"taskId": task_id, "inputResponses": answer}, name=task_id)
        seen = []
        while not seen or seen[-1]["status"] == "working":
            event = next(events)
            assert event["method"] == "notifications/tasks"
            seen.append(event["params"])
        assert seen[0]["status"] == "working"
        done = seen[-1]
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Deleted pushed.csv."
        polled = client.get(a, task_id)
        assert {k: v for k, v in done.items() if k != "_meta"} == {
            k: v for k, v in polled.items() if k not in ("_meta", "resultType")
        }


def test_another_users_task_id_is_refused_like_an_unknown_one(deployment: Deployment, http: httpx.Client) -> None:
    a, b = deployment.urls
    alice, bob = (Client(http, token) for token in deployment.tokens)
    task_id = alice.call(a, "slow_compute", {"seconds": 1, "label": "alice's"})["taskId"]
    answers = []
    for url in (a, b):
        for who, task in ((bob, task_id), (Client(http), task_id), (alice, "no-such-task")):
            for method, params in (
                ("tasks/get", {"taskId": task}),
                ("tasks/update", {"taskId": task, "inputResponses": {}}),
                ("tasks/cancel", {"taskId": task}),
            ):
                response = who.post(url, method, params, name=task)
                answers.append(
                    (response.status_code, response.json()["error"]["code"], response.json()["error"]["message"])
                )
    assert set(answers) == {(400, -32602, "Failed to retrieve task: Task not found")}
    assert alice.wait(b, task_id, "completed")["result"]["content"][0]["text"] == "computed alice's in 1s"


def test_a_killed_worker_leaves_the_task_to_the_next_one_which_runs_it_again(
    deployment: Deployment, http: httpx.Client
) -> None:
    a, b = deployment.urls
    client = Client(http)
    task_id = client.call(a, "slow_compute", {"seconds": 2, "label": "again"})["taskId"]
    wait_running(deployment, task_id)  # with a lease its heartbeat keeps alive
    assert client.get(b, task_id)["status"] == "working"
    assert deployment.worker is not None
    deployment.worker.send_signal(signal.SIGKILL)
    deployment.worker.wait(10)
    deployment.worker = start_worker(deployment.env)
    # The new worker's sweep finds the lease over (no poll needed) and runs the task again.
    task = client.wait(b, task_id, "failed", "completed", "cancelled", timeout=LEASE * 10)
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"] == "computed again in 2s"
    # The new worker serves new tasks.
    fresh = client.call(a, "slow_compute", {"seconds": 0, "label": "after"})["taskId"]
    assert client.wait(b, fresh, "completed")["result"]["content"][0]["text"] == "computed after in 0s"
