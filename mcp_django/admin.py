"""The audit log and the registered handlers in Django's admin.

Both are read-only: the audit log is evidence, so nobody edits or deletes it
from the admin (``manage.py mcp_audit_purge`` applies the retention policy),
and the handlers are code.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any
from urllib.parse import urlencode

import django
from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from .models import CALL_KINDS, REFUSAL_KINDS, AuditEvent, Kind, RegisteredHandler
from .registry import Handler, Prompt, Registry, Resource, ResourceTemplate, Tool

# What a kind's rows are grouped under in the filter besides the kinds themselves.
_GROUPS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "refusals": (_("refusals (state or capability)"), tuple(REFUSAL_KINDS)),
    "calls": (_("finished calls"), tuple(CALL_KINDS)),
}


class KindFilter(admin.SimpleListFilter):
    """The kinds, plus "refusals" and "finished calls" for the questions asked most."""

    title = _("kind")
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [*((key, label) for key, (label, _kinds) in _GROUPS.items()), *Kind.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        value = self.value()
        if not value:
            return queryset
        if value in _GROUPS:
            return queryset.filter(kind__in=_GROUPS[value][1])
        return queryset.filter(kind=value)


class ReadOnlyAdminMixin:
    """Nobody adds, changes or deletes from the admin, superusers included: the log is a record."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "created",
        "kind",
        "detail",
        "method",
        "target",
        "principal",
        "version",
        "transport",
        "round",
        "duration_ms",
    )
    list_filter = (
        KindFilter,
        "reason",
        "outcome",
        "version",
        "era",
        "transport",
        "method",
        "target",
        "principal",
    )
    date_hierarchy = "created"
    search_fields = ("target", "principal", "request_id", "client_address", "reason")
    readonly_fields = tuple(f.name for f in AuditEvent._meta.fields)
    list_select_related = ("user",)
    # Counting a large log on every page is the slow part of a changelist.
    show_full_result_count = False
    list_per_page = 100

    @admin.display(description=_("reason / outcome"), ordering="reason")
    def detail(self, obj: AuditEvent) -> str:
        return obj.reason or obj.outcome

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        from django.contrib import messages

        from .audit import stats

        # Rows this process could not write are not in the list: say so where the list is read.
        lost = stats()
        if lost["dropped"] or lost["rejected"]:
            messages.warning(
                request,
                _(
                    "This server process lost %(dropped)d audit row(s) to a full queue (AUDIT['QUEUE_SIZE']) "
                    "and the database refused %(rejected)d; see the mcp_django.audit log."
                )
                % lost,
            )
        if lost["unreachable"]:
            messages.warning(
                request,
                _("The audit log's database cannot be reached: %(waiting)d row(s) wait to be written.") % lost,
            )
        return super().changelist_view(request, extra_context)


def _view_allowed(request: HttpRequest) -> bool:
    user = request.user
    return bool(
        user.is_active
        and user.is_staff
        and (user.has_perm("mcp_django.view_auditevent") or user.has_perm("mcp_django.view_registeredhandler"))
    )


@admin.register(RegisteredHandler)
class RegisteredHandlerAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The "Registered handlers" page: every tool, prompt and resource, with its audit counts."""

    registry: Registry | None = None  # None: mcp_django.mcp

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _view_allowed(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _view_allowed(request)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        from django.core.exceptions import PermissionDenied

        if not self.has_view_permission(request):
            raise PermissionDenied
        registry = self.registry
        if registry is None:
            from .registry import mcp

            registry = mcp
        context = {
            **self.admin_site.each_context(request),
            "title": _("Registered MCP handlers"),
            "opts": self.model._meta,
            "handlers": handler_rows(registry),
            "audit_url": reverse(f"{self.admin_site.name}:mcp_django_auditevent_changelist"),
            # Django 6 styles breadcrumbs as a list, 5.2 as a div.
            "breadcrumbs_as_list": django.VERSION >= (6, 0),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/mcp_django/handlers.html", context)


_METHOD = {"tool": "tools/call", "prompt": "prompts/get", "resource": "resources/read", "template": "resources/read"}


def _address(handler: Handler) -> str:
    if isinstance(handler, Resource):
        return handler.uri
    if isinstance(handler, ResourceTemplate):
        return handler.uri_template
    return handler.name


def _schema(handler: Handler) -> Any:
    if isinstance(handler, Tool):
        return handler.input_schema
    if isinstance(handler, Prompt):
        return handler.arguments
    if isinstance(handler, ResourceTemplate):
        return {"uriTemplate": handler.uri_template, "mimeType": handler.mime_type}
    if isinstance(handler, Resource):
        return {"uri": handler.uri, "mimeType": handler.mime_type}
    return None


def handler_rows(registry: Registry) -> list[dict[str, Any]]:
    """One dict per handler: what it is, where it lives, what it asked and how often it ran.

    Two grouped queries over the audit log serve the whole page, whatever the
    number of handlers; rows for a resource template's URIs are matched to the
    template here, in Python.
    """
    handlers = registry.all_handlers()
    by_key: dict[tuple[str, str], Handler] = {}
    templates = [h for h in handlers if isinstance(h, ResourceTemplate)]
    for handler in handlers:
        if not isinstance(handler, ResourceTemplate):
            by_key[(_METHOD[handler.kind], _address(handler))] = handler

    def owner(method: str, target: str) -> Handler | None:
        found = by_key.get((method, target))
        if found is None and method == "resources/read":
            found = next((t for t in templates if t.match(target) is not None), None)
        return found

    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    methods = sorted(set(_METHOD.values()))
    for row in AuditEvent.objects.filter(method__in=methods).values("method", "target", "kind").annotate(n=Count("id")):
        ran = owner(row["method"], row["target"])
        if ran is not None:
            counts[id(ran)][row["kind"]] += row["n"]
    asked: dict[int, dict[str, str]] = defaultdict(dict)
    for method, target, asks in (
        AuditEvent.objects.filter(kind__in=(Kind.ROUND, Kind.ASK), method__in=methods)
        .values_list("method", "target", "asks")
        .distinct()
    ):
        asker = owner(method, target)
        if asker is not None and isinstance(asks, dict):
            asked[id(asker)].update(asks)

    rows = []
    for handler in handlers:
        c = counts.get(id(handler), {})
        method = _METHOD[handler.kind]
        address = _address(handler)
        query: dict[str, str] = {"method": method}
        if not isinstance(handler, ResourceTemplate):
            query["target"] = address
        rows.append(
            {
                "kind": handler.kind,
                "name": handler.name,
                "address": address,
                "title": handler.title or "",
                "description": handler.description,
                "schema": json.dumps(_schema(handler), indent=2, sort_keys=True, default=str),
                "source": handler.source,
                "is_async": handler.is_async,
                "permissions": ", ".join(handler.permissions),
                "asks": sorted(asked.get(id(handler), {}).items()),
                "calls": sum(c.get(str(k), 0) for k in CALL_KINDS),
                "failed": c.get(str(Kind.FAILED), 0),
                "rounds": c.get(str(Kind.ROUND), 0),
                "refusals": sum(c.get(str(k), 0) for k in REFUSAL_KINDS),
                "query": urlencode(query),
            }
        )
    return rows
