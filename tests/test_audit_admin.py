"""The admin: a read-only audit log with its filters, and the registered-handlers page."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_django import audit
from mcp_django.handler_report import AskGroup
from mcp_django.models import AuditEvent, Kind

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:mcp_django_auditevent_changelist"
HANDLERS = "admin:mcp_django_registeredhandler_changelist"


@pytest.fixture(autouse=True)
def _empty_log(db: None) -> Iterator[None]:
    # Rows queued by earlier tests (other modules' requests) land before this one starts.
    audit.flush()
    AuditEvent.objects.all().delete()
    yield
    audit.flush()


def event(kind: str, target: str = "echo", **extra: Any) -> AuditEvent:
    values: dict[str, Any] = {
        "kind": kind,
        "method": "tools/call",
        "target": target,
        "version": "2026-07-28",
        "era": "modern",
        "transport": "http",
        "principal": "anonymous",
        "request_id": "1",
    }
    values.update(extra)
    return AuditEvent.objects.create(**values)


@pytest.fixture
def log() -> dict[str, AuditEvent]:
    return {
        "round": event(Kind.ROUND, "plan_trip", round=1, asks={"trip": "elicitation/create", "roots": "roots/list"}),
        "done": event(Kind.COMPLETED, "plan_trip"),
        "echo": event(Kind.COMPLETED, "echo", principal="auth.user:7"),
        "failed": event(Kind.FAILED, "echo", reason="tool error"),
        "expired": event(Kind.STATE_REFUSED, "plan_trip", reason="expired"),
        "tampered": event(Kind.STATE_REFUSED, "plan_trip", reason="bad_signature", version="2026-07-28"),
        "capability": event(Kind.MISSING_CAPABILITY, "clear_cache", reason="elicitation"),
        "prompt": event(Kind.COMPLETED, "test_simple_prompt", method="prompts/get"),
        "template": event(Kind.COMPLETED, "test://template/3/data", method="resources/read"),
        "legacy": event(
            Kind.ASK,
            "test_elicitation",
            version="2025-11-25",
            era="legacy",
            outcome="declined",
            asks={"e-1": "elicitation/create"},
        ),
        "old": event(Kind.COMPLETED, "echo", created=timezone.now() - timedelta(days=400)),
    }


def listed(client: Client, query: str = "") -> set[int]:
    response = client.get(reverse(CHANGELIST) + query)
    assert response.status_code == 200
    return {obj.pk for obj in response.context["cl"].result_list}


def test_changelist_renders(admin_client: Client, log: dict[str, AuditEvent]) -> None:
    response = admin_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    body = response.content.decode()
    assert "plan_trip" in body and "bad_signature" in body and "declined" in body
    assert "Registered handlers" in admin_client.get(reverse("admin:index")).content.decode()


def test_changelist_says_what_this_process_could_not_write(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rows lost or still waiting are not in the list: the page that reads the list says so.
    lost = {"waiting": 4, "dropped": 3, "rejected": 2, "unreachable": True}
    monkeypatch.setattr("mcp_django.admin.stats", lambda: lost)
    said = [str(m) for m in admin_client.get(reverse(CHANGELIST)).context["messages"]]
    assert len(said) == 2
    assert "lost 3 audit row(s) to a full queue" in said[0] and "the database refused 2" in said[0]
    assert said[1] == "The audit log's database cannot be reached: 4 row(s) wait to be written."


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?kind=refusals", {"expired", "tampered", "capability"}),
        ("?kind=calls", {"done", "echo", "failed", "prompt", "template", "old"}),
        ("?kind=round", {"round"}),
        ("?kind=ask", {"legacy"}),
        ("?reason=expired", {"expired"}),
        ("?version=2025-11-25", {"legacy"}),
        ("?method=prompts/get", {"prompt"}),
        ("?target=echo", {"echo", "failed", "old"}),
        ("?principal=auth.user:7", {"echo"}),
        ("?outcome=declined", {"legacy"}),
        ("?q=clear_cache", {"capability"}),
        ("?method=tools/call&target=plan_trip&kind=refusals", {"expired", "tampered"}),
    ],
)
def test_filters(admin_client: Client, log: dict[str, AuditEvent], query: str, expected: set[str]) -> None:
    assert listed(admin_client, query) == {log[name].pk for name in expected}


def test_date_hierarchy(admin_client: Client, log: dict[str, AuditEvent]) -> None:
    old = log["old"].created
    assert listed(admin_client, f"?created__year={old.year}&created__month={old.month}") == {log["old"].pk}


def test_read_only(admin_client: Client, log: dict[str, AuditEvent]) -> None:
    row = log["expired"]
    assert admin_client.get(reverse("admin:mcp_django_auditevent_add")).status_code == 403
    change = reverse("admin:mcp_django_auditevent_change", args=[row.pk])
    page = admin_client.get(change)
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()  # view only
    assert admin_client.post(change, {"kind": "round", "reason": ""}).status_code == 403
    assert (
        admin_client.post(reverse("admin:mcp_django_auditevent_delete", args=[row.pk]), {"post": "yes"}).status_code
        == 403
    )
    changelist = admin_client.get(reverse(CHANGELIST))
    assert "delete_selected" not in changelist.context["cl"].model_admin.get_actions(changelist.wsgi_request)
    row.refresh_from_db()
    assert row.kind == Kind.STATE_REFUSED


def handler_rows(client: Client) -> dict[str, dict[str, Any]]:
    # The default endpoint's (the demo has another, tests/test_endpoints.py two more).
    response = client.get(reverse(HANDLERS), {"endpoint": "default"})
    assert response.status_code == 200
    return {f"{h['primitive']}:{h['address']}": h for h in response.context["handlers"]}


def test_handlers_page(admin_client: Client, log: dict[str, AuditEvent]) -> None:
    from mcp_django.registry import mcp

    rows = handler_rows(admin_client)
    assert len(rows) == len(mcp.all_handlers())
    plan = rows["tool:plan_trip"]
    assert plan["source"] == "project.demo.mcp.plan_trip" and plan["is_async"]
    assert plan["description"].startswith("Plan a trip")
    assert plan["asks"] == [AskGroup("roots", "roots/list", True), AskGroup("trip", "elicitation/create", True)]
    assert (plan["calls"], plan["rounds"], plan["refusals"]) == (1, 1, 2)
    echo = rows["tool:echo"]
    assert (echo["calls"], echo["failed"], echo["rounds"], echo["refusals"]) == (3, 1, 0, 0)
    assert rows["tool:clear_cache"]["refusals"] == 1
    assert rows["prompt:test_simple_prompt"]["calls"] == 1
    assert rows["template:test://template/{id}/data"]["calls"] == 1  # matched to its template
    assert rows["tool:test_elicitation"]["asks"] == [AskGroup("e-1", "elicitation/create", True)]
    body = admin_client.get(reverse(HANDLERS)).content.decode()
    assert "project.demo.mcp.plan_trip" in body and "Registered MCP handlers" in body
    # The counts link to the audit log, filtered to that handler.
    assert (
        reverse(CHANGELIST) + "?endpoint=default&amp;method=tools%2Fcall&amp;target=plan_trip&amp;kind=refusals" in body
    )


def test_handlers_page_permissions(client: Client) -> None:
    user = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    # Another of the app's permissions shows the app, not the handlers' entry.
    user.user_permissions.add(Permission.objects.get(codename="view_mcptoken"))
    client.force_login(user)
    assert client.get(reverse(HANDLERS)).status_code == 403
    assert client.get(reverse(CHANGELIST)).status_code == 403
    index = client.get(reverse("admin:index")).content.decode()
    assert "MCP tokens" in index and "Registered handlers" not in index
    for codename in ("view_registeredhandler", "view_auditevent"):
        user.user_permissions.set([Permission.objects.get(codename=codename)])
        user = get_user_model().objects.get(pk=user.pk)  # drop the permission cache
        client.force_login(user)
        assert client.get(reverse(HANDLERS)).status_code == 200
        assert "Registered handlers" in client.get(reverse("admin:index")).content.decode()
    assert client.get(reverse(CHANGELIST)).status_code == 200
    assert client.get(reverse("admin:mcp_django_auditevent_add")).status_code == 403


def test_asks_with_derived_keys_are_grouped_by_type(admin_client: Client) -> None:
    # Keys derived from the question's wording (no key=...) would be one opaque row each.
    for key in ("confirm-0123456789ab", "confirm-abcdef012345", "confirm-abcdef012345-2"):
        event(Kind.ROUND, "clear_cache", round=1, asks={key: "elicitation/create"})
    event(
        Kind.ROUND,
        "clear_cache",
        round=1,
        asks={"sample-00000000000a": "sampling/createMessage", "region": "elicitation/create"},
    )
    asks = handler_rows(admin_client)["tool:clear_cache"]["asks"]
    assert asks == [
        AskGroup("region", "elicitation/create", True),
        AskGroup("confirm", "elicitation/create", False, 3),
        AskGroup("sample", "sampling/createMessage", False, 1),
    ]
    body = admin_client.get(reverse(HANDLERS)).content.decode()
    assert "confirm: elicitation/create <small>(3 questions)</small>" in body
    assert "confirm-0123456789ab" not in body


def test_changelist_shows_usernames_and_seconds_and_finds_by_username(admin_client: Client) -> None:
    alice = get_user_model().objects.create_user("alice")
    gone = get_user_model().objects.create_user("gone")
    mine = event(Kind.COMPLETED, "echo", user=alice, principal=f"auth.user:{alice.pk}")
    theirs = event(Kind.COMPLETED, "echo", user=None, principal=f"auth.user:{gone.pk}")
    anonymous = event(Kind.COMPLETED, "echo")
    response = admin_client.get(reverse(CHANGELIST))
    body = response.content.decode()
    assert '<td class="field-who">alice</td>' in body
    assert f'<td class="field-who">auth.user:{gone.pk} (deleted)</td>' in body
    assert '<td class="field-who">anonymous</td>' in body
    stamp = timezone.localtime(mine.created)
    assert f">{stamp:%Y-%m-%d}<br>{stamp:%H:%M:%S}</a>" in body  # the time, to the second, links to the row
    assert listed(admin_client, "?q=alice") == {mine.pk}
    assert listed(admin_client, "?q=anonymous") == {anonymous.pk}
    assert theirs.pk in listed(admin_client, f"?q=auth.user:{gone.pk}")


def test_target_and_principal_filters_list_no_values_until_one_is_set(
    admin_client: Client, log: dict[str, AuditEvent]
) -> None:
    body = admin_client.get(reverse(CHANGELIST)).content.decode()
    filters = body[body.index('id="changelist-filter"') :]
    # One link per distinct target or principal would grow with the log: none are listed.
    assert "?target=" not in filters and "?principal=" not in filters
    chosen = admin_client.get(reverse(CHANGELIST) + "?target=echo").content.decode()
    chosen = chosen[chosen.index('id="changelist-filter"') :]
    # Set by a link, it shows, selected, with "All" to clear it.
    assert (
        'data-filter-title="target"' in chosen
        and '<li class="selected">\n    <a href="?target=echo">echo</a>' in chosen
    )
    assert 'data-filter-title="principal"' not in chosen
    assert listed(admin_client, "?target=echo") == {log["echo"].pk, log["failed"].pk, log["old"].pk}
    assert listed(admin_client, "?method=resources/read&target__startswith=test://template/") == {log["template"].pk}


def test_handlers_page_search_and_type(admin_client: Client) -> None:
    def names(query: str) -> set[str]:
        response = admin_client.get(reverse(HANDLERS) + query)
        assert response.status_code == 200
        return {h["address"] for h in response.context["handlers"]}

    assert names("?q=plan_trip") == {"plan_trip"}
    # Descriptions, any case (other tests may register more handlers: only these must be found).
    found = names("?q=SEND THE TEXT")
    assert {"echo", "reverse"} <= found and "plan_trip" not in found
    assert names("?q=project.demo.mcp.whoami") == {"whoami"}  # sources
    prompts = names("?type=prompt")
    assert prompts and "test_simple_prompt" in prompts and "echo" not in prompts
    templates = admin_client.get(reverse(HANDLERS) + "?type=template").context["handlers"]
    assert "test://template/{id}/data" in {h["address"] for h in templates}
    assert {h["primitive"] for h in templates} == {"template"}
    assert names("?q=no-such-handler-anywhere") == set()
    assert "No handler matches." in admin_client.get(reverse(HANDLERS) + "?q=no-such-handler").content.decode()


def test_no_bogus_audit_page_under_registered_handlers(admin_client: Client, log: dict[str, AuditEvent]) -> None:
    # The proxy model's table is the audit log's: its change page showed an audit row.
    pk = log["echo"].pk
    page = admin_client.get(f"/admin/mcp_django/registeredhandler/{pk}/change/")
    assert page.status_code == 404 and b"View registered handler" not in page.content


def test_handler_detail_page(admin_client: Client, log: dict[str, AuditEvent]) -> None:
    url = reverse("admin:mcp_django_registeredhandler_handler", args=["tool", "plan_trip"])
    assert url in admin_client.get(reverse(HANDLERS)).content.decode()  # linked from the list
    response = admin_client.get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert "project.demo.mcp.plan_trip" in body and "async def plan_trip(" in body  # source and its code
    assert "&quot;traveller&quot;" in body  # the input schema
    assert response.context["totals"] == {"calls": 1, "rounds": 1, "refusals": 2}
    series = response.context["series"]
    assert len(series) == 14 and series[-1].day == timezone.localdate() and series[-1].refusals == 2
    assert body.count('<rect class="refusals"') == 1 and body.count('<rect class="rounds"') == 1
    assert {row.pk for row in response.context["recent"]} == {
        log[name].pk for name in ("round", "done", "expired", "tampered")
    }
    assert (
        reverse(CHANGELIST) + "?endpoint=default&amp;method=tools%2Fcall&amp;target=plan_trip&amp;kind=refusals" in body
    )
    assert (
        admin_client.get(reverse("admin:mcp_django_registeredhandler_handler", args=["tool", "nope"])).status_code
        == 404
    )


def test_handler_detail_page_of_a_template_and_a_guarded_tool(admin_client: Client, log: dict[str, AuditEvent]) -> None:
    from mcp_django.registry import mcp

    template = admin_client.get(
        reverse("admin:mcp_django_registeredhandler_handler", args=["template", "test://template/{id}/data"])
    )
    assert template.status_code == 200
    assert [row.pk for row in template.context["recent"]] == [log["template"].pk]
    assert template.context["totals"]["calls"] == 1
    guarded = next(h for h in mcp.tools.values() if h.permissions or h.permission_classes)
    page = admin_client.get(reverse("admin:mcp_django_registeredhandler_handler", args=["tool", guarded.name]))
    permissions = page.content.decode().split('id="mcp-handler-permissions">', 1)[1].split("</dd>", 1)[0]
    for perm in guarded.permissions:
        assert perm in permissions
    for cls in guarded.permission_classes:
        assert cls.__qualname__ in permissions


def test_handler_pages_need_the_view_permission(client: Client) -> None:
    user = get_user_model().objects.create_user("staff2", password="pw", is_staff=True)
    client.force_login(user)
    url = reverse("admin:mcp_django_registeredhandler_handler", args=["tool", "echo"])
    assert client.get(url).status_code == 403


def test_asks_without_a_key_are_grouped_by_type_whatever_the_type() -> None:
    from mcp_django.asks import questions
    from mcp_django.handler_report import ask_groups

    asks = [
        questions.confirm("Sure?"),
        questions.elicit("Name?", {"type": "object", "properties": {"n": {"type": "string"}}}),
        questions.elicit("Other name?", {"type": "object", "properties": {"m": {"type": "string"}}}),
        questions.elicit_url("Sign in", "https://example.com/consent"),
        questions.elicit_url("Pay", "https://example.com/pay"),
        questions.sample("Hi"),
        questions.list_roots(),
    ]
    assert sorted({ask.type for ask in asks}) == sorted(questions.ASK_TYPES)
    keys = {ask.default_key(): ask.method for ask in asks}
    keys[asks[0].default_key() + "-2"] = "elicitation/create"  # the same question asked twice in one attempt
    keys["trip"] = "elicitation/create"  # an explicit key= stays as given
    assert ask_groups(keys) == [
        AskGroup("trip", "elicitation/create", True),
        AskGroup("confirm", "elicitation/create", False, 2),
        AskGroup("elicit", "elicitation/create", False, 2),
        AskGroup("elicit-url", "elicitation/create", False, 2),
        AskGroup("roots", "roots/list", False, 1),
        AskGroup("sample", "sampling/createMessage", False, 1),
    ]


def _permissions_and_source(admin_client: Client, tool: str) -> tuple[str, str]:
    page = admin_client.get(reverse("admin:mcp_django_registeredhandler_handler", args=["tool", tool]))
    assert page.status_code == 200
    body = page.content.decode()
    permissions = body.split('id="mcp-handler-permissions">', 1)[1].split("</dd>", 1)[0]
    source = body.split('id="mcp-handler-source">', 1)[1].split("</pre>", 1)[0] if "mcp-handler-source" in body else ""
    return permissions, source


def test_a_view_tools_page_shows_the_views_permissions_and_source(admin_client: Client) -> None:
    # A DRF view naming IsAuthenticated: the view's class, not "none".
    permissions, source = _permissions_and_source(admin_client, "orders_summary")
    assert "rest_framework.permissions.IsAuthenticated" in permissions and "none:" not in permissions
    assert source.startswith("class OrderSummary(APIView):") and "def handler(" not in source
    # A viewset's action: every class it applies, and the OAuth scope the registration adds.
    permissions, source = _permissions_and_source(admin_client, "orders_destroy")
    assert "rest_framework.permissions.IsAuthenticated" in permissions
    assert "project.shop.views.OrderIsEditable" in permissions and "<code>shop</code>" in permissions
    assert source.startswith("class OrderViewSet(")
    # A plain Django view under @login_required: the decorator, and the function under it.
    permissions, source = _permissions_and_source(admin_client, "stock_report")
    assert "django.contrib.auth.decorators.login_required" in permissions
    assert "shop.view_product" in permissions  # the registration's own permissions= too
    assert "def stock_report(request: HttpRequest)" in source
    # The handlers list says it in short.
    listing = admin_client.get(reverse(HANDLERS), {"q": "orders_summary"}).content.decode()
    assert "needs IsAuthenticated" in listing
    listing = admin_client.get(reverse(HANDLERS), {"q": "stock_report"}).content.decode()
    assert "needs shop.view_product, login_required" in listing
    # A tool with no guard still says so.
    permissions, _source = _permissions_and_source(admin_client, "echo")
    assert "none: any caller the endpoint lets in" in permissions


def test_django_auth_decorators_and_mixins_are_named() -> None:
    from django.contrib.auth.decorators import login_required, permission_required, user_passes_test
    from django.contrib.auth.mixins import PermissionRequiredMixin
    from django.http import HttpRequest, HttpResponse
    from django.utils.decorators import method_decorator
    from django.views import View

    from mcp_django.handler_report import permission_labels
    from mcp_django.registry import Registry

    def is_staff(user: Any) -> bool:
        return bool(user.is_staff)

    @permission_required(["shop.add_order", "shop.view_order"])
    @user_passes_test(is_staff)
    def report(request: HttpRequest) -> HttpResponse:
        return HttpResponse("")

    class Stock(PermissionRequiredMixin, View):
        permission_required = "shop.view_product"

        def get(self, request: HttpRequest) -> HttpResponse:
            return HttpResponse("")

    @method_decorator(login_required, name="dispatch")
    class Secret(View):
        def get(self, request: HttpRequest) -> HttpResponse:
            return HttpResponse("")

    schema = {"type": "object", "properties": {}}
    registry = Registry()
    (report_tool,) = registry.register_view(report, name="report", input_schema=schema)
    (stock_tool,) = registry.register_view(Stock, name="stock", input_schema=schema)
    (secret_tool,) = registry.register_view(Secret, name="secret", input_schema=schema)
    assert permission_labels(report_tool) == [
        "django.contrib.auth.decorators.permission_required(shop.add_order, shop.view_order)",
        f"django.contrib.auth.decorators.user_passes_test({is_staff.__module__}.{is_staff.__qualname__})",
    ]
    assert permission_labels(stock_tool) == ["django.contrib.auth.mixins.PermissionRequiredMixin(shop.view_product)"]
    assert permission_labels(secret_tool) == ["django.contrib.auth.decorators.login_required"]


def test_a_viewsets_permissions_are_its_actions_own() -> None:
    """A viewset's get_permissions() is asked for each action, as the tool's own check asks it."""
    from rest_framework import permissions, viewsets

    from mcp_django.handler_report import permission_labels
    from mcp_django.registry import Registry
    from project.shop.models import Product
    from project.shop.serializers import ProductSerializer

    class Products(viewsets.ModelViewSet):
        queryset = Product.objects.all()
        serializer_class = ProductSerializer

        def get_permissions(self) -> list[Any]:
            if self.action == "destroy":
                return [permissions.IsAdminUser()]
            return [permissions.IsAuthenticated()]

    tools = {tool.name: tool for tool in Registry().register_view(Products, basename="products")}
    assert permission_labels(tools["products_destroy"]) == ["rest_framework.permissions.IsAdminUser"]
    assert permission_labels(tools["products_list"]) == ["rest_framework.permissions.IsAuthenticated"]


def test_a_rows_page_prints_its_time_as_the_list_does(admin_client: Client, settings: Any) -> None:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    settings.USE_TZ, settings.TIME_ZONE = True, "Europe/Paris"
    at = datetime(2026, 3, 14, 13, 3, 33, tzinfo=ZoneInfo("UTC"))  # 14:03:33 in Paris
    row = event(Kind.COMPLETED, created=at)
    listed = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert "2026-03-14<br>14:03:33" in listed
    page = admin_client.get(reverse("admin:mcp_django_auditevent_change", args=[row.pk])).content.decode()
    assert '<div class="readonly">2026-03-14 14:03:33</div>' in page
    assert "p.m." not in page


def test_a_handlers_task_runs_are_counted_as_its_calls(admin_client: Client) -> None:
    """A tools/call answered with a task writes task_created; the task's end (completed, failed,
    cancelled) is the run the handlers page counts, its open questions the asks it lists."""
    from mcp_django.testing import MCPClient
    from tests.conftest import mcp_settings

    with mcp_settings(AUDIT={"ENABLED": True, "ASYNC_WRITES": False}):
        MCPClient(tasks=True).call_tool("confirm_delete", {"filename": "a"}, answer=lambda r: True)
        client = MCPClient(tasks=True)
        client.cancel_task(client.start_tool("confirm_delete", {"filename": "b"})["taskId"])
        client.update_task(task_id := client.start_tool("confirm_delete", {"filename": "c"})["taskId"], {})
        client.run_task(task_id)  # waiting for input: not a finished run
        failing = client.start_tool("confirm_delete", {"filename": "d"})["taskId"]
        client.run_task(failing)
        client.update_task(failing, {"confirm_delete": "an answer of the wrong shape"})
        client.run_task(failing)  # failed: -32602
        event(Kind.COMPLETED, "confirm_delete")  # and one synchronous call
    row = handler_rows(admin_client)["tool:confirm_delete"]
    assert (row["calls"], row["failed"]) == (4, 1)
    assert row["asks"] == [AskGroup("confirm_delete", "elicitation/create", True)]
    # Its count's link lists exactly those rows.
    assert len(listed(admin_client, "?endpoint=default&method=tools/call&target=confirm_delete&kind=calls")) == 4
    url = reverse("admin:mcp_django_registeredhandler_handler", args=["tool", "confirm_delete"])
    assert admin_client.get(url).context["totals"]["calls"] == 4
