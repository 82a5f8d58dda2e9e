"""MCP Apps (io.modelcontextprotocol/ui, docs/apps.md) on the wire: the demo shop's order view.

The shapes are checked against the JSON schema of the spec's package
(@modelcontextprotocol/ext-apps's schema.json); the in-process client plays a host (apps=True)
or a client that renders no views; the legacy era is a real websocket session.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.urls import reverse
from rest_framework.authtoken.models import Token

from mcp_django import audit, mcp
from mcp_django import mcp_ui as view_table
from mcp_django.mcp_ui import MIME_TYPE, view
from mcp_django.mcp_ui.checks import check_views
from mcp_django.mcp_ui.methods import fallback_text
from mcp_django.models import AuditEvent
from mcp_django.testing import JSONRPCError, MCPClient
from project.shop.models import Order, Product
from scripts import wheel_test
from tests.conftest import sdk_client
from tests.legacy_fixtures import ws_client

SCHEMA_FILE = (
    Path(__file__).resolve().parent
    / "clients/node_modules/@modelcontextprotocol/ext-apps/dist/src/generated/schema.json"
)
UI = "io.modelcontextprotocol/ui"
HOST_CAPS = {"extensions": {UI: {"mimeTypes": [MIME_TYPE]}}}
ORDER_VIEW = "ui://shop/order_view.html"
HANDLER = "admin:mcp_django_registeredhandler_handler"


def _schema(name: str) -> dict[str, Any]:
    if not SCHEMA_FILE.exists():
        pytest.skip("@modelcontextprotocol/ext-apps is not installed (make clients-install)")
    definitions = json.loads(SCHEMA_FILE.read_text())["$defs"]
    return dict(definitions[name])


def valid(name: str, instance: Any) -> None:
    jsonschema.Draft202012Validator(_schema(name)).validate(instance)


@pytest.fixture
def vera(db: None) -> Any:
    return get_user_model().objects.create_user("vera")


@pytest.fixture
def order(vera: Any) -> Order:
    mug = Product.objects.create(name="Mug", sku="MUG-01", price="7.50", stock=10)
    return Order.objects.create(owner=vera, product=mug, quantity=2, status=Order.Status.PAID)


@pytest.fixture
def own_views() -> Iterator[None]:
    """Only the views a test registers, while it runs (the table is the process's)."""
    kept = dict(view_table.views)
    view_table.views.clear()
    yield
    view_table.views.clear()
    view_table.views.update(kept)


# -- a host: the extension declared ------------------------------------------------------


@pytest.mark.django_db
def test_a_host_is_told_each_tools_view_and_visibility(vera: Any) -> None:
    tools = {t["name"]: t for t in MCPClient(user=vera, apps=True).list_tools()}
    assert tools["show_order"]["_meta"] == {"ui": {"resourceUri": ORDER_VIEW}}
    assert tools["reorder"]["_meta"] == {"ui": {"visibility": ["app"]}}
    for name in ("show_order", "reorder"):
        valid("McpUiToolMeta", tools[name]["_meta"]["ui"])
    assert "_meta" not in tools["refund_order"]


@pytest.mark.django_db
def test_the_view_is_one_self_contained_page(vera: Any) -> None:
    client = MCPClient(user=vera, apps=True)
    page = client.read_view("show_order")
    entry = page.contents[0]
    assert (entry["uri"], entry["mimeType"]) == (ORDER_VIEW, MIME_TYPE)
    assert entry["_meta"] == {"ui": {"csp": {}, "prefersBorder": True}}
    valid("McpUiResourceMeta", entry["_meta"]["ui"])
    html = page.text
    assert html.startswith("<!DOCTYPE html>")
    # The ext-apps view script, the view's CSS and JS: inlined, nothing loaded from anywhere.
    assert "var McpApps=" in html and "font: 14px/1.4" in html and 'callServerTool({ name: "reorder"' in html
    assert "<script src" not in html and "<link" not in html and "http://" not in html.split("var McpApps=")[0]
    listed = {r["uri"]: r for r in client.list_resources()}
    assert listed[ORDER_VIEW]["mimeType"] == MIME_TYPE and listed[ORDER_VIEW]["name"] == "order_view"
    valid("McpUiResourceMeta", listed[ORDER_VIEW]["_meta"]["ui"])


@pytest.mark.django_db
def test_the_server_declares_the_extension_on_2026_07_28() -> None:
    declared = MCPClient().request("server/discover")["capabilities"]["extensions"][UI]
    assert declared == {"mimeTypes": [MIME_TYPE]}
    valid("McpUiClientCapabilities", declared)


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_the_legacy_era_declares_and_lists_the_same(live_url: str) -> None:
    user = await get_user_model().objects.acreate(username="vera")
    token = await Token.objects.acreate(user=user)
    async with ws_client(live_url, additional_headers={"Authorization": f"Token {token.key}"}) as host:
        caps = (await host.initialize(HOST_CAPS))["result"]["capabilities"]
        assert caps["extensions"][UI] == {"mimeTypes": [MIME_TYPE]}
        tools = {t["name"]: t for t in (await host.request("tools/list"))["result"]["tools"]}
        assert tools["show_order"]["_meta"] == {"ui": {"resourceUri": ORDER_VIEW}}
        assert tools["reorder"]["_meta"] == {"ui": {"visibility": ["app"]}}
        read = (await host.request("resources/read", {"uri": ORDER_VIEW}))["result"]["contents"][0]
        assert read["mimeType"] == MIME_TYPE and "var McpApps=" in read["text"]
    async with ws_client(live_url, additional_headers={"Authorization": f"Token {token.key}"}) as plain:
        await plain.initialize({})
        assert "reorder" not in {t["name"] for t in (await plain.request("tools/list"))["result"]["tools"]}


# -- data for the view and the model ----------------------------------------------------


@pytest.mark.django_db
def test_the_result_has_text_for_the_model_and_data_for_the_view(vera: Any, order: Order) -> None:
    result = MCPClient(user=vera, apps=True).call_tool("show_order", {"order_id": order.pk})
    assert result.content == [{"type": "text", "text": f"Order #{order.pk} (Paid): 2 x Mug, 15.00."}]
    assert result.structured["lines"] == [
        {"product": "Mug", "sku": "MUG-01", "quantity": 2, "price": "7.50", "total": "15.00"}
    ]


@pytest.mark.django_db
def test_a_client_without_the_extension_gets_the_tool_without_its_view(vera: Any, order: Order) -> None:
    client = MCPClient(user=vera)
    tools = {t["name"]: t for t in client.list_tools()}
    assert "_meta" not in tools["show_order"] and "reorder" not in tools
    result = client.call_tool("show_order", {"order_id": order.pk})
    # The text fallback says what happened; the data is still there.
    assert result.content[-1]["text"] == fallback_text(view_table.views[ORDER_VIEW])
    assert "was not shown" in result.text and result.structured["id"] == order.pk
    with pytest.raises(JSONRPCError) as raised:
        client.call_tool("reorder", {"order_id": order.pk}, answer=lambda r: True)
    assert (raised.value.code, raised.value.message) == (-32602, "Unknown tool: reorder")
    with pytest.raises(LookupError, match="apps=True"):
        client.read_view("show_order")
    assert Order.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_the_view_calls_an_asking_app_only_tool(vera: Any, order: Order, revision: str) -> None:
    host = MCPClient(user=vera, apps=True, revision=revision)
    declined = host.call_tool("reorder", {"order_id": order.pk}, answer={"reorder": False})
    assert declined.structured == {"reordered": None} and Order.objects.count() == 1
    done = host.call_tool("reorder", {"order_id": order.pk}, answer={"reorder": True})
    again = Order.objects.exclude(pk=order.pk).get()
    assert done.structured["reordered"]["id"] == again.pk and done.text == f"Ordered again as #{again.pk}."
    if revision == "2026-07-28":
        # The replay rule: one round of input, the handler run once more with its answer, one write.
        assert len(done.rounds) == 1 and done.runs == 2
    host.close()
    audit.flush()
    # Audited as any call: each one completed, by vera (and on 2026-07-28 each round too).
    rows = AuditEvent.objects.filter(target="reorder")
    assert rows.filter(kind="completed").count() == 2 and {row.user_id for row in rows} == {vera.pk}
    asks = "round" if revision == "2026-07-28" else "ask"
    assert rows.filter(kind=asks).count() == 2


@pytest.mark.django_db
def test_permissions_hold_for_a_view_as_for_any_caller(order: Order, caplog: pytest.LogCaptureFixture) -> None:
    other = get_user_model().objects.create_user("otto")
    result = MCPClient(user=other, apps=True).call_tool("reorder", {"order_id": order.pk}, answer=lambda r: True)
    assert result.is_error and Order.objects.count() == 1  # not otto's order
    shown = MCPClient(user=other, apps=True).call_tool("show_order", {"order_id": order.pk})
    # Told as the model reads it, not a server error with a traceback in the log (the fuzzer's find).
    assert shown.is_error and shown.text == f"You have no order #{order.pk}."
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    with pytest.raises(JSONRPCError):
        MCPClient(apps=True).call_tool("reorder", {"order_id": order.pk})  # anonymous: not listed, not callable


# -- registration, templates, static files, checks --------------------------------------


def test_bad_options_are_refused_at_registration(own_views: None) -> None:
    with pytest.raises(TypeError, match="app= must be a template name"):
        mcp.tool(app=42)(lambda: "")
    with pytest.raises(TypeError, match="visibility= takes 'model' and 'app' only"):
        mcp.tool(visibility=["robot"])(lambda: "")
    with pytest.raises(TypeError, match="non-empty list"):
        mcp.tool(visibility="app")(lambda: "")
    with pytest.raises(ImproperlyConfigured, match="permissions are of"):
        view("x.html", permissions=["laser"])
    with pytest.raises(ImproperlyConfigured, match="must start with ui://"):
        view("x.html", uri="https://example.com/x")
    view("x.html")
    with pytest.raises(ImproperlyConfigured, match="other settings"):
        view("x.html", connect=["https://api.example.com"])


def test_a_shared_view_with_csp_and_permissions(own_views: None) -> None:
    board = view(
        "shop/board.html",
        connect=["https://api.example.com"],
        resources=["https://cdn.example.com"],
        frames=["https://player.example.com"],
        base_uri=["https://cdn.example.com"],
        permissions=["clipboard_write", "camera"],
        prefers_border=False,
        domain="shop.example-sandbox.com",
    )
    ui = board.ui_meta()
    assert ui == {
        "csp": {
            "connectDomains": ["https://api.example.com"],
            "resourceDomains": ["https://cdn.example.com"],
            "frameDomains": ["https://player.example.com"],
            "baseUriDomains": ["https://cdn.example.com"],
        },
        "permissions": {"clipboardWrite": {}, "camera": {}},
        "prefersBorder": False,
        "domain": "shop.example-sandbox.com",
    }
    valid("McpUiResourceMeta", ui)


@pytest.fixture
def project_files(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "templates").mkdir()
    (tmp_path / "static").mkdir()
    templates = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [tmp_path / "templates"]}]
    with override_settings(TEMPLATES=templates, STATICFILES_DIRS=[tmp_path / "static"]):
        yield tmp_path


