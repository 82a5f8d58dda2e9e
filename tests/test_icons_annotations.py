"""Icons, tool annotations and the server's description and website, as the official SDK client reads them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from rest_framework.authtoken.models import Token

from mcp_django.conf import InvalidSetting, icon_list
from mcp_django.icons import Icon, IconBase, icon_base
from mcp_django.registry import Registry
from tests.conftest import Raw, mcp_settings, sdk_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def _viewer_token() -> str:
    user = await get_user_model().objects.acreate(username="iconviewer")
    await user.user_permissions.aadd(await Permission.objects.aget(codename="view_product"))
    return (await Token.objects.acreate(user=user)).key


def _origin(url: str) -> str:
    return url.removesuffix("/mcp")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_reads_icons_annotations_and_server_info(live_url: str, mode: str) -> None:
    origin = _origin(live_url)
    async with sdk_client(live_url, token=await _viewer_token(), mode=mode) as client:
        info = client.server_info
        tools = {t.name: t for t in (await client.list_tools()).tools}
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        resources = {r.uri: r for r in (await client.list_resources()).resources}
        templates = {t.uri_template: t for t in (await client.list_resource_templates()).resource_templates}

    # serverInfo (server/discover's stamp, or initialize's), with its static icon as an absolute URL.
    assert info is not None
    assert info.description == "A small shop and a few demo tools, served over MCP by a Django project."
    assert info.website_url == "https://github.com/mcp-django/mcp-django"
    assert info.icons is not None and len(info.icons) == 1
    server_icon = info.icons[0]
    assert server_icon.src == f"{origin}/static/mcp_django/icons/server.svg"
    assert server_icon.mime_type == "image/svg+xml" and server_icon.sizes == ["any"]

    refund = tools["refund_order"]
    assert refund.title == "Refund an order"
    assert refund.annotations is not None
    assert refund.annotations.destructive_hint is True
    assert refund.annotations.idempotent_hint is False
    assert refund.annotations.open_world_hint is False
    assert refund.annotations.read_only_hint is None  # not said: the client's default applies
    assert refund.annotations.title == "Refund an order"
    assert refund.icons is not None
    (icon,) = refund.icons
    assert (icon.src, icon.mime_type, icon.sizes, icon.theme) == (
        f"{origin}/static/shop/icons/refund.svg",
        "image/svg+xml",
        ["48x48"],
        "light",
    )
    cart = f"{origin}/static/shop/icons/cart.svg"
    assert [i.src for i in prompts["order_help"].icons or []] == [cart]
    assert [i.src for i in resources["shop://catalogue"].icons or []] == [cart]
    assert [i.src for i in templates["shop://products/{sku}"].icons or []] == [cart]
    # A tool without icons has none; a view tool keeps the annotations it derives.
    assert tools["echo"].icons is None
    assert tools["products_list"].annotations is not None and tools["products_list"].annotations.read_only_hint

    # Each icon is served where its URL says (WhiteNoise, from the staticfiles finders here).
    with httpx.Client(timeout=10) as http:
        for src in (server_icon.src, icon.src, cart):
            fetched = http.get(src)
            assert fetched.status_code == 200, src
            assert fetched.content.startswith(b"<svg")


def test_revisions_before_2025_11_25_get_no_icons_nor_website(live_url: str) -> None:
    token = Token.objects.create(user=get_user_model().objects.create_user("oldclient")).key
    with httpx.Client(timeout=10, headers={"authorization": f"Token {token}"}) as http:
        for version, has in (("2025-11-25", True), ("2025-06-18", False), ("2025-03-26", False)):
            init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
            opened = http.post(
                live_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=headers
            )
            info = opened.json()["result"]["serverInfo"]
            assert ("icons" in info, "websiteUrl" in info, "description" in info) == (has, has, has), version
            session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version}
            listed = http.post(live_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
            body = listed.text
            tool = next(t for t in _json_of(body)["result"]["tools"] if t["name"] == "refund_order")
            assert ("icons" in tool) == has, version
            # Annotations are older than icons (2025-03-26): every revision here has them.
            assert tool["annotations"]["destructiveHint"] is True


def _json_of(body: str) -> Any:
    import json

    if body.lstrip().startswith("{"):
        return json.loads(body)
    return next(json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip())


def test_resource_url_gives_the_icons_origin(live_url: str) -> None:
    # Behind a proxy the request's host may be an internal one: RESOURCE_URL names the public origin.
    token = Token.objects.create(user=get_user_model().objects.create_user("proxied")).key
    with mcp_settings(RESOURCE_URL="https://mcp.shop.example/mcp"), httpx.Client(timeout=10) as http:
        auth = {"authorization": f"Token {token}"}
        listed = Raw(live_url, http).post("tools/list", headers=auth).json()["result"]["tools"]
    refund = next(t for t in listed if t["name"] == "refund_order")
    assert refund["icons"][0]["src"] == "https://mcp.shop.example/static/shop/icons/refund.svg"


def test_an_icon_whose_url_needs_a_host_is_left_out_without_one() -> None:
    declared = (Icon("shop/icons/cart.svg"), Icon("https://cdn.example/x.png", sizes=("32x32",)))
    # stdio: no request, no RESOURCE_URL; the absolute icon stays, the relative one is not sent.
    assert IconBase(None).describe(declared) == [
        {"src": "https://cdn.example/x.png", "mimeType": "image/png", "sizes": ["32x32"]}
    ]
    assert icon_base("2025-06-18", None, None) is None
    # stdio's request is a GET of /mcp with no Host: no origin, even where ALLOWED_HOSTS is "*".
    from django.test import RequestFactory, override_settings

    hostless = RequestFactory().get("/mcp")
    assert "HTTP_HOST" not in hostless.META
    hosted = RequestFactory().get("/mcp", HTTP_HOST="shop.example")
    with override_settings(ALLOWED_HOSTS=["*"]):
        assert [i["src"] for i in IconBase(lambda: hostless).describe(declared)] == ["https://cdn.example/x.png"]
        assert IconBase(lambda: hosted).describe(declared)[0]["src"] == "http://shop.example/static/shop/icons/cart.svg"
    with_host = IconBase(None, "http://127.0.0.1:8000/mcp").describe(declared)
    assert with_host[0] == {"src": "http://127.0.0.1:8000/static/shop/icons/cart.svg", "mimeType": "image/svg+xml"}
    # A Host the project does not allow is no origin either: the relative icon is left out, not an error.
    with override_settings(ALLOWED_HOSTS=["other.example"]):
        assert [i["src"] for i in IconBase(lambda: hosted).describe(declared)] == ["https://cdn.example/x.png"]
    # A changed STATIC_URL (override_settings in a project's tests) is not hidden by the cached URLs.
    with override_settings(STATIC_URL="/assets/"):
        moved = IconBase(None, "http://127.0.0.1:8000/mcp").describe(declared)
        assert moved[0]["src"] == "http://127.0.0.1:8000/assets/shop/icons/cart.svg"
    assert IconBase(None, "http://127.0.0.1:8000/mcp").describe(declared) == with_host


def test_icons_and_annotations_are_checked_at_registration() -> None:
    registry = Registry()
    with pytest.raises(ImproperlyConfigured, match="theme must be 'light' or 'dark'"):
        registry.tool(icons=[{"src": "a.svg", "theme": "blue"}])
    with pytest.raises(ImproperlyConfigured, match="takes a list of icons"):
        registry.prompt(icons="a.svg")  # type: ignore[arg-type]
    with pytest.raises(ImproperlyConfigured, match="src and optionally"):
        registry.resource("x://a", icons=[{"href": "a.svg"}])
    with pytest.raises(TypeError, match="read_only tool cannot be destructive"):
        registry.tool(read_only=True, destructive=True)
    with pytest.raises(TypeError, match="True or False"):
        registry.tool(open_world="no")  # type: ignore[arg-type]
    with pytest.raises(InvalidSetting, match="theme"):
        icon_list([{"src": "a.svg", "theme": "sepia"}])
    with pytest.raises(ImproperlyConfigured, match="an icon's src must be a non-empty str"):
        registry.tool(icons=[{"src": ""}])
    with pytest.raises(ImproperlyConfigured, match="sizes must be strings"):
        registry.tool(icons=[Icon("a.svg", sizes=("48x48", 48))])  # type: ignore[arg-type]
    with pytest.raises(ImproperlyConfigured, match="an icon is an Icon, a static path or a dict, not 7"):
        registry.tool(icons=[7])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="takes the tool's name as a string, not 7"):
        registry.tool(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="task= must be None, 'optional' or 'required', not 'always'"):
        registry.tool(task="always")(lambda: "")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="retries= must be a whole number 0 or more, not True"):
        registry.tool(retries=True)(lambda: "")

    @registry.tool(read_only=True, open_world=False, title="Look", annotations={"custom": 1})
    def look() -> str:
        return ""

    # Built once, here: a listing only reads it.
    assert registry.tools["look"].annotations == {
        "custom": 1,
        "readOnlyHint": True,
        "openWorldHint": False,
        "title": "Look",
    }

    @registry.tool()
    def plain() -> str:
        return ""

    assert registry.tools["plain"].annotations is None
    assert "annotations" not in registry.tools["plain"].descriptor()


def test_docs_index_shop_example_is_the_demo_code() -> None:
    """docs/index.md quotes the demo shop's registrations (icons, annotations, completers): verbatim."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    docs = (root / "docs" / "index.md").read_text()
    quoted = docs.split("<!-- shop-example -->", 1)[1].split("<!-- /shop-example -->", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", quoted, re.S)
    code = (root / "project" / "shop" / "mcp.py").read_text()
    assert len(blocks) == 3
    for block in blocks:
        assert block in code, block
