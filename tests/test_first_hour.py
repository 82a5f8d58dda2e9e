"""What a new user meets in the first hour: the landing page, GET /mcp, static files, the
WSGI route's refusal of legacy sessions, and a demo without the conformance fixtures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent


def site(live_url: str) -> str:
    return live_url.removesuffix("/mcp")


def test_landing_page_says_what_the_endpoint_is_and_how_to_connect(live_url: str) -> None:
    page = httpx.get(site(live_url) + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert f'<code id="endpoint">{live_url}</code>' in html
    assert "Authorization: Token KEY" in html and "drf_create_token" in html
    assert "docs/clients.md" in html
    assert "<code>echo</code>" in html  # the tools a client will find


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
