"""DPoP's replay cache across instances, and when it fails.

Two uvicorn processes serve the demo behind one address (the client's Host reaches either)
with a PostgreSQL database of their own and a redis-server of the test's own (the shared
Redis on 6379 is never touched), so the test may freeze it: a proof spent on one instance is
refused on the other, and while the cache does not answer a DPoP request is refused (503)
within a second, never accepted unrecorded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import shared_services
from tests.conftest import MODERN
from tests.dpop_client import DPoPKey
from tests.processes import ROOT, free_port, spawn_demo, wait_listening
from tests.run_names import redis_prefix
from tests.test_dpop import _request
from tests.test_faults import Redis

pytestmark = shared_services.needs_postgres


class Instances:
    def __init__(self, tmp: Path, redis: Redis, db_url: str) -> None:
        self.ports = [free_port(), free_port()]
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": db_url,
            "REDIS_URL": redis.url,
            "REDIS_PREFIX": redis_prefix("dpop"),
            "MCP_REQUEST_STATE_KEY": "dpop-instances-test-key-0123456789abcdef",
            "MCP_ALLOW_ANONYMOUS": "0",
            "MCP_DPOP": "required",
            "DJANGO_DEBUG": "0",
        }
        self.logs = [tmp / "a.log", tmp / "b.log"]
        self.servers: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        for port, log_path in zip(self.ports, self.logs, strict=True):
            with open(log_path, "ab") as log:
                self.servers.append(spawn_demo(port, self.env, log))
        for port in self.ports:
            wait_listening(("127.0.0.1", port), "an instance")

    def manage(self, *args: str) -> str:
        found = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True, capture_output=True, text=True
        )
        return found.stdout.strip()

    def stop(self) -> None:
        for server in self.servers:
            server.terminate()
        for server in self.servers:
            server.wait(10)


@pytest.fixture(scope="module")
def instances() -> Iterator[tuple[Instances, Redis]]:
    tmp = Path(tempfile.mkdtemp(prefix="mcp-dpop-"))
    redis = Redis(tmp)
    redis.start()
    db_name, db_url = shared_services.migrated_database("dpop_instances")
    found = Instances(tmp, redis, db_url)
    try:
        found.manage("shell", "-c", "from django.contrib.auth.models import User; User.objects.create_user('ivy')")
        found.start()
        yield found, redis
    finally:
        found.stop()
        redis.resume() if redis.process is not None else None
        redis.stop()
        shared_services.drop_database(db_name)
        shutil.rmtree(tmp, ignore_errors=True)


def _call(port: int, public: str, token: str, proof: str) -> httpx.Response:
    """whoami at the instance on ``port``, as a load balancer forwards it (the client's Host kept)."""
    return _request(f"http://127.0.0.1:{port}/mcp", MODERN, f"DPoP {token}", proof, extra={"host": public})


def _bound(servers: Instances, name: str) -> tuple[DPoPKey, str, str, str]:
    """A key, an MCP token bound to it, and the address the client uses (the first instance's)."""
    key = DPoPKey()
    token = servers.manage("mcp_token", "create", "ivy", name, "--jkt", key.jkt)
    public = f"127.0.0.1:{servers.ports[0]}"
    return key, token, public, f"http://{public}/mcp"


def test_a_proof_spent_on_one_instance_is_refused_on_the_other(instances: tuple[Instances, Redis]) -> None:
    servers, _redis = instances
    key, token, public, url = _bound(servers, "agent")
    a, b = servers.ports
    proof = key.proof("POST", url, token)
    first = _call(a, public, token, proof)
    assert first.status_code == 200 and first.json()["result"]["structuredContent"]["username"] == "ivy"
    again = _call(b, public, token, proof)
    assert again.status_code == 401
    assert 'error="invalid_dpop_proof"' in again.headers["www-authenticate"]
    assert "used before" in again.headers["www-authenticate"]
    # A fresh proof is good on either.
    assert _call(b, public, token, key.proof("POST", url, token)).status_code == 200


def test_a_frozen_replay_cache_refuses_within_a_second_and_recovers(instances: tuple[Instances, Redis]) -> None:
    servers, redis = instances
    key, token, public, url = _bound(servers, "frozen")
    a = servers.ports[0]
    assert _call(a, public, token, key.proof("POST", url, token)).status_code == 200
    redis.pause()
    try:
        waits = []
        for _ in range(3):
            started = time.monotonic()
            refused = _call(a, public, token, key.proof("POST", url, token))
            waits.append(time.monotonic() - started)
            assert refused.status_code == 503, refused.text
        # Fail closed, and fast: the first waits SESSION_CACHE_TIMEOUT (0.75 s), the next are
        # refused at once while the cache just failed.
        assert max(waits) < 1.0, waits
    finally:
        redis.resume()
    deadline = time.monotonic() + 5
    while True:
        answered = _call(a, public, token, key.proof("POST", url, token))
        if answered.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert answered.status_code == 200, answered.text
