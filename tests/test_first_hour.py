"""What a new user meets in the first hour: the landing page, GET /mcp, static files, the
WSGI route's refusal of legacy sessions, a demo without the conformance fixtures, and the
README's project under uvicorn as the README starts it (lifespan, two workers, no key set)."""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from scripts import wheel_test
from tests.conftest import meta
from tests.processes import free_port, wait_listening

ROOT = Path(__file__).resolve().parent.parent


def site(live_url: str) -> str:
    return live_url.removesuffix("/mcp")


def test_landing_page_says_what_the_endpoint_is_and_how_to_connect(live_url: str) -> None:
    page = httpx.get(site(live_url) + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert f'<code id="endpoint">{live_url}</code>' in html
    assert "Authorization: Bearer TOKEN" in html and "mcp_token create" in html
    assert "Authorization: Token KEY" in html and "drf_create_token" in html  # still an alternative
    assert "docs/clients.md" in html
    assert "<code>echo</code>" in html  # the tools a client will find
    assert f'<code id="staff-endpoint">{site(live_url)}/staff/mcp</code>' in html  # docs/endpoints.md


def test_landing_page_sdk_snippet_runs(live_url: str) -> None:
    import html as html_module
    import re

    page = httpx.get(site(live_url) + "/").text
    snippet = html_module.unescape(re.search(r"<pre>(.*?)</pre>", page, re.S).group(1))
    done = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "hello" in done.stdout


def test_get_mcp_explains_itself_and_stays_a_405(live_url: str) -> None:
    browser = httpx.get(live_url, headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert browser.status_code == 405 and browser.headers["allow"] == "POST"
    assert browser.headers["content-type"].startswith("text/html") and "MCP endpoint" in browser.text
    client = httpx.get(live_url, headers={"Accept": "text/event-stream"})
    assert client.status_code == 405 and client.headers["allow"] == "POST"
    error = client.json()["error"]
    assert error["code"] == -32600 and "MCP (Model Context Protocol) endpoint" in error["message"]


def test_admin_static_files_are_served_under_uvicorn(live_url: str) -> None:
    css = httpx.get(site(live_url) + "/static/admin/css/base.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


@pytest.mark.django_db
def test_wsgi_route_refuses_a_legacy_initialize_naming_the_asgi_route() -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    response = Client().post(
        "/mcp", json.dumps(body), content_type="application/json", HTTP_ACCEPT="application/json, text/event-stream"
    )
    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] == 7 and "result" not in answer
    assert answer["error"]["code"] == -32600
    assert "mcp_urlpatterns" in answer["error"]["message"] and "2026-07-28" in answer["error"]["message"]
    assert "mcp-session-id" not in response  # no session was started


def test_default_demo_has_no_conformance_fixtures() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL",)}
    env.update(DJANGO_SETTINGS_MODULE="project.settings", DATABASE_URL="sqlite:///:memory:")

    def handlers(settings_module: str) -> list[dict[str, str]]:
        done = subprocess.run(
            [sys.executable, "manage.py", "mcp_handlers", "--json"],
            cwd=ROOT,
            env={**env, "DJANGO_SETTINGS_MODULE": settings_module},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    demo = [h["name"] for h in handlers("project.settings")]
    assert "echo" in demo and not [name for name in demo if name.startswith("test_")]
    conformance = [h["name"] for h in handlers("project.conformance.settings")]
    assert "test_simple_text" in conformance and "echo" in conformance


def test_readme_installs_from_a_checkout_with_the_line_wheel_test_runs() -> None:
    """No release is on the package index: the README's first command installs from a
    checkout, says so, and is the line make wheel-test runs (it refuses any other)."""
    readme = (ROOT / "README.md").read_text()
    steps = wheel_test.readme_steps(readme)
    line = wheel_test.install_step(steps)
    assert line == steps[0][1] and line.split()[:2] == ["pip", "install"]
    assert "django-mcp-endpoint" not in line.split() and "mcp-django" not in line.split()
    section = readme.split(wheel_test.SECTION, 1)[1]
    assert f"`{wheel_test.CHECKOUT_VARIABLE}`" in section.split("```", 1)[0]  # said before the command
    assert "no release on the package index" in section
    checkout = "/tmp/a checkout"
    assert shlex.split(wheel_test.expand(line, {wheel_test.CHECKOUT_VARIABLE: checkout}))[2] == checkout
    with pytest.raises(SystemExit, match="first command"):
        wheel_test.install_step([("sh", "pip install django-mcp-endpoint uvicorn whitenoise")])
    with pytest.raises(SystemExit, match="is not set"):
        wheel_test.expand(line, {})


# -- the README's project under uvicorn --------------------------------------------------

# uvicorn's own log lines with the worker's process id: which worker answered which connection.
LOG_CONFIG = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"pid": {"format": "%(process)d %(levelname)s %(message)s"}},
    "handlers": {"out": {"class": "logging.StreamHandler", "formatter": "pid", "stream": "ext://sys.stdout"}},
    "loggers": {
        "uvicorn": {"handlers": ["out"], "level": "INFO", "propagate": False},
        "uvicorn.access": {"handlers": ["out"], "level": "INFO", "propagate": False},
    },
}


def readme_uvicorn_command() -> list[str]:
    """The README's uvicorn line, as argv (its comment dropped)."""
    commands = [step for kind, step in wheel_test.readme_steps((ROOT / "README.md").read_text()) if kind == "sh"]
    (line,) = [c for c in commands if c.startswith("uvicorn ")]
    return line.split()


def readme_asgi_module(folder: Path) -> str:
    """The README's ``mysite/asgi.py``, for the demo's settings, as a module in ``folder``."""
    (block,) = [
        step
        for kind, step in wheel_test.readme_steps((ROOT / "README.md").read_text())
        if kind == "file" and step.startswith("# mysite/asgi.py:")
    ]
    assert '"mysite.settings"' in block
    (folder / "readme_asgi.py").write_text(block.replace('"mysite.settings"', '"project.settings"'))
    return "readme_asgi"


@pytest.fixture
def readme_server(tmp_path: Path) -> Iterator[Any]:
    """Start the README's application the way the README starts it (extra options appended)."""
    started: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    # The demo with the README's settings: no REQUEST_STATE_KEY, SQLite in a file.
    env.pop("MCP_REQUEST_STATE_KEY", None)
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        DJANGO_SETTINGS_MODULE="project.settings",
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
        MCP_ALLOW_ANONYMOUS="1",
    )
    module = readme_asgi_module(tmp_path)
    log_path = tmp_path / "uvicorn.log"
    (tmp_path / "log.json").write_text(json.dumps(LOG_CONFIG))

    def start(*extra: str) -> tuple[int, Path]:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        argv = readme_uvicorn_command()
        assert argv[:2] == ["uvicorn", "mysite.asgi:application"], argv
        port = free_port()
        command = [sys.executable, "-m", "uvicorn", f"{module}:application", *argv[2:]]
        command += ["--host", "127.0.0.1", "--port", str(port), "--log-config", str(tmp_path / "log.json"), *extra]
        with log_path.open("wb") as log:
            started.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        wait_listening(("127.0.0.1", port), "uvicorn")
        return port, log_path

    yield start
    for server in started:
        server.terminate()
    for server in started:
        server.wait(20)


