"""Benchmark: mcp-django against the official SDK's server, measured in the same run.

For each scenario, the server runs alone on CPU 0 (uvicorn, one worker) and wrk drives it from
CPU 1 over loopback, with one connection and with eight. It prints requests per second, the ratio
to the SDK baseline of the same scenario and connection count, the server's CPU time per request
(from /proc), and the server's memory after the load. Numbers are only comparable within one run.

Each of mcp-django's runs is paired with a run of its SDK baseline right next to it (the SDK
first in even repeats, second in odd ones), and the ratio printed is the median of the pairs'
ratios, with their range: a shared machine's speed drifts over tens of seconds, and a ratio of
two runs made half a minute apart measured that drift as much as the servers.

    python bench/run.py [--seconds 5] [--repeat 1] [echo token async flow taskget]

Without scenarios it runs them all; the SDK's echo runs whenever a scenario is set against it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
# The names bench/instructions.py gives the same scenarios.
SCENARIOS = ("echo", "token", "async", "flow", "taskget")
MODERN = "2026-07-28"
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": MODERN,
}
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}


# The table's order of rows.
LABELS = ("echo, anonymous", "echo, token auth", "async tool", "3-request flow", "tasks/get poll")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call_body(
    name: str, arguments: dict[str, Any], extra: dict[str, Any] | None = None, request_id: int = 1
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments, "_meta": META, **(extra or {})}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@dataclass
class Server:
    name: str
    command: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    port: int = 0

    def start(self) -> None:
        self.port = free_port()
        command = [
            "taskset",
            "-c",
            "0",
            *self.command,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        self.process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **self.env}, stdout=subprocess.DEVNULL)
        # Until it listens or exits: on a loaded machine the demo's start-up can take a minute.
        deadline = time.time() + 300
        while time.time() < deadline and self.process.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise SystemExit(f"{self.name} did not start (exit status {self.process.poll()})")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def cpu_seconds(self) -> float:
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


def flow_bodies(url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """The three requests of a two-ask flow, captured from one real run (states stay valid for minutes)."""
    name = "test_input_required_result_multi_round"
    bodies = [call_body(name, {})]
    answers = [
        {"step1": {"action": "accept", "content": {"name": "Ada"}}},
        {"step2": {"action": "accept", "content": {"color": "teal"}}},
    ]
    with httpx.Client(timeout=10) as client:
        for answer in answers:
            h = {**HEADERS, **headers, "mcp-method": "tools/call", "mcp-name": name}
            result = client.post(url, json=bodies[-1], headers=h).json()["result"]
            assert result["resultType"] == "input_required", result
            bodies.append(call_body(name, {}, {"inputResponses": answer, "requestState": result["requestState"]}))
        final = client.post(url, json=bodies[-1], headers=h).json()["result"]
        assert final.get("resultType", "complete") == "complete" and "teal" in final["content"][0]["text"], final
    return bodies


def task_poll(url: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A tasks/get of one task (slow_compute, queued: the bench runs no task worker) and its headers."""
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    create = call_body("slow_compute", {"seconds": 3600})
    create["params"]["_meta"] = meta
    headers = {**HEADERS, "mcp-method": "tools/call", "mcp-name": "slow_compute"}
    with httpx.Client(timeout=10) as client:
        task_id = client.post(url, json=create, headers=headers).json()["result"]["taskId"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta}}
    return [body], {"mcp-method": "tasks/get", "mcp-name": task_id}


LUA = """
local bodies = {%s}
local headers = %s
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", nil, headers, bodies[(n %% #bodies) + 1])
end
response = function(status, hdrs, body)
  if status ~= 200 then wrk.thread:stop() end
end
"""


def lua_string(text: str) -> str:
    return "[==[" + text + "]==]"


