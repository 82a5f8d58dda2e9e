"""An MCP token created in the admin, in a real browser: the secret on the page after the save, once.

Headless Chromium driven by Playwright, as in tests/test_audit_browser.py (skipped only
when Chromium is absent and ``MCP_REQUIRE_BROWSER`` is unset).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from django.contrib.auth import get_user_model

from mcp_django.tokens.models import MCPToken
from tests.conftest import Raw
from tests.test_audit_browser import ARTIFACTS, CHROMIUM, WIDTH, AdminServer, _browser_or_skip

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(transactional_db: None) -> Iterator[AdminServer]:
    with AdminServer() as running:
        yield running


def _whoami(url: str, token: str) -> httpx.Response:
    with httpx.Client(timeout=30) as http:
        return Raw(url + "/mcp", http).call("whoami", headers={"authorization": f"Bearer {token}"})


def test_a_token_created_in_the_admin_is_shown_once_and_revoked_there(server: AdminServer) -> None:
    sync_playwright = _browser_or_skip()
    get_user_model().objects.create_superuser("admin", "admin@example.com", "admin-password")
    owner = get_user_model().objects.create_user("rita", password="pw")
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto(server.url + "/admin/login/?next=/admin/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin-password")
            page.click("input[type=submit]")
            page.wait_for_url("**/admin/")

            page.goto(server.url + "/admin/mcp_django/mcptoken/add/")
            page.fill("#id_user", str(owner.pk))
            page.fill("#id_name", "browser-made")
            page.fill("#id_handlers", "whoami echo")
            page.click("input[name=_save]")
            page.wait_for_selector("#mcp-token")
            page.screenshot(path=str(ARTIFACTS / "admin-token-created.png"))
            text = page.input_value("#mcp-token")
            assert text.startswith("mcp_")
            # (No ORM here: Playwright's loop runs in this thread; the row is checked after.)
            _mcp, prefix, secret = text.split("_", 2)
            assert "not shown again" in page.inner_text("#content-main")

            answer = _whoami(server.url, text)
            assert answer.status_code == 200
            assert answer.json()["result"]["structuredContent"]["username"] == "rita"

            # Never again: "Done" leads to the token's page, which has the id and not the secret.
            page.click("text=Done")
            page.wait_for_selector("#mcptoken_form")
            assert prefix in page.content() and secret not in page.content()
            page.goto(server.url + "/admin/mcp_django/mcptoken/")
            assert secret not in page.content()

            # Revoked from the list: refused from the next request.
            page.locator("#result_list tr", has_text=prefix).locator("input[name=_selected_action]").check()
            page.select_option("select[name=action]", "revoke_tokens")
            page.click("button[name=index]")
            page.wait_for_selector("text=1 token revoked.")
            page.screenshot(path=str(ARTIFACTS / "admin-token-revoked.png"))
        finally:
            browser.close()
    assert _whoami(server.url, text).status_code == 401
    token = MCPToken.objects.get(prefix=prefix)
    assert token.name == "browser-made" and token.user == owner and token.handlers == "whoami echo"
    assert token.revoked is not None and secret not in token.secret_hash