def _ids() -> list[str]:
    return [message.id for message in check_views()]


def test_a_view_without_its_template_is_an_error(own_views: None, project_files: Path) -> None:
    view("nowhere/view.html")
    assert _ids() == ["mcp_django.ui.E001"]


def test_a_view_loading_from_an_undeclared_origin_is_an_error(own_views: None, project_files: Path) -> None:
    page = (
        '<html><head><script src="https://cdn.example.com/lib.js"></script>'
        "<style>body { background: url(https://img.example.org/bg.png) }</style></head>"
        '<body><iframe src="https://player.example.com/v"></iframe><a href="https://docs.example.com">docs</a>'
        "<script>fetch('https://api.example.com/orders')</script><img src=\"data:image/png;base64,AA\"></body></html>"
    )
    (project_files / "templates" / "loads.html").write_text(page)
    view("loads.html")
    messages = check_views()
    assert [m.id for m in messages] == ["mcp_django.ui.E002"] * 4
    assert "resources=['https://cdn.example.com']" in (messages[0].hint or "")
    # Declared, each in its list (a wildcard for the images), it is served as it is.
    view_table.views.clear()
    view(
        "loads.html",
        resources=["https://cdn.example.com", "https://*.example.org"],
        frames=["https://player.example.com"],
        connect=["https://api.example.com"],
    )
    assert _ids() == []


