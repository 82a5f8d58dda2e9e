"""A real browser in the demo admin: the handlers page and the audit log filtered to refusals.

Headless Chromium (Debian's package, ``make browser-deps``) driven by Playwright;
Playwright never downloads a browser here. Screenshots go to ``test-artifacts/``.
The test skips only when Chromium is absent and ``MCP_REQUIRE_BROWSER`` is unset:
CI sets it, so a missing browser fails there instead of passing quietly.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model

from mcp_django import audit
from mcp_django.models import AuditEvent
from tests.conftest import Raw, free_port

CHROMIUM = os.environ.get("MCP_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

pytestmark = pytest.mark.django_db(transaction=True)


def _browser_or_skip() -> Any:
    required = bool(os.environ.get("MCP_REQUIRE_BROWSER"))
    if not os.path.exists(CHROMIUM) and not required:
        pytest.skip(f"{CHROMIUM} is not installed (make browser-deps); set MCP_REQUIRE_BROWSER=1 to fail instead")
    from playwright.sync_api import sync_playwright  # a missing package fails: it is in requirements.txt

    return sync_playwright


class AdminServer:
    """uvicorn serving the demo's ASGI app with its static files (the admin's CSS), in a thread."""

    def __init__(self) -> None:
        import uvicorn
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        from project.asgi import application

        self.port = free_port()
        config = uvicorn.Config(
            ASGIStaticFilesHandler(application), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> AdminServer:
        self.thread.start()
        deadline = time.time() + 15
        while not self.server.started:
            assert time.time() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def admin_server(transactional_db: None) -> Iterator[AdminServer]:
    with AdminServer() as server:
        yield server


def _make_history(mcp_url: str) -> None:
    """A round, a completion and two refusals, through the real endpoint."""
    with httpx.Client(timeout=30) as http:
        raw = Raw(mcp_url, http)
        first = raw.call("test_input_required_result_elicitation").json()["result"]
        answer = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
        raw.call("test_input_required_result_elicitation", inputResponses=answer, requestState=first["requestState"])
        head, mac = first["requestState"].rsplit(".", 1)
        tampered = f"{head}.{'A' if mac[0] != 'A' else 'B'}{mac[1:]}"
        raw.call("test_input_required_result_elicitation", inputResponses=answer, requestState=tampered)
        raw.call("test_input_required_result_sampling", caps={})
    audit.flush()


def test_admin_pages_in_a_browser(admin_server: AdminServer) -> None:
    sync_playwright = _browser_or_skip()
    audit.flush()
    AuditEvent.objects.all().delete()  # only this test's rows, whatever ran before
    get_user_model().objects.create_superuser("admin", "admin@example.com", "admin-password")
    _make_history(admin_server.url + "/mcp")
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(admin_server.url + "/admin/login/?next=/admin/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin-password")
            page.click("input[type=submit]")
            page.wait_for_url("**/admin/")

            # Reachable from the index: follow the link rather than typing the URL.
            page.click("text=Registered handlers")
            page.wait_for_selector("#mcp-handlers")
            page.screenshot(path=str(ARTIFACTS / "admin-handlers-top.png"))
            row = page.locator('tr[data-handler="tool:test_input_required_result_elicitation"]')
            cells = [c.strip() for c in row.locator("td").all_inner_texts()]
            assert "project.conformance.mcp.test_input_required_result_elicitation" in cells[4]
            assert "user_name: elicitation/create" in cells[5]
            assert cells[6].startswith("1") and cells[7] == "1" and cells[8] == "1"  # calls, rounds, refusals
            assert page.locator("#mcp-handlers tbody tr").count() > 30
            row.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "admin-handlers.png"), full_page=False)

            page.goto(admin_server.url + "/admin/mcp_django/auditevent/?kind=refusals")
            page.wait_for_selector("#result_list")
            text = page.locator("#result_list").inner_text()
            assert "bad_signature" in text and "sampling" in text
            assert "input round" not in text and "completed" not in text
            assert page.locator("#result_list tbody tr").count() == 2
            assert page.locator("#changelist-filter").inner_text().count("refusals") >= 1
            page.screenshot(path=str(ARTIFACTS / "admin-audit-refusals.png"), full_page=True)
        finally:
            browser.close()
    assert (ARTIFACTS / "admin-handlers.png").stat().st_size > 10_000
