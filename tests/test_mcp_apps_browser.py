"""MCP Apps in a real host, in a real browser: the demo shop's order view.

The host (tests/clients/apps_host.mjs, served from its own localhost origin) is built on the
official packages: ``@modelcontextprotocol/client`` connects to the demo on 2026-07-28 and
declares the ``io.modelcontextprotocol/ui`` extension; ext-apps' ``AppBridge`` drives the view
in an ``<iframe sandbox="allow-scripts" srcdoc>`` under the CSP the view's ``_meta.ui`` asks
for. Headless Debian Chromium (Playwright) loads it, sees the order rendered, clicks the view's
button (which calls the app-only tool ``reorder`` through the host), answers the host's confirm
and sees the new order. A screenshot is saved in test-artifacts/.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from project.shop.models import Order, Product
from tests.conftest import mcp_settings
from tests.test_audit_browser import ARTIFACTS, CHROMIUM, AdminServer, _browser_or_skip

CLIENTS = Path(__file__).resolve().parent / "clients"
ESBUILD = CLIENTS / "node_modules" / ".bin" / "esbuild"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[str]:
    """The host page and its bundle, served on a localhost origin of their own."""
    if not ESBUILD.exists():
        pytest.skip("esbuild is not installed (make clients-install)")
    subprocess.run(
        [str(ESBUILD), "apps_host.mjs", "--bundle", "--format=iife", "--platform=browser",
         f"--outfile={tmp_path / 'apps_host.js'}", "--log-level=warning"],
        cwd=CLIENTS, check=True, timeout=120,
    )  # fmt: skip
    shutil.copy(CLIENTS / "apps_host.html", tmp_path / "apps_host.html")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_order_view_in_a_host_reorders_after_a_confirm(live_url: str, host: str) -> None:
    sync_playwright = _browser_or_skip()
    user = get_user_model().objects.create_user("vera")
    token = Token.objects.create(user=user).key
    mug = Product.objects.create(name="Mug", sku="MUG-01", price="7.50", stock=10)
    order = Order.objects.create(owner=user, product=mug, quantity=2, status=Order.Status.PAID)
    query = urlencode(
        {"server": live_url, "token": token, "tool": "show_order", "args": json.dumps({"order_id": order.pk})}
    )
    ARTIFACTS.mkdir(exist_ok=True)

    with mcp_settings(ALLOWED_ORIGINS=[host]), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 700})
            errors: list[str] = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.goto(f"{host}/apps_host.html?{query}")
            page.wait_for_selector("body[data-state=shown], body[data-state=failed]", timeout=60_000)
            assert page.get_attribute("body", "data-state") == "shown", (page.inner_text("#log"), errors)

            # The host saw the app-only tool with its visibility, and keeps it from the model.
            listed = {tool["name"]: tool["meta"] for tool in page.evaluate("window.listed")}
            assert listed["reorder"] == {"ui": {"visibility": ["app"]}}
            assert listed["show_order"] == {"ui": {"resourceUri": "ui://shop/order_view.html"}}
            assert "reorder" not in page.evaluate("window.modelTools")
            assert page.evaluate("window.viewMeta") == {"ui": {"csp": {}, "prefersBorder": True}}
            frame_element = page.locator("iframe#view")
            assert frame_element.get_attribute("sandbox") == "allow-scripts"

            view = page.frame_locator("iframe#view")
            view.locator("h1", has_text=f"Order #{order.pk}").wait_for(timeout=45_000)
            cells = view.locator("tbody tr td").all_inner_texts()
            assert cells == ["Mug", "MUG-01", "2", "7.50", "15.00"]
            assert view.locator("[data-field=status]").inner_text().lower() == "paid"

            view.locator("#reorder").click()
            page.wait_for_selector("dialog#confirm[open]", timeout=45_000)
            assert page.inner_text("dialog#confirm p") == "Order 2 x Mug again, for 15.00?"
            page.screenshot(path=str(ARTIFACTS / "mcp-apps-confirm.png"))
            page.click("#confirm-yes")
            outcome = view.locator("#outcome")
            outcome.filter(has_text="Ordered again as #").wait_for(timeout=45_000)
            page.screenshot(path=str(ARTIFACTS / "mcp-apps-order-view.png"))
            reordered = int(outcome.get_attribute("data-reordered") or 0)
            log = page.inner_text("#log")
            assert "view calls reorder" in log and f"Ordered again as #{reordered}." in log
            assert not [e for e in errors if "Content Security Policy" in e], errors
        finally:
            browser.close()

    again = Order.objects.get(pk=reordered)
    assert (again.owner, again.product, again.quantity, again.status) == (user, mug, 2, Order.Status.PENDING)
    assert Order.objects.count() == 2


def test_the_admin_shows_a_tools_view_in_a_sandboxed_frame(transactional_db: None) -> None:
    sync_playwright = _browser_or_skip()
    get_user_model().objects.create_superuser("admin", "admin@example.com", "admin-password")
    ARTIFACTS.mkdir(exist_ok=True)
    with AdminServer() as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1100})
            errors: list[str] = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.goto(server.url + "/admin/login/?next=/admin/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin-password")
            page.click("input[type=submit]")
            page.wait_for_url("**/admin/")
            page.goto(server.url + "/admin/mcp_django/registeredhandler/tool/show_order/")
            frame = page.locator("iframe#mcp-ui-frame")
            assert frame.get_attribute("sandbox") == "allow-scripts"
            # The view's own page, its inlined CSS applied, waiting for a host's tool result.
            waiting = page.frame_locator("iframe#mcp-ui-frame").locator("p.waiting")
            waiting.wait_for(timeout=45_000)
            assert waiting.inner_text() == "Loading the order…"
            assert waiting.evaluate("e => getComputedStyle(e).color") == "rgb(102, 102, 102)"
            page.locator("#mcp-ui-view").screenshot(path=str(ARTIFACTS / "mcp-apps-admin-view.png"))
            assert not [e for e in errors if "Content Security Policy" in e], errors
        finally:
            browser.close()
