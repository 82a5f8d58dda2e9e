"""An audit row's page in a real browser at 1280 px: who (the username) and, for a failed
call, the error the client got (issue 29).

A row's title said "by auth.user:2" and a failed call's row showed only "tool error" or
"error -32602": now the title names the user and the row keeps the error's message, cut to
500 characters (never the arguments or answers). Calls go through the real endpoint; the
pages are Chromium's (Debian's package), screenshots in ``test-artifacts/``.
"""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token

from mcp_django import audit
from mcp_django.models import AuditEvent, Kind
from tests.conftest import Raw
from tests.test_audit_browser import ARTIFACTS, CHROMIUM, AdminServer, _browser_or_skip, _visible, signed_in

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_ERROR = "This tool intentionally returns an error for testing"


def _failed_calls(mcp_url: str, token: str) -> dict[str, AuditEvent]:
    """A tool's error result, an unknown tool and a completed call, by the token's user."""
    with httpx.Client(timeout=30) as http:
        raw = Raw(mcp_url, http)
        auth = {"authorization": f"Token {token}"}
        assert raw.call("test_error_handling", headers=auth).json()["result"]["isError"] is True
        assert raw.call("no_such_tool", headers=auth).json()["error"]["code"] == -32602
        assert raw.call("echo", {"text": "secret words"}, headers=auth).json()["result"]
    audit.flush()
    rows = AuditEvent.objects.filter(kind__in=(Kind.FAILED, Kind.COMPLETED))
    return {row.target: row for row in rows}


@pytest.fixture
def admin_server(transactional_db: None) -> AdminServer:
    with AdminServer() as server:
        yield server


def test_a_failed_calls_row_keeps_its_error_and_names_the_user(admin_server: AdminServer) -> None:
    audit.flush()
    AuditEvent.objects.all().delete()
    user = get_user_model().objects.create_superuser("ada", "ada@example.com", "ada-password")
    rows = _failed_calls(admin_server.url + "/mcp", Token.objects.create(user=user).key)
    failed, unknown, done = rows["test_error_handling"], rows["no_such_tool"], rows["echo"]
    assert (failed.reason, failed.error) == ("tool error", TOOL_ERROR)
    assert (unknown.reason, unknown.error) == ("error -32602", "Unknown tool: no_such_tool")
    assert done.error == ""  # a completed call's result is never kept
    assert str(failed).endswith(f"{Kind.FAILED.label} (tool error): tools/call test_error_handling by ada")
    # A deleted account's rows keep the label they were written with.
    other = AuditEvent(kind=Kind.FAILED, method="tools/call", target="x", principal="auth.user:99")
    assert str(other).endswith("by auth.user:99")

    browser_client = Client()
    browser_client.force_login(user)
    page = browser_client.get(f"/admin/mcp_django/auditevent/{failed.pk}/change/").content.decode()
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]
    assert "by ada" in title and "auth.user:" not in title, title
    assert TOOL_ERROR in page

    sync_playwright = _browser_or_skip()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = signed_in(browser, admin_server, "ada", "ada-password")
            # The list: a failed call's error under its kind, clipped to the column, whole on hover.
            page.goto(admin_server.url + "/admin/mcp_django/auditevent/")
            page.wait_for_selector("#result_list")
            error = page.locator("#result_list td.field-what .mcp-error", has_text="This tool intentionally")
            assert error.count() == 1 and error.get_attribute("title") == TOOL_ERROR
            for column in ("when", "what", "target_method", "who", "via", "round", "duration"):
                _visible(page, f"#result_list th.column-{column}", within="#changelist .results")
            _visible(page, "#result_list td.field-what .mcp-error", within="#changelist .results")
            page.screenshot(path=str(ARTIFACTS / "admin-audit-failed-list.png"))
            page.goto(f"{admin_server.url}/admin/mcp_django/auditevent/{failed.pk}/change/")
            page.wait_for_selector(".field-error")
            assert "by ada" in page.title() and "by ada" in page.locator("#content").inner_text()
            assert TOOL_ERROR in page.locator(".field-error").inner_text()
            _visible(page, ".field-error .readonly")
            page.screenshot(path=str(ARTIFACTS / "admin-audit-failed-row.png"), full_page=True)
            page.goto(f"{admin_server.url}/admin/mcp_django/auditevent/{unknown.pk}/change/")
            page.wait_for_selector(".field-error")
            assert "Unknown tool: no_such_tool" in page.locator(".field-error").inner_text()
        finally:
            browser.close()
