"""MCP tasks in Django's admin: read-only rows (a task's state is the protocol's), with
filters and a cancel action. Registered by the extension's ``register()`` (``methods.py``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import DatabaseError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..admin import ViewOnlyAdminMixin, show_every_field, stacked, time_column
from . import store, workers
from .models import TERMINAL, MCPTask


@admin.register(MCPTask)
class MCPTaskAdmin(ViewOnlyAdminMixin, admin.ModelAdmin):
    # Six columns, so that at 1280 px they fit beside the app list and the filters: the
    # endpoint sits under the tool and the status message under the status (input rounds
    # and runs are on the task's page).
    list_display = ("id_short", "tool_endpoint", "task_status", "who", "created_at", "updated_at")
    list_filter = ("status", "tool", "endpoint", "cancel_requested", "created")
    search_fields = ("=id", "tool", "principal")
    date_hierarchy = "created"
    list_select_related = ("user",)
    actions = ["cancel_tasks"]

    class Media:
        css = {"all": ["mcp_django/admin.css"]}

    @admin.display(description=_("task id"), ordering="id")
    def id_short(self, obj: MCPTask) -> str:
        return f"{obj.id[:6]}…"

    @admin.display(description=_("tool / endpoint"), ordering="tool")
    def tool_endpoint(self, obj: MCPTask) -> str:
        if obj.endpoint and obj.endpoint != "default":
            return stacked(obj.tool, f"@{obj.endpoint}")
        return obj.tool

    @admin.display(description=_("status"), ordering="status")
    def task_status(self, obj: MCPTask) -> str:
        status = obj.get_status_display()
        return stacked(status, obj.status_message) if obj.status_message else status

    @admin.display(description=_("user"), ordering="principal")
    def who(self, obj: MCPTask) -> str:
        if obj.user is not None:
            return obj.user.get_username()
        return obj.principal if obj.user_id is None else f"{obj.principal} ({_('deleted')})"

    created_at = time_column("created", _("created"), two_lines=True)
    updated_at = time_column("updated", _("updated"), two_lines=True)

    @admin.action(description=_("Cancel the selected tasks"), permissions=["cancel"])
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[MCPTask]) -> None:
        unfinished = queryset.exclude(status__in=TERMINAL).values_list("pk", flat=True)
        cancelled = sum(store.cancel(pk, message="cancelled by an operator") for pk in unfinished)
        self.message_user(
            request,
            ngettext("%(n)d task cancelled (or asked to stop).", "%(n)d tasks cancelled (or asked to stop).", cancelled)
            % {"n": cancelled},
            messages.SUCCESS,
        )

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        # The model's change permission, as ModelAdmin reads it: the rows themselves are view-only.
        return admin.ModelAdmin.has_change_permission(self, request)

    # The workers seen alive and the queue, above the list (its own template's header).
    change_list_template = "admin/mcp_django/mcptask/change_list.html"

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        context = dict(extra_context or {})
        try:
            context["task_workers"] = {"alive": workers.alive(), "queue": workers.queue()}
        except DatabaseError:  # the list itself will say the database is away
            context["task_workers"] = None
        return super().changelist_view(request, extra_context=context)


# The answers and arguments are the client's data: shown, never edited here.
show_every_field(MCPTaskAdmin, MCPTask)