def test_a_relative_url_is_an_error(own_views: None, project_files: Path) -> None:
    (project_files / "templates" / "relative.html").write_text('<link rel="stylesheet" href="/static/site.css">')
    view("relative.html")
    [message] = check_views()
    assert message.id == "mcp_django.ui.E002" and "mcp_app_inline" in (message.hint or "")


def test_inlined_static_files_cannot_end_their_element(own_views: None, project_files: Path) -> None:
    (project_files / "static" / "evil.js").write_text('document.title = "</script><script>alert(1)</script>";')
    (project_files / "static" / "evil.css").write_text('p::after { content: "</style>" }')
    (project_files / "templates" / "inline.html").write_text(
        '{% load mcp_ui %}<html>{% mcp_app_inline "evil.css" %}{% mcp_app_inline "evil.js" %}</html>'
    )
    (project_files / "templates" / "missing.html").write_text('{% load mcp_ui %}{% mcp_app_inline "gone.js" %}')
    from mcp_django.mcp_ui.render import render

    html = render(view("inline.html"))
    assert html.count("</script>") == 1 and html.count("</style>") == 1
    assert '"<\\/script><script>alert(1)<\\/script>"' in html
    view("missing.html")
    assert _ids() == ["mcp_django.ui.E001"]


# -- the admin ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_page_of_a_tool_shows_its_view_sandboxed(admin_client: Any) -> None:
    page = admin_client.get(reverse(HANDLER, args=["tool", "show_order"])).content.decode()
    frame = page.split('<iframe id="mcp-ui-frame"', 1)[1].split("</iframe>", 1)[0]
    assert 'sandbox="allow-scripts"' in frame and 'srcdoc="&lt;!DOCTYPE html&gt;' in frame
    # The host's policy from the declaration (nothing external), first in the page's head.
    assert (
        "&lt;head&gt;&lt;meta http-equiv=&quot;Content-Security-Policy&quot; content=&quot;default-src &#x27;none&#x27;"
        in frame
    )
    assert "<code>ui://shop/order_view.html</code>" in page and "nothing external" in page
    reorder = admin_client.get(reverse(HANDLER, args=["tool", "reorder"])).content.decode()
    assert 'id="mcp-ui-view"' in reorder and "<td>app</td>" in reorder and "<iframe" not in reorder
    assert 'id="mcp-ui-view"' not in admin_client.get(reverse(HANDLER, args=["tool", "echo"])).content.decode()


