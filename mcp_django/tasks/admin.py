"""MCP tasks in Django's admin: read-only rows (a task's state is the protocol's), with
filters and a cancel action. Registered from ``mcp_django.admin``."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import DatabaseError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from . import store, workers
from .models import TERMINAL, MCPTask, Status


@admin.register(MCPTask)
class MCPTaskAdmin(admin.ModelAdmin):
    list_display = (
        "id_short",
        "tool",
        "endpoint",
        "status",
        "principal",
        "created",
        "updated",
        "rounds",
        "runs",
        "expires",
    )
    list_filter = ("status", "tool", "endpoint", "cancel_requested", "created")
    search_fields = ("=id", "tool", "principal")
    date_hierarchy = "created"
    ordering = ("-created",)
    list_select_related = ("user",)
    actions = ["cancel_tasks"]
    # The answers and arguments are the client's data: shown, never edited here.
    readonly_fields = [field.name for field in MCPTask._meta.fields]

    @admin.display(description=_("task id"), ordering="id")
    def id_short(self, obj: MCPTask) -> str:
        return f"{obj.id[:10]}…"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Viewing only; the cancel action asks for the change permission itself.
        return False

    @admin.action(description=_("Cancel the selected tasks"), permissions=["cancel"])
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[MCPTask]) -> None:
        cancelled = 0
        for row in queryset.exclude(status__in=TERMINAL):
            if row.status == Status.WORKING and row.lease_until is not None:
                # Running: the handler is asked to stop, as tasks/cancel does.
                MCPTask.objects.filter(pk=row.pk).update(cancel_requested=True)
                cancelled += 1
            elif store.finish(row.pk, Status.CANCELLED, message="cancelled by an operator"):
                cancelled += 1
        self.message_user(
            request,
            ngettext("%(n)d task cancelled (or asked to stop).", "%(n)d tasks cancelled (or asked to stop).", cancelled)
            % {"n": cancelled},
            messages.SUCCESS,
        )

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    # The workers seen alive and the queue, above the list (its own template's header).
    change_list_template = "admin/mcp_django/mcptask/change_list.html"

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        context = dict(extra_context or {})
        try:
            context["task_workers"] = {"alive": workers.alive(), "queue": workers.queue()}
        except DatabaseError:  # the list itself will say the database is away
            context["task_workers"] = None
        return super().changelist_view(request, extra_context=context)