def run_wrk(
    server: Server, bodies: list[dict[str, Any]], headers: dict[str, str], connections: int, seconds: int, work: Path
) -> dict[str, float]:
    script = work / f"{server.name}-{connections}.lua"
    all_headers = {**HEADERS, **headers}
    lua_headers = "{" + ", ".join(f'["{k}"] = "{v}"' for k, v in all_headers.items()) + "}"
    script.write_text(LUA % (", ".join(lua_string(json.dumps(b)) for b in bodies), lua_headers))
    base = ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", "-s", str(script), "--latency", server.url]
    subprocess.run([*base[:5], "-d1", *base[5:]], capture_output=True, check=True)  # warm up
    cpu_before = server.cpu_seconds()
    out = subprocess.run([*base[:5], f"-d{seconds}", *base[5:]], capture_output=True, text=True, check=True).stdout
    cpu = server.cpu_seconds() - cpu_before
    requests = int(next(line for line in out.splitlines() if "requests in" in line).split()[0])
    non_2xx = next((int(line.split()[-1]) for line in out.splitlines() if "Non-2xx" in line), 0)
    if non_2xx or requests == 0:
        raise SystemExit(f"{server.name}: {non_2xx} failed requests\n{out}")
    return {"rps": requests / seconds, "cpu_us": cpu / requests * 1e6, "rss_mib": server.rss_mib()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5, help="wrk's duration of each run (after a 1 s warm-up)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run every scenario N times (interleaved) and report medians"
    )
    parser.add_argument(
        "scenarios", nargs="*", metavar="SCENARIO", help=f"any of {', '.join(SCENARIOS)} (default: all)"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "results", help="where the results' JSON goes (bench/results)"
    )
    args = parser.parse_args()
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    chosen = set(args.scenarios or SCENARIOS)
    if not shutil.which("wrk") or not shutil.which("taskset"):
        raise SystemExit("bench needs wrk and taskset (Debian: apt-get install wrk util-linux)")
    work = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    python = sys.executable
    env = {
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
        "DJANGO_DEBUG": "0",
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
        "MCP_REQUEST_STATE_KEY": "bench-request-state-key-0123456789abcdefghij",
        "MCP_ALLOW_ANONYMOUS": "1",
    }
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env={**os.environ, **env}, check=True)
    token = subprocess.run(
        [
            python,
            "-c",
            "import django; django.setup(); from django.contrib.auth.models import User; "
            "from rest_framework.authtoken.models import Token; u=User.objects.create_user('bench'); print(Token.objects.create(user=u).key)",
        ],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    uvicorn = [python, "-m", "uvicorn", "--no-access-log"]
    servers = {
        "sdk": Server("sdk", [*uvicorn, "bench.sdk_server:app"], {}),
        "mcp-django": Server("mcp-django", [*uvicorn, "project.asgi:application"], env),
    }
    echo = [call_body("echo", {"text": "hello"})]
    echo_headers = {"mcp-method": "tools/call", "mcp-name": "echo"}
    reverse = [call_body("reverse", {"text": "hello"})]
    reverse_headers = {"mcp-method": "tools/call", "mcp-name": "reverse"}
    flow_headers = {"mcp-method": "tools/call", "mcp-name": "test_input_required_result_multi_round"}
    results: dict[str, dict[str, Any]] = {}
    try:
        for server in servers.values():
            server.start()
        # (label, bodies, headers) of mcp-django's scenarios, each with its SDK baseline's label; the
        # SDK server has neither token authentication nor tasks: both are set against its echo.
        ours: list[tuple[str, list[dict[str, Any]], dict[str, str], str]] = []
        baselines: dict[str, tuple[list[dict[str, Any]], dict[str, str]]] = {}
        if chosen & {"echo", "token", "taskget"}:
            baselines["echo, anonymous"] = (echo, echo_headers)
        if "echo" in chosen:
            ours.append(("echo, anonymous", echo, echo_headers, "echo, anonymous"))
        if "token" in chosen:
            token_headers = {**echo_headers, "authorization": f"Token {token}"}
            ours.append(("echo, token auth", echo, token_headers, "echo, anonymous"))
        if "async" in chosen:
            baselines["async tool"] = (reverse, reverse_headers)
            ours.append(("async tool", reverse, reverse_headers, "async tool"))
        if "flow" in chosen:
            baselines["3-request flow"] = (flow_bodies(servers["sdk"].url, {}), flow_headers)
            ours.append(("3-request flow", flow_bodies(servers["mcp-django"].url, {}), flow_headers, "3-request flow"))
        if "taskget" in chosen:
            ours.append(("tasks/get poll", *task_poll(servers["mcp-django"].url), "echo, anonymous"))
        runs: dict[str, list[dict[str, float]]] = {}
        ratios: dict[str, list[float]] = {}
        for repeat in range(args.repeat):
            for label, bodies, headers, base_label in ours:
                for connections in (1, 8):
                    pair = [
                        ("sdk", base_label, *baselines[base_label]),
                        ("mcp-django", label, bodies, headers),
                    ]
                    measured: dict[str, dict[str, float]] = {}
                    for name, row_label, row_bodies, row_headers in pair if repeat % 2 == 0 else pair[::-1]:
                        measured[name] = run_wrk(
                            servers[name], row_bodies, row_headers, connections, args.seconds, work
                        )
                        runs.setdefault(f"{row_label}|{name}|{connections}", []).append(measured[name])
                    ratios.setdefault(f"{label}|mcp-django|{connections}", []).append(
                        measured["mcp-django"]["rps"] / measured["sdk"]["rps"]
                    )
        for key, samples in runs.items():
            results[key] = {field: statistics.median(s[field] for s in samples) for field in samples[0]}
            if key in ratios:
                results[key]["ratio"] = statistics.median(ratios[key])
                results[key]["ratio_min"], results[key]["ratio_max"] = min(ratios[key]), max(ratios[key])
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(
        "echo is a sync tool (both servers run it in a worker thread); the async tool runs on the event loop in both."
    )
    print(
        f"{'scenario':<18} {'server':<11} {'conns':>5} {'req/s':>9} {'vs SDK':>7} {'range':>11}"
        f" {'CPU µs/req':>11} {'RSS MiB':>8}"
    )
    order = sorted(results, key=lambda key: (LABELS.index(key.split("|")[0]), key.split("|")[1] != "sdk"))
    for key in order:
        row = results[key]
        label, name, conns = key.split("|")
        ratio, spread = "1.00x", ""
        if "ratio" in row:
            ratio = f"{row['ratio']:.2f}x"
            spread = f"{row['ratio_min']:.2f}-{row['ratio_max']:.2f}" if args.repeat > 1 else ""
        print(
            f"{label:<18} {name:<11} {conns:>5} {row['rps']:>9.0f} {ratio:>7} {spread:>11}"
            f" {row['cpu_us']:>11.0f} {row['rss_mib']:>8.1f}"
        )
    print(
        "(token auth and the tasks/get poll are compared with the SDK's anonymous echo: the SDK server has no token"
        " authentication and no tasks of its own)"
    )
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
