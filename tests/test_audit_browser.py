"""A real browser in the demo admin, at 1280 px: the audit log, the handlers page, a handler's page.

Headless Chromium (Debian's package, ``make browser-deps``) driven by Playwright;
Playwright never downloads a browser here. Screenshots go to ``test-artifacts/``.
The test skips only when Chromium is absent and ``MCP_REQUIRE_BROWSER`` is unset:
CI sets it, so a missing browser fails there instead of passing quietly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model

from mcp_django import audit
from mcp_django.models import AuditEvent
from tests.conftest import Raw
from tests.processes import ThreadedUvicorn

CHROMIUM = os.environ.get("MCP_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

pytestmark = pytest.mark.django_db(transaction=True)


def _browser_or_skip() -> Any:
    required = bool(os.environ.get("MCP_REQUIRE_BROWSER"))
    if not os.path.exists(CHROMIUM) and not required:
        pytest.skip(f"{CHROMIUM} is not installed (make browser-deps); set MCP_REQUIRE_BROWSER=1 to fail instead")
    from playwright.sync_api import sync_playwright  # a missing package fails: it is in requirements.txt

    return sync_playwright


WIDTH = 1280


class AdminServer(ThreadedUvicorn):
    """uvicorn serving the demo's ASGI app in a thread; its WhiteNoise serves the admin's CSS."""

    def __init__(self) -> None:
        from project.asgi import application

        super().__init__(application)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def admin_server(transactional_db: None) -> Iterator[AdminServer]:
    with AdminServer() as server:
        yield server


def _make_history(mcp_url: str, token: str) -> None:
    """A round and a completion by a user with a token, two anonymous refusals, through the real endpoint."""
    with httpx.Client(timeout=30) as http:
        raw = Raw(mcp_url, http)
        auth = {"authorization": f"Token {token}"}
        first = raw.call("test_input_required_result_elicitation", headers=auth).json()["result"]
        answer = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
        raw.call(
            "test_input_required_result_elicitation",
            inputResponses=answer,
            requestState=first["requestState"],
            headers=auth,
        )
        anonymous = raw.call("test_input_required_result_elicitation").json()["result"]
        head, mac = anonymous["requestState"].rsplit(".", 1)
        tampered = f"{head}.{'A' if mac[0] != 'A' else 'B'}{mac[1:]}"
        raw.call("test_input_required_result_elicitation", inputResponses=answer, requestState=tampered)
        raw.call("test_input_required_result_sampling", caps={})
    audit.flush()


def signed_in(browser: Any, server: AdminServer, username: str, password: str) -> Any:
    """A 1280 px page of ``browser``, signed in to the admin as ``username``."""
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    page.goto(server.url + "/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return page


def _visible(page: Any, selector: str, within: str | None = None) -> None:
    """On screen without scrolling sideways: inside the 1280 px viewport and, when given,
    inside the container that would otherwise clip it (the changelist's scrolling box)."""
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not rendered"
    right = WIDTH
    if within is not None:
        outer = page.locator(within).first.bounding_box()
        assert outer is not None
        right = min(right, outer["x"] + outer["width"])
    assert box["width"] > 0 and box["x"] >= 0 and box["x"] + box["width"] <= right + 0.5, (selector, box, right)


def test_admin_pages_in_a_browser(admin_server: AdminServer) -> None:
    from rest_framework.authtoken.models import Token

    sync_playwright = _browser_or_skip()
    audit.flush()
    AuditEvent.objects.all().delete()  # only this test's rows, whatever ran before
    user = get_user_model().objects.create_superuser("admin", "admin@example.com", "admin-password")
    _make_history(admin_server.url + "/mcp", Token.objects.create(user=user).key)
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = signed_in(browser, admin_server, "admin", "admin-password")

            # The audit log: the admin's CSS is served, and the columns that matter fit at 1280 px.
            page.goto(admin_server.url + "/admin/mcp_django/auditevent/")
            page.wait_for_selector("#result_list")
            for sheet in ("admin/css/base.css", "mcp_django/admin.css"):
                loaded = "[...document.styleSheets].some(s => s.href && s.href.endsWith(%r) && s.cssRules.length > 0)"
                assert page.evaluate(loaded % sheet), f"{sheet} was not served"
            page.screenshot(path=str(ARTIFACTS / "admin-audit-1280.png"))
            for column in ("when", "what", "target_method", "who", "via", "round", "duration"):
                _visible(page, f"#result_list th.column-{column}", within="#changelist .results")
            rows = page.locator("#result_list tbody tr")
            assert rows.count() == 5
            assert (
                page.locator("#result_list td.field-who", has_text="admin").count() == 2
            )  # a username, not auth.user:1
            assert page.locator("#result_list td.field-via").first.inner_text().split() == ["http", "2026-07-28"]
            assert re.fullmatch(
                r"\d{4}-\d\d-\d\d\s+\d\d:\d\d:\d\d", page.locator("#result_list th.field-when").first.inner_text()
            )
            # No filter lists every target or principal; search finds a username.
            assert page.locator('#changelist-filter [data-filter-title="target"]').count() == 0
            page.fill("#searchbar", "admin")
            page.press("#searchbar", "Enter")
            page.wait_for_url("**q=admin**")
            assert page.locator("#result_list tbody tr").count() == 2

            page.goto(admin_server.url + "/admin/mcp_django/auditevent/?kind=refusals")
            page.wait_for_selector("#result_list")
            text = page.locator("#result_list").inner_text()
            assert "bad_signature" in text and "sampling" in text
            assert "input round" not in text and "completed" not in text
            assert page.locator("#result_list tbody tr").count() == 2
            page.screenshot(path=str(ARTIFACTS / "admin-audit-refusals.png"), full_page=True)

            # The handlers page, reached from the index; searched.
            page.goto(admin_server.url + "/admin/")
            page.click("text=Registered handlers")
            page.wait_for_selector("#mcp-handlers")
            assert page.locator("#mcp-handlers tbody tr").count() > 30
            for column in (1, 5, 6, 7, 8):  # type, name ... asks, calls, rounds, refusals
                _visible(page, f"#mcp-handlers thead th:nth-child({column})")
            page.fill("#mcp-q", "input_required_result_elicitation")
            page.press("#mcp-q", "Enter")
            page.wait_for_url("**q=input_required_result_elicitation**")
            row = page.locator('tr[data-handler="tool:test_input_required_result_elicitation"]')
            page.screenshot(path=str(ARTIFACTS / "admin-handlers.png"))
            assert page.locator("#mcp-handlers tbody tr").count() == 1
            cells = [c.strip() for c in row.locator("td").all_inner_texts()]
            assert "project.conformance.mcp.test_input_required_result_elicitation" in cells[3]
            assert "user_name: elicitation/create" in cells[4]
            asks = row.locator("td.mcp-asks").bounding_box()
            assert (
                asks is not None and asks["width"] > 120 and asks["height"] < 150
            )  # readable, not a column of letters
            assert cells[5] == "1" and cells[6] == "2" and cells[7] == "1"  # calls, rounds, refusals

            # Its own page: what it is, a chart, recent calls, links into the audit log.
            row.locator("a").first.click()
            page.wait_for_selector("#mcp-handler-chart")
            assert page.locator("#mcp-handler-chart rect").count() == 3  # today's calls, rounds, refusals
            assert (
                '"$schema"' in page.locator("#mcp-handler-schema").inner_text()
                or "{" in page.locator("#mcp-handler-schema").inner_text()
            )
            assert "def test_input_required_result_elicitation" in page.locator("#mcp-handler-source").inner_text()
            assert "user_name" in page.locator("#mcp-handler-asks").inner_text()
            assert page.locator("#mcp-handler-recent tbody tr").count() == 4  # 2 rounds, 1 completion, 1 refusal
            _visible(page, "#mcp-handler-chart")
            page.screenshot(path=str(ARTIFACTS / "admin-handler-detail.png"), full_page=True)
            page.click("#mcp-handler-totals a[href*='kind=refusals']")
            page.wait_for_selector("#result_list")
            assert page.locator("#result_list tbody tr").count() == 1
            assert "bad_signature" in page.locator("#result_list").inner_text()
        finally:
            browser.close()
    assert (ARTIFACTS / "admin-audit-1280.png").stat().st_size > 10_000
