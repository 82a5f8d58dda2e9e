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
    response = client.get(reverse(HANDLERS))
    assert response.status_code == 200
    return {f"{h['kind']}:{h['address']}": h for h in response.context["handlers"]}


def test_handlers_page(admin_client: Client, log: dict[str, AuditEvent]) -> None:
    from mcp_django.registry import mcp

    rows = handler_rows(admin_client)
    assert len(rows) == len(mcp.all_handlers())
    plan = rows["tool:plan_trip"]
    assert plan["source"] == "project.demo.mcp.plan_trip" and plan["is_async"]
    assert plan["description"].startswith("Plan a trip")
    assert '"traveller"' in plan["schema"]
    assert plan["asks"] == [("roots", "roots/list"), ("trip", "elicitation/create")]
    assert (plan["calls"], plan["rounds"], plan["refusals"]) == (1, 1, 2)
    echo = rows["tool:echo"]
    assert (echo["calls"], echo["failed"], echo["rounds"], echo["refusals"]) == (3, 1, 0, 0)
    assert rows["tool:clear_cache"]["refusals"] == 1
    assert rows["prompt:test_simple_prompt"]["calls"] == 1
    assert rows["template:test://template/{id}/data"]["calls"] == 1  # matched to its template
    assert rows["tool:test_elicitation"]["asks"] == [("e-1", "elicitation/create")]
    body = admin_client.get(reverse(HANDLERS)).content.decode()
    assert "project.demo.mcp.plan_trip" in body and "Registered MCP handlers" in body
    # The counts link to the audit log, filtered to that handler.
    assert reverse(CHANGELIST) + "?method=tools%2Fcall&amp;target=plan_trip&amp;kind=refusals" in body


def test_handlers_page_permissions(client: Client) -> None:
    user = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(reverse(HANDLERS)).status_code == 403
    assert client.get(reverse(CHANGELIST)).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    user = get_user_model().objects.get(pk=user.pk)  # drop the permission cache
    client.force_login(user)
    assert client.get(reverse(HANDLERS)).status_code == 200
    assert client.get(reverse(CHANGELIST)).status_code == 200
    assert client.get(reverse("admin:mcp_django_auditevent_add")).status_code == 403
