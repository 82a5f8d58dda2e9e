"""Run the official MCP conformance suite against the demo project.

Starts the demo under uvicorn on a free loopback port (fresh SQLite database) with a
task worker (`manage.py mcp_worker`: MCP tasks run out of process), runs `conformance
server --suite all` for each protocol revision, the tasks extension's scenarios by name
(`--suite all` leaves extensions out), the suite's frozen 2026-07-28 requirement set,
then the authorization-server scenarios against the demo's OAuth server, and prints a
summary of every check. Exits non-zero when any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC_VERSIONS = ("2026-07-28", "2025-11-25")
# Extension scenarios, which `--suite all --spec-version` leaves out: each runs on its own
# (on 2026-07-28) against the demo's skills.
EXTENSION_SCENARIOS = ("sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"the demo server did not start on port {port}")


def wait_for_worker(worker: subprocess.Popen[str], timeout: float = 60) -> None:
    """Until the task worker says it started (the first task would wait for it otherwise);
    its output is then drained in a thread, so a full pipe never stops it."""
    import threading

    assert worker.stdout is not None
    deadline = time.time() + timeout
    for line in worker.stdout:
        if "Starting worker" in line:
            break
        if time.time() > deadline:
            raise SystemExit("the task worker did not start")
    else:
        raise SystemExit("the task worker exited")
    threading.Thread(target=lambda: [None for _ in worker.stdout or ()], daemon=True).start()


def summarize(out_dir: Path) -> tuple[int, int, list[str]]:
    passed, failed, problems = 0, 0, []
    for checks_file in sorted(out_dir.glob("*/checks.json")):
        scenario = checks_file.parent.name
        for check in json.loads(checks_file.read_text()):
            status = check.get("status")
            if status == "SUCCESS":
                passed += 1
            elif status == "FAILURE":
                failed += 1
                problems.append(f"FAIL {scenario} {check.get('id')}: {check.get('errorMessage', '')}")
            elif status == "WARNING":
                problems.append(f"warn {scenario} {check.get('id')}: {check.get('errorMessage', '')}")
    return passed, failed, problems


# Signs a user in and registers a public client whose redirect URI is the suite's callback.
_AUTH_SETUP = """
from django.contrib.auth import get_user_model
from django.test import Client
from oauth2_provider.models import Application
user, _ = get_user_model().objects.get_or_create(username="conformance")
app = Application.objects.create(
    name="conformance", client_type=Application.CLIENT_PUBLIC,
    authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
    redirect_uris="http://127.0.0.1:{port}/callback", user=user,
)
browser = Client()
browser.force_login(user)
print(app.client_id, browser.cookies["sessionid"].value)
"""


def authorization(args: argparse.Namespace, env: dict[str, str], port: int, out_root: Path) -> int:
    """The authorization-server scenarios against the demo's own server (issuer /o): a person's
    part, signing in and pressing Authorize on the consent screen, is played by tests/oauth_consent.py."""
    sys.path.insert(0, str(ROOT))
    from tests.oauth_consent import approve

    callback_port = free_port()
    setup = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v0", "-c", _AUTH_SETUP.format(port=callback_port)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    client_id, session = setup.stdout.split()[-2:]
    out_dir = out_root / "authorization"
    out_dir.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    command = [args.node, args.suite, "authorization", "--url", f"{base}/o", "--client-id", client_id]
    command += ["--resource", f"{base}/mcp", "--port", str(callback_port), "-o", str(out_dir)]
    suite = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    assert suite.stdout is not None
    for line in suite.stdout:
        output.append(line)
        if line.startswith(f"{base}/o/authorize/"):
            # The suite waits for its callback: follow the redirect the consent screen gives.
            import httpx

            httpx.get(approve(line.strip(), session), timeout=30)
    suite.wait(60)
    passed, failed, problems = summarize(out_dir)
    print(f"== conformance authorization server: {passed} passed, {failed} failed")
    for line in problems:
        print("   " + line)
    if suite.returncode and not failed:
        print("".join(output)[-3000:])
    return failed + (1 if suite.returncode and not failed else 0) + (1 if not passed else 0)


# Extension scenarios: `--suite all` leaves them out, so they run by name.
TASKS_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
# The suite's frozen requirement set of a revision (what its tier check scores).
REQUIREMENTS = "2026-07-28"


def _suite(args: argparse.Namespace, label: str, out_dir: Path, extra: list[str], url: str) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [args.node, args.suite, "server", "--url", url, "-o", str(out_dir), *extra]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    passed, failed, problems = summarize(out_dir)
    print(f"== conformance {label}: {passed} passed, {failed} failed")
    for line in problems:
        print("   " + line)
    if run.returncode and not failed:
        print(run.stdout[-3000:], run.stderr[-3000:])
    return failed + (1 if run.returncode and not failed else 0)


def extensions(args: argparse.Namespace, port: int, out_root: Path) -> int:
    """The tasks extension's scenarios by name, then the 2026-07-28 requirement set."""
    url = f"http://127.0.0.1:{port}/mcp"
    failed = 0
    for scenario in TASKS_SCENARIOS:
        failed += _suite(args, scenario, out_root / "tasks" / scenario, ["--scenario", scenario], url)
    failed += _suite(
        args, f"requirements {REQUIREMENTS}", out_root / "requirements", ["--requirements", REQUIREMENTS], url
    )
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node", required=True)
    parser.add_argument("--suite", required=True, help="path of the conformance package's dist/index.js")
    parser.add_argument("--spec-version", action="append", choices=SPEC_VERSIONS)
    parser.add_argument("--scenario", help="run one scenario only")
    parser.add_argument("--out", default=None, help="folder for checks.json files")
    args = parser.parse_args()
    versions = args.spec_version or list(SPEC_VERSIONS)

    work = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    out_root = Path(args.out) if args.out else work / "out"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
        "MCP_ALLOW_ANONYMOUS": "1",
    }
    env.pop("REDIS_URL", None)
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    port = free_port()
    server = subprocess.Popen(
        [
            python,
            "-m",
            "uvicorn",
            "project.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    # MCP tasks run out of process, as in production: Django's database task backend and its worker.
    worker = subprocess.Popen(
        [python, "manage.py", "mcp_worker", "--interval", "0.05", "--no-startup-delay", "--no-reload", "-v1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    total_failed = 0
    try:
        wait_for(port)
        wait_for_worker(worker)
        for version in versions:
            out_dir = out_root / version
            out_dir.mkdir(parents=True, exist_ok=True)
            command = [args.node, args.suite, "server", "--url", f"http://127.0.0.1:{port}/mcp", "-o", str(out_dir)]
            command += ["--scenario", args.scenario] if args.scenario else ["--suite", "all"]
            command += ["--spec-version", version]
            run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            passed, failed, problems = summarize(out_dir)
            total_failed += failed + (1 if run.returncode and not failed else 0)
            print(f"== conformance {version}: {passed} passed, {failed} failed")
            for line in problems:
                print("   " + line)
            if run.returncode and not failed:
                print(run.stdout[-3000:], run.stderr[-3000:])
        for scenario in () if args.scenario else EXTENSION_SCENARIOS:
            out_dir = out_root / "extensions" / scenario
            out_dir.mkdir(parents=True, exist_ok=True)
            command = [args.node, args.suite, "server", "--url", f"http://127.0.0.1:{port}/mcp", "-o", str(out_dir)]
            run = subprocess.run([*command, "--scenario", scenario], cwd=ROOT, capture_output=True, text=True)
            passed, failed, problems = summarize(out_dir)
            total_failed += failed + (1 if run.returncode and not failed else 0) + (1 if not passed else 0)
            print(f"== conformance {scenario}: {passed} passed, {failed} failed")
            for line in problems:
                print("   " + line)
            if run.returncode and not failed:
                print(run.stdout[-3000:], run.stderr[-3000:])
        if not args.scenario:
            total_failed += extensions(args, port, out_root)
            total_failed += authorization(args, env, port, out_root)
    finally:
        server.terminate()
        worker.terminate()
        server.wait(10)
        worker.wait(10)
    print(f"conformance: {'all checks passed' if not total_failed else f'{total_failed} failed'}")
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main())
