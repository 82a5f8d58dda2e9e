"""Several endpoints in one project (docs/endpoints.md).

The demo serves two: ``/mcp`` for customers and ``/staff/mcp`` (project/shop/staff.py) with
staff-only tools and its own authentication. Each keeps its handlers, its rules, its
protected-resource metadata, its audit rows, its sessions and its requestStates to itself.
Two more endpoints with a tool of the same name (below) show that a requestState is
refused across endpoints even where the tool exists at both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import mcp.types as types
import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from mcp_django import Context, Registry, SyncContext
from mcp_django.models import AuditEvent, Kind
from mcp_django.tokens.models import MCPToken
from project.shop.models import Order, Product
from tests.conftest import MODERN, Raw, mcp_settings, meta
from tests.test_modern_rounds import error, result

# Two endpoints with the same tools, for what the demo cannot show (one tool name at both).
EAST = Registry("test_east")
WEST = Registry("test_west")
ASKED = {"action": "accept", "content": {"confirm": True}}


def _add_tools(registry: Registry) -> None:
    @registry.tool(name="go_ahead")
    async def go_ahead(ctx: Context) -> str:
        """Asks first."""
        return "went ahead" if await ctx.confirm("Go ahead?") else "stayed"

    @registry.tool(name="tally", task="optional")
    def tally(ctx: SyncContext) -> str:
        """Runs as an MCP task when the client opts in."""
        return f"tallied at {registry.name}"


_add_tools(EAST)
_add_tools(WEST)


def tool_names(r: httpx.Response) -> set[str]:
    return {tool["name"] for tool in result(r)["tools"]}


@pytest.fixture
def client_at() -> Iterator[Any]:
    """``client_at("/staff/mcp")``: raw requests in process to an endpoint of ``app`` (the demo's by default)."""
    from mcp_django.testing import HttpxTransport

    clients: list[httpx.Client] = []

    def make(path: str, app: Any = None, headers: dict[str, str] | None = None) -> Raw:
        client = httpx.Client(transport=HttpxTransport(app), timeout=30, headers=headers or {})  # type: ignore[arg-type]
        clients.append(client)
        return Raw(f"http://testserver{path}", client)

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def east_west() -> Any:
    """An application serving EAST at /east/mcp and WEST at /west/mcp."""
    from channels.routing import URLRouter

    from mcp_django.routing import mcp_urlpatterns

    return URLRouter([*mcp_urlpatterns("east/mcp", registry=EAST), *mcp_urlpatterns("west/mcp", registry=WEST)])


def staff_token(username: str = "stella", *, is_staff: bool = True) -> str:
    user = get_user_model().objects.create_user(username, is_staff=is_staff)
    return MCPToken.objects.issue(user, "staff client")[1]


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


# -- handlers: each endpoint serves its own ---------------------------------------------


@pytest.mark.django_db
def test_each_endpoint_lists_and_calls_only_its_own_handlers(client_at: Any) -> None:
    public, staff = client_at("/mcp"), client_at("/staff/mcp", headers=bearer(staff_token()))
    customers = tool_names(public.post("tools/list"))
    assert "echo" in customers and not customers & {"orders_by_status", "mark_shipped"}
    assert tool_names(staff.post("tools/list")) == {"orders_by_status", "mark_shipped"}
    # A handler of one endpoint is unknown at the other, as any unknown tool is.
    assert error(public.call("orders_by_status")) == {"code": -32602, "message": "Unknown tool: orders_by_status"}
    assert error(staff.call("echo", {"text": "hi"})) == {"code": -32602, "message": "Unknown tool: echo"}
    Order.objects.create(
        owner=get_user_model().objects.create_user("carl"),
        product=Product.objects.create(name="Mug", sku="MUG-01", price="4.50", stock=3),
        quantity=1,
        status=Order.Status.PAID,
    )
    counts = result(staff.call("orders_by_status"))["structuredContent"]
    assert counts == {"pending": 0, "paid": 1, "shipped": 0, "cancelled": 0}


@pytest.mark.django_db
def test_the_staff_endpoint_has_its_own_authentication(client_at: Any) -> None:
    user = get_user_model().objects.create_user("dora")
    drf = {"authorization": f"Token {Token.objects.create(user=user).key}"}
    # /mcp: anonymous callers (the test settings allow them) and DRF tokens.
    assert client_at("/mcp").post("tools/list").status_code == 200
    assert client_at("/mcp", headers=drf).post("tools/list").status_code == 200
    # /staff/mcp: neither (MCP_DJANGO["ENDPOINTS"]["staff"]); not an OAuth protected resource,
    # so its 401 points at no metadata.
    for headers in ({}, drf):
        refused = client_at("/staff/mcp", headers=headers).post("tools/list")
        assert refused.status_code == 401, refused.text
        assert "resource_metadata" not in refused.headers.get("www-authenticate", "")
    # An MCP token (or the admin's session) gets in; the tools are for staff users only.
    assert (
        tool_names(client_at("/staff/mcp", headers=bearer(staff_token("cust", is_staff=False))).post("tools/list"))
        == set()
    )
    assert client_at("/staff/mcp", headers=bearer(staff_token())).post("tools/list").status_code == 200


@pytest.mark.django_db
def test_an_endpoints_anonymous_policy_is_its_own(client_at: Any, east_west: Any) -> None:
    with mcp_settings(ENDPOINTS={"test_west": {"ALLOW_ANONYMOUS": False}}):
        assert client_at("/east/mcp", east_west).post("tools/list").status_code == 200
        assert client_at("/west/mcp", east_west).post("tools/list").status_code == 401
    with mcp_settings(ALLOW_ANONYMOUS=False, ENDPOINTS={"test_west": {"ALLOW_ANONYMOUS": True}}):
        assert client_at("/east/mcp", east_west).post("tools/list").status_code == 401
        assert tool_names(client_at("/west/mcp", east_west).post("tools/list")) == {"go_ahead", "tally"}


def test_protected_resource_metadata_per_endpoint(client: Client) -> None:
    base = "/.well-known/oauth-protected-resource"
    public = client.get(f"{base}/mcp").json()
    assert public["resource"] == "http://testserver/mcp" and "mcp" in public["scopes_supported"]
    # The demo's staff endpoint is no OAuth protected resource: nothing to describe.
    assert client.get(f"{base}/staff/mcp").status_code == 404
    staff_oauth = {
        "AUTHORIZATION_SERVERS": ["https://login.example/staff"],
        "REQUIRED_SCOPES": ["staff"],
        "DPOP": "required",  # its own, where the demo's /mcp only allows DPoP
    }
    with mcp_settings(ENDPOINTS={"staff": staff_oauth}):
        staff = client.get(f"{base}/staff/mcp").json()
        assert staff == {
            "resource": "http://testserver/staff/mcp",
            "authorization_servers": ["https://login.example/staff"],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["staff"],
            "dpop_signing_alg_values_supported": ["ES256", "ES384", "EdDSA", "PS256", "RS256"],
            "dpop_bound_access_tokens_required": True,
        }
        assert public["dpop_bound_access_tokens_required"] is False
        assert client.get(f"{base}/mcp").json() == public  # the other endpoint's is unchanged
    with mcp_settings(ENDPOINTS={"staff": {**staff_oauth, "RESOURCE_URL": "https://staff.example/mcp"}}):
        assert client.get(f"{base}/staff/mcp").json()["resource"] == "https://staff.example/mcp"
        assert client.get(f"{base}/mcp").json()["resource"] == "http://testserver/mcp"


# -- what one endpoint issued, the other refuses -----------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("resource_urls", [False, True], ids=["derived", "configured"])
def test_a_request_state_from_one_endpoint_is_refused_by_the_other(
    client_at: Any, east_west: Any, resource_urls: bool
) -> None:
    endpoints = (
        {
            "test_east": {"RESOURCE_URL": "https://a.example/east"},
            "test_west": {"RESOURCE_URL": "https://a.example/west"},
        }
        if resource_urls
        else {}
    )
    east, west = client_at("/east/mcp", east_west), client_at("/west/mcp", east_west)
    with mcp_settings(ENDPOINTS=endpoints):
        first = result(east.call("go_ahead"))
        assert first["resultType"] == "input_required"
        answers = {key: ASKED for key in first["inputRequests"]}
        elsewhere = west.call("go_ahead", inputResponses=answers, requestState=first["requestState"])
        assert elsewhere.status_code == 400
        assert error(elsewhere) == {"code": -32602, "message": "the requestState is not valid"}
        here = east.call("go_ahead", inputResponses=answers, requestState=first["requestState"])
        assert result(here)["content"][0]["text"] == "went ahead"
    refused = AuditEvent.objects.get(kind=Kind.STATE_REFUSED)
    assert (refused.endpoint, refused.target, refused.reason) == ("test_west", "go_ahead", "wrong_audience")
    assert set(AuditEvent.objects.filter(kind=Kind.ROUND).values_list("endpoint", flat=True)) == {"test_east"}


def _legacy(raw: Raw, method: str, sid: str | None = None, **params: Any) -> httpx.Response:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if sid is not None:
        headers |= {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return raw.client.post(raw.url, json=body, headers=headers)


@pytest.mark.django_db
def test_a_legacy_session_from_one_endpoint_is_not_found_at_the_other(client_at: Any) -> None:
    token = bearer(staff_token())  # accepted at both endpoints: only the endpoint differs
    public, staff = client_at("/mcp", headers=token), client_at("/staff/mcp", headers=token)
    info = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    for home, away in ((public, staff), (staff, public)):
        opened = _legacy(home, "initialize", **info)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        pinged = _legacy(home, "ping", sid)
        assert pinged.status_code == 200 and pinged.json()["result"] == {}, pinged.text
        refused = _legacy(away, "ping", sid)
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["message"] == "Session not found"


@pytest.mark.django_db
def test_a_task_is_its_endpoints(east_west: Any) -> None:
    from mcp_django.tasks.models import MCPTask
    from mcp_django.testing import JSONRPCError, MCPClient

    east = MCPClient(app=east_west, path="/east/mcp", tasks=True)
    west = MCPClient(app=east_west, path="/west/mcp", tasks=True)
    done = east.call_tool("tally")
    # Run by the runner from its own endpoint's tool, though the other has one of that name.
    assert (done.task_status, done.text) == ("completed", "tallied at test_east")
    assert MCPTask.objects.get(pk=done.task_id).endpoint == "test_east"
    assert east.get_task(done.task_id)["status"] == "completed"
    with pytest.raises(JSONRPCError) as unknown:
        west.get_task(done.task_id)
    assert unknown.value.code == -32602  # as for an id nobody issued
    with pytest.raises(JSONRPCError):
        west.cancel_task(done.task_id)
    assert set(AuditEvent.objects.filter(kind=Kind.TASK_COMPLETED).values_list("endpoint", flat=True)) == {"test_east"}


# -- the audit log and the admin -------------------------------------------------------


@pytest.mark.django_db
def test_audit_rows_name_their_endpoint(client_at: Any) -> None:
    client_at("/mcp").call("echo", {"text": "hi"})
    client_at("/staff/mcp", headers=bearer(staff_token())).call("orders_by_status")
    rows = set(AuditEvent.objects.filter(kind=Kind.COMPLETED).values_list("endpoint", "target"))
    assert rows == {("default", "echo"), ("staff", "orders_by_status")}


def test_the_admin_shows_each_endpoints_handlers(admin_client: Client) -> None:
    handlers = reverse("admin:mcp_django_registeredhandler_changelist")
    every = admin_client.get(handlers).content.decode()
    assert 'data-handler="tool:orders_by_status" data-endpoint="staff"' in every
    assert 'data-handler="tool:echo" data-endpoint="default"' in every
    assert 'id="mcp-endpoints"' in every  # the endpoint filter
    staff_only = admin_client.get(handlers, {"endpoint": "staff"}).content.decode()
    assert 'data-endpoint="staff"' in staff_only and 'data-endpoint="default"' not in staff_only
    detail = reverse("admin:mcp_django_registeredhandler_handler", args=["tool", "orders_by_status"])
    page = admin_client.get(detail, {"endpoint": "staff"})
    assert page.status_code == 200 and '<dd id="mcp-handler-endpoint"><code>staff</code></dd>' in page.content.decode()
    assert admin_client.get(detail).status_code == 404  # not a tool of the default endpoint
    # Its counts are its endpoint's: a row for a tool of the same name elsewhere is not counted.
    AuditEvent.objects.create(kind=Kind.COMPLETED, method="tools/call", target="orders_by_status", endpoint="staff")
    AuditEvent.objects.create(kind=Kind.COMPLETED, method="tools/call", target="orders_by_status", endpoint="other")
    assert "endpoint=staff&amp;method=tools%2Fcall&amp;target=orders_by_status&amp;kind=calls" in (
        admin_client.get(detail, {"endpoint": "staff"}).content.decode()
    )
    audit = reverse("admin:mcp_django_auditevent_changelist")
    listed = admin_client.get(audit, {"endpoint": "staff"})
    assert list(listed.context["cl"].queryset.values_list("endpoint", flat=True)) == ["staff"]
    assert "@staff" in listed.content.decode()  # the row says which endpoint served it


# -- settings and checks -----------------------------------------------------------------


def _ids(errors: list[Any]) -> list[str]:
    return [e.id for e in errors]


@pytest.mark.parametrize(
    ("endpoints", "check_id", "said"),
    [
        ([], "mcp_django.E013", "must be a dict of endpoint name"),
        ({"staff": {"ALLOW_ANONYMUS": True}}, "mcp_django.E013", "did you mean 'ALLOW_ANONYMOUS'?"),
        ({"staff": {"SESSION_LIFETIME": 5}}, "mcp_django.E013", "an endpoint cannot set: SESSION_LIFETIME"),
        (
            {"staff": {"AUTHENTICATION_CLASSES": ["no.such.Class"]}},
            "mcp_django.E007",
            "['staff']['AUTHENTICATION_CLASSES']",
        ),
        ({"staff": {"ALLOW_ANONYMOUS": "yes"}}, "mcp_django.E010", "must be True or False"),
        ({"staff desk": {}}, "mcp_django.E013", "may use only ASCII letters"),
        ({"": {}}, "mcp_django.E013", "an endpoint's name is a str of 1 to"),
        ({"staff": ["ALLOW_ANONYMOUS"]}, "mcp_django.E013", "['staff'] must be a dict of settings"),
    ],
)
def test_endpoint_settings_are_checked(endpoints: Any, check_id: str, said: str) -> None:
    from mcp_django.checks import check_settings

    with mcp_settings(ENDPOINTS=endpoints):
        errors = [e for e in check_settings() if e.id == check_id]
        assert len(errors) == 1 and said in errors[0].msg and "ENDPOINTS" in errors[0].msg, errors


def test_endpoint_checks() -> None:
    from mcp_django.checks import check_anonymous, check_endpoints

    with mcp_settings(ENDPOINTS={"stafff": {"ALLOW_ANONYMOUS": False}}):
        (warning,) = check_endpoints()
        assert warning.id == "mcp_django.W013" and "'stafff'" in warning.msg
    with mcp_settings(RESOURCE_URL="https://shop.example/mcp", ENDPOINTS={}):
        errors = check_endpoints()
        assert _ids(errors) == ["mcp_django.E014"] and "'default', 'staff'" in errors[0].msg
    staff_url = {"staff": {"RESOURCE_URL": "https://shop.example/staff"}}
    with mcp_settings(RESOURCE_URL="https://shop.example/mcp", ENDPOINTS=staff_url):
        # (This module's own two endpoints still share the project's.)
        assert not [e for e in check_endpoints() if "'staff'" in e.msg]
    # W003 once for the default endpoint (the test settings let anonymous callers in), and
    # for another endpoint only when it lets them in itself.
    assert ["staff" in w.msg for w in check_anonymous()] == [False]
    with mcp_settings(ENDPOINTS={"staff": {"ALLOW_ANONYMOUS": True}}):
        assert ["'staff'" in w.msg for w in check_anonymous()] == [False, True]


def test_an_endpoint_name_is_checked_and_taken_once() -> None:
    with pytest.raises(ImproperlyConfigured, match="each endpoint's name is its own"):
        Registry("staff")
    with pytest.raises(ImproperlyConfigured, match="may use only ASCII letters"):
        Registry("staff/mcp")


# -- a real client at each endpoint ------------------------------------------------------


async def _confirm(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_two_endpoints_an_sdk_client_each(live_url: str) -> None:
    """The official SDK's client on /mcp (anonymous) and another on /staff/mcp (an MCP token),
    open at once in one process: each sees its endpoint's tools; the staff's asks go round."""
    import httpx2
    from asgiref.sync import sync_to_async
    from mcp import Client, MCPError
    from mcp.client.streamable_http import streamable_http_client

    def setup() -> tuple[str, int]:
        owner = get_user_model().objects.create_user("erin")
        mug = Product.objects.create(name="Mug", sku="MUG-02", price="4.50", stock=3)
        order = Order.objects.create(owner=owner, product=mug, quantity=2, status=Order.Status.PAID)
        return staff_token("sam"), order.pk

    token, order_id = await sync_to_async(setup)()
    staff_url = live_url.removesuffix("/mcp") + "/staff/mcp"
    async with (
        httpx2.AsyncClient(timeout=30) as plain,
        httpx2.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as signed,
        Client(streamable_http_client(live_url, http_client=plain), mode=MODERN, cache=None) as public,
        Client(
            streamable_http_client(staff_url, http_client=signed),
            mode=MODERN,
            cache=None,
            elicitation_callback=_confirm,
        ) as staff,
    ):
        assert {t.name for t in (await staff.list_tools()).tools} == {"orders_by_status", "mark_shipped"}
        assert "orders_by_status" not in {t.name for t in (await public.list_tools()).tools}
        shipped = await staff.call_tool("mark_shipped", {"order_id": order_id})
        assert shipped.content[0].text == f"Order #{order_id} is shipped."
        with pytest.raises(MCPError) as unknown:
            await public.call_tool("mark_shipped", {"order_id": order_id})
        assert unknown.value.code == -32602
        assert (await public.call_tool("echo", {"text": "still here"})).content[0].text == "still here"
    assert await Order.objects.filter(pk=order_id, status=Order.Status.SHIPPED).aexists()


def test_the_docs_example_is_the_one_tested() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    docs = (root / "docs" / "endpoints.md").read_text()
    example = docs.split("## Testing it", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert example in (root / "tests" / "test_endpoints_example.py").read_text()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_websocket_at_each_endpoint(live_url: str) -> None:
    """The same route list serves websockets: /staff/mcp's upgrade takes its own authentication."""
    from asgiref.sync import sync_to_async
    from websockets.exceptions import InvalidStatus

    from tests.legacy_fixtures import ws_client

    token = await sync_to_async(staff_token)("wendy")
    staff_url = live_url.removesuffix("/mcp") + "/staff/mcp"
    with pytest.raises(InvalidStatus) as refused:
        async with ws_client(staff_url):  # anonymous: not at this endpoint
            pass
    assert refused.value.response.status_code == 401
    async with ws_client(staff_url, additional_headers={"Authorization": f"Bearer {token}"}) as staff:
        await staff.initialize({})
        listed = await staff.request("tools/list", {})
        assert {tool["name"] for tool in listed["result"]["tools"]} == {"orders_by_status", "mark_shipped"}
        called = await staff.request("tools/call", {"name": "orders_by_status", "arguments": {}})
        assert called["result"]["structuredContent"]["shipped"] == 0
    async with ws_client(live_url) as public:  # anonymous callers are served at /mcp (test settings)
        await public.initialize({})
        listed = await public.request("tools/list", {})
        assert "orders_by_status" not in {tool["name"] for tool in listed["result"]["tools"]}
    from mcp_django import audit

    def completed() -> set[tuple[str, str, str]]:
        audit.flush()
        return set(AuditEvent.objects.filter(kind=Kind.COMPLETED).values_list("transport", "endpoint", "target"))

    assert await sync_to_async(completed)() == {("websocket", "staff", "orders_by_status")}


@pytest.mark.django_db(transaction=True)  # the view authenticates in a worker thread of its own
def test_the_wsgi_route_serves_the_staff_endpoint(client: Client) -> None:
    """project/urls.py routes /staff/mcp to the view with the staff registry (Django's stack)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    headers = {"accept": "application/json", "mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    assert client.post("/staff/mcp", body, "application/json", headers=headers).status_code == 401
    client.force_login(get_user_model().objects.create_user("vic", is_staff=True))
    listed = client.post("/staff/mcp", body, "application/json", headers=headers).json()["result"]
    assert {tool["name"] for tool in listed["tools"]} == {"orders_by_status", "mark_shipped"}
    public = client.post("/mcp", body, "application/json", headers=headers).json()["result"]
    assert "orders_by_status" not in {tool["name"] for tool in public["tools"]}


def test_the_commands_take_an_endpoint() -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command("mcp_handlers", "--endpoint", "staff", "--json", stdout=out)
    assert {row["name"] for row in json.loads(out.getvalue())} == {"orders_by_status", "mark_shipped"}
    for command, *options in (("mcp_handlers",), ("mcp_stdio", "--anonymous")):
        with pytest.raises(CommandError, match="No endpoint 'nope'; the endpoints are default, staff"):
            call_command(command, "--endpoint", "nope", *options)
    with pytest.raises(CommandError, match="for this endpoint"):
        call_command("mcp_stdio", "--endpoint", "staff", "--anonymous")