# -- the same view as in the README's project (scripts/wheel_test.py) ----------------------


@pytest.mark.django_db
def test_the_demo_serves_the_view_the_readmes_project_serves(own_views: None, project_files: Path, vera: Any) -> None:
    (project_files / "templates" / "notes").mkdir()
    (project_files / "templates" / "notes" / "card.html").write_text(wheel_test.VIEW_TEMPLATE)
    (project_files / "static" / "notes").mkdir()
    (project_files / "static" / "notes" / "card.css").write_text(wheel_test.VIEW_CSS)

    @mcp.tool(app="notes/card.html")
    def note_card() -> dict[str, str]:
        return {"title": "A note"}

    try:
        page = MCPClient(user=vera, apps=True).read_view("note_card")
    finally:
        mcp.remove("tools", "note_card")
    assert page.contents[0]["_meta"] == {"ui": {"csp": {}, "prefersBorder": True}}
    assert page.text == wheel_test.expected_view()


@pytest.mark.django_db
def test_a_view_that_does_not_render_is_an_internal_error_and_no_view_no_declaration(
    own_views: None, project_files: Path, caplog: Any
) -> None:
    client = MCPClient(apps=True)
    assert UI not in client.request("server/discover")["capabilities"].get("extensions", {})
    view("gone/view.html")
    assert UI in client.request("server/discover")["capabilities"]["extensions"]
    with pytest.raises(JSONRPCError) as raised:
        client.read_resource("ui://gone/view.html")
    assert (raised.value.code, raised.value.message) == (-32603, "view ui://gone/view.html cannot be rendered")
    assert "gone/view.html" in caplog.text


# -- the official Python SDK as the host's client ----------------------------------------------


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_the_python_sdk_as_a_hosts_client(live_url: str, mode: str) -> None:
    from mcp import types
    from mcp.client.extension import advertise

    user = await get_user_model().objects.acreate(username="vera")
    token = await Token.objects.acreate(user=user)
    mug = await Product.objects.acreate(name="Mug", sku="MUG-01", price="7.50", stock=10)
    order = await Order.objects.acreate(owner=user, product=mug, quantity=2, status=Order.Status.PAID)
    asked: list[str] = []

    async def confirm(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    ui = advertise(UI, {"mimeTypes": [MIME_TYPE]})
    async with sdk_client(live_url, token=token.key, mode=mode, extensions=[ui], elicitation_callback=confirm) as host:
        tools = {tool.name: tool for tool in (await host.list_tools()).tools}
        assert tools["show_order"].meta == {"ui": {"resourceUri": ORDER_VIEW}}
        assert tools["reorder"].meta == {"ui": {"visibility": ["app"]}}
        page = (await host.read_resource(ORDER_VIEW)).contents[0]
        assert page.mime_type == MIME_TYPE and "var McpApps=" in page.text
        shown = await host.call_tool("show_order", {"order_id": order.pk})
        assert shown.structured_content["total"] == "15.00" and len(shown.content) == 1  # no fallback
        again = await host.call_tool("reorder", {"order_id": order.pk})
    assert asked == ["Order 2 x Mug again, for 15.00?"]
    assert again.structured_content["reordered"]["id"] == (await Order.objects.exclude(pk=order.pk).aget()).pk