def wait_for_log(log: Path, pattern: str, count: int = 1, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while len(re.findall(pattern, text := log.read_text(errors="replace"))) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern!r} ({count}) not in uvicorn's log:\n{text}")
        time.sleep(0.05)
    return text


def post(port: int, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """One request on a connection of its own (so either worker may take it), and the
    connection's local port, by which uvicorn's access log names the worker that answered."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.connect()
        local_port = connection.sock.getsockname()[1]
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": body["method"],
            "mcp-name": body["params"]["name"],
        }
        connection.request("POST", "/mcp", json.dumps(body), headers)
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200, answer
        return answer, local_port
    finally:
        connection.close()


def test_readme_server_with_two_workers_speaks_lifespan_and_every_confirm_succeeds(readme_server: Any) -> None:
    """uvicorn as the README starts it, with two workers: each worker's startup goes through
    the lifespan protocol (no "ASGI 'lifespan' protocol appears unsupported."). The README's
    settings leave REQUEST_STATE_KEY unset: the keys derive from SECRET_KEY, so a
    requestState sealed by one worker opens in the other, and 20 of 20 confirms complete."""
    port, log = readme_server("--workers", "2")
    text = wait_for_log(log, r"Application startup complete\.", count=2)
    assert text.count("Waiting for application startup.") == 2, text
    assert "lifespan" not in text.lower(), text
    served_by: list[tuple[int, int]] = []  # (first round's port, second round's port)
    for n in range(20):
        params: dict[str, Any] = {"name": "clear_cache", "arguments": {"region": f"r{n}"}, "_meta": meta()}
        first, first_port = post(port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        result = first["result"]
        assert result["resultType"] == "input_required", first
        (key,) = result["inputRequests"]
        params = {
            **params,
            "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
            "requestState": result["requestState"],
        }
        done, second_port = post(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
        assert "error" not in done, (n, done)
        assert done["result"]["resultType"] == "complete", (n, done)
        assert done["result"]["content"][0]["text"] == f"Cleared the r{n} cache.", (n, done)
        served_by.append((first_port, second_port))
    text = wait_for_log(log, r'"POST /mcp HTTP/1\.1" 200', count=40)
    worker = {
        int(port): int(pid) for pid, port in re.findall(r"^(\d+) INFO .*?127\.0\.0\.1:(\d+) - \"POST", text, re.M)
    }
    assert len(set(worker.values())) == 2, text  # both workers answered
    crossed = [pair for pair in served_by if worker[pair[0]] != worker[pair[1]]]
    assert crossed, "no flow crossed workers: the test proved nothing"


def test_another_process_derives_the_same_keys_from_secret_key() -> None:
    """Legacy session ids and principal hashes come from the same ring as requestState: a
    process of the project with no REQUEST_STATE_KEY signs and hashes as this one does."""
    from mcp_django import keyring

    secret_key = "a-secret-key-both-processes-share-0123456789-abcdefghijklmnopq"
    script = (
        "import django, json; django.setup();"
        "from mcp_django import keyring;"
        "ring = keyring.keyring();"
        "print(json.dumps([ring.signing.session_key.hex(), ring.principal_keys[0].hex()]))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MCP_REQUEST_STATE_KEY")}
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings", DATABASE_URL="sqlite:///:memory:", DJANGO_SECRET_KEY=secret_key
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    here = keyring.KeyRing(keyring.secrets_from_secret_key(secret_key, []))
    assert json.loads(done.stdout) == [here.signing.session_key.hex(), here.principal_keys[0].hex()]
