"""The admin pages at 1280 px and 800 px in a real browser, measured in the DOM (the audit
list, a view tool's page, the MCP tasks list).

At 1280 px every column of the audit list fits beside the filters (no sideways
scrolling); at 800 px the columns an operator reads first are on screen and the
rest wait on the row's own page. A view tool's page keeps its source panel inside
the page (long lines scroll inside the panel). The list and a row's page print a
time the same way, seconds included. Screenshots go to a temp dir (printed), for a
person to look at.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.utils import timezone

from mcp_django import audit
from mcp_django.models import AuditEvent, Kind
from tests.test_audit_browser import AdminServer, _browser_or_skip

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(tempfile.gettempdir()) / "mcp-django-admin-screenshots"
IMPORTANT = ("when", "what", "target_method", "who")
EVERY = (*IMPORTANT, "via", "round", "duration")


@pytest.fixture
def admin_server(transactional_db: None) -> Any:
    with AdminServer() as server:
        yield server


def _history() -> AuditEvent:
    audit.flush()
    AuditEvent.objects.all().delete()
    user = get_user_model().objects.create_superuser("admin", "admin@example.com", "admin-password")
    # 14:03:33 local time: "2:03 p.m." is what Django's default DATETIME_FORMAT would print.
    at = timezone.make_aware(datetime(2026, 3, 14, 14, 3, 33), ZoneInfo(timezone.get_current_timezone_name()))
    rows = [
        dict(kind=Kind.ROUND, method="tools/call", target="test_input_required_result_elicitation", round=1),
        dict(kind=Kind.COMPLETED, method="resources/read", target="shop://products/MUG-01", outcome="completed"),
        dict(kind=Kind.STATE_REFUSED, method="tools/call", target="plan_trip", reason="bad_signature"),
        dict(kind=Kind.MISSING_CAPABILITY, method="prompts/get", target="order_help", reason="elicitation"),
        dict(kind=Kind.COMPLETED, method="completion/complete", target="order_help", outcome="completed"),
    ]
    made = []
    for n, row in enumerate(rows):
        made.append(
            AuditEvent.objects.create(
                created=at,
                version="2025-11-25" if n % 2 else "2026-07-28",
                era="legacy" if n % 2 else "modern",
                transport="websocket" if n == 3 else "http",
                user=user if n % 2 == 0 else None,
                principal=f"auth.user:{user.pk}" if n % 2 == 0 else "anonymous",
                request_id=str(n),
                duration_ms=12.5 * (n + 1),
                **row,
            )
        )
    return made[0]


def _box(page: Any, selector: str) -> dict[str, float] | None:
    locator = page.locator(selector).first
    if locator.count() == 0 or not locator.is_visible():
        return None
    box: dict[str, float] | None = locator.bounding_box()
    return box


def _on_screen(page: Any, selector: str, width: int) -> bool:
    """Rendered, and inside the viewport and the results box without scrolling sideways."""
    box = _box(page, selector)
    outer = _box(page, "#changelist .results")
    if box is None or outer is None or box["width"] <= 0:
        return False
    right = min(width, outer["x"] + outer["width"])
    return box["x"] >= 0 and box["x"] + box["width"] <= right + 0.5


def _no_sideways_scroll(page: Any, selector: str) -> tuple[int, int]:
    return page.evaluate(
        "s => { const e = document.querySelector(s); return [e.scrollWidth, e.clientWidth]; }",
        selector,
    )


def _login(page: Any, url: str) -> None:
    page.goto(url + "/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "admin-password")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")


@contextlib.contextmanager
def _admin_page(server: AdminServer, width: int, path: str, ready: str) -> Iterator[Any]:
    """Chromium at ``width`` px, logged in, at the admin's ``path`` once ``ready`` is there."""
    sync_playwright = _browser_or_skip()
    SHOTS.mkdir(exist_ok=True)
    print(f"screenshots: {SHOTS}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            _login(page, server.url)
            page.goto(server.url + path)
            page.wait_for_selector(ready)
            yield page
        finally:
            browser.close()


@pytest.mark.parametrize("width", [1280, 800])
def test_the_audit_list_and_a_rows_page_fit(admin_server: AdminServer, width: int) -> None:
    first = _history()
    with _admin_page(admin_server, width, "/admin/mcp_django/auditevent/", "#result_list") as page:
        page.screenshot(path=str(SHOTS / f"audit-list-{width}.png"))
        visible = {c for c in EVERY if _on_screen(page, f"#result_list th.column-{c}", width)}
        scroll, client = _no_sideways_scroll(page, "#changelist .results")
        whole_page = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert whole_page[0] <= whole_page[1], whole_page
        if width >= 1280:
            assert visible == set(EVERY)
            assert scroll <= client, (scroll, client)  # the results table does not overflow its box
        else:
            # The first four; transport, round and ms wait on the row's own page.
            assert visible == set(IMPORTANT), visible
            assert scroll <= client, (scroll, client)
        # Rows stay short enough to read: a target breaks, but not into a column of letters.
        target = _box(page, "#result_list td.field-target_method")
        assert target is not None and target["width"] >= 100, target
        listed = page.locator("#result_list th.field-when").last.inner_text()
        assert " ".join(listed.split()) == "2026-03-14 14:03:33"

        # A row's own page prints its time as the list does, seconds included.
        page.goto(admin_server.url + f"/admin/mcp_django/auditevent/{first.pk}/change/")
        page.wait_for_selector("#content-main")
        page.screenshot(path=str(SHOTS / f"audit-row-{width}.png"), full_page=True)
        shown = page.locator(".field-created_exact .readonly").inner_text()
        assert shown == "2026-03-14 14:03:33", shown
        assert "p.m." not in page.locator("#content-main").inner_text()


@pytest.mark.parametrize("width", [1280, 800])
def test_a_view_tools_page_keeps_its_source_inside(admin_server: AdminServer, width: int) -> None:
    _history()
    with _admin_page(
        admin_server, width, "/admin/mcp_django/registeredhandler/tool/orders_destroy/", "#mcp-handler-source"
    ) as page:
        page.screenshot(path=str(SHOTS / f"view-tool-{width}.png"), full_page=True)
        permissions = page.locator("#mcp-handler-permissions").inner_text()
        assert "rest_framework.permissions.IsAuthenticated" in permissions and "none" not in permissions
        assert page.locator("#mcp-handler-source").inner_text().startswith("class OrderViewSet(")
        whole_page = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert whole_page[0] <= whole_page[1], whole_page
        for panel in ("#mcp-handler-source", "#mcp-handler-schema"):
            box = _box(page, panel)
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (panel, box)
        # Long lines scroll inside the panel, which is as wide as its column, not wider.
        scroll, client = _no_sideways_scroll(page, "#mcp-handler-source")
        assert client > 200 and scroll >= client


TASK_COLUMNS = ("id_short", "tool_endpoint", "task_status", "who", "created_at", "updated_at")


def _tasks() -> list[Any]:
    from mcp_django.tasks.models import MCPTask, Status

    user = get_user_model().objects.create_superuser("admin", "admin@example.com", "admin-password")
    # 02:25:07 local time: "2:25 a.m." is what Django's default DATETIME_FORMAT would print.
    at = timezone.make_aware(datetime(2026, 3, 14, 2, 25, 7), ZoneInfo(timezone.get_current_timezone_name()))
    made = []
    for n, (tool, status, message) in enumerate(
        [
            ("sales_report", Status.INPUT_REQUIRED, "waiting for the client's input"),
            ("test_tool_with_task", Status.WORKING, "Reading the Q3 orders (2/5)"),
            (
                "export_every_order_of_the_shop_as_csv",
                Status.FAILED,
                "the worker running this task stopped before it finished",
            ),
            ("slow_compute", Status.COMPLETED, ""),
        ]
    ):
        made.append(
            MCPTask.objects.create(
                tool=tool,
                endpoint="default" if n % 2 else "staff",
                status=status,
                status_message=message,
                user=user,
                principal=f"auth.user:{user.pk}",
                principal_digest="x",
                created=at,
                updated=at,
                expires=at,
                ttl_ms=3_600_000,
                rounds=n,
                runs=n + 1,
            )
        )
    return made


@pytest.mark.parametrize("width", [1280, 800])
def test_the_tasks_list_fits_and_prints_24_hour_times(admin_server: AdminServer, width: int) -> None:
    first = _tasks()[0]
    with _admin_page(admin_server, width, "/admin/mcp_django/mcptask/", "#result_list") as page:
        page.screenshot(path=str(SHOTS / f"tasks-list-{width}.png"))
        whole_page = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert whole_page[0] <= whole_page[1], whole_page
        scroll, client = _no_sideways_scroll(page, "#changelist .results")
        assert scroll <= client, (scroll, client)
        visible = {c for c in TASK_COLUMNS if _on_screen(page, f"#result_list th.column-{c}", width)}
        if width >= 1280:
            assert visible == set(TASK_COLUMNS), visible
        else:
            assert visible == {"id_short", "tool_endpoint", "task_status", "created_at"}, visible
        listed = page.locator("#result_list td.field-created_at").last.inner_text()
        assert " ".join(listed.split()) == "2026-03-14 02:25:07"
        assert "a.m." not in page.locator("#result_list").inner_text()
        # A task's page prints its times the same way.
        # A task id is URL-safe base64, so it may hold "_3A" and the like: the admin unquotes those.
        page.goto(admin_server.url + f"/admin/mcp_django/mcptask/{quote(first.pk)}/change/")
        page.wait_for_selector("#content-main")
        page.screenshot(path=str(SHOTS / f"task-row-{width}.png"), full_page=True)
        main = page.locator("#content-main").inner_text()
        assert "2026-03-14 02:25:07" in main and "a.m." not in main
