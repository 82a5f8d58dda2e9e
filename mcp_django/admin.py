"""The audit log and the registered handlers in Django's admin (docs/audit.md, "The admin"): both
read-only, as the log is evidence (``mcp_audit_purge`` applies the retention) and handlers are code."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any
from urllib.parse import urlencode

import django
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from . import extensions
from . import handler_report as report
from .audit import stats
from .handlers import PRIMITIVES
from .models import REFUSAL_KINDS, RUN_KINDS, AuditEvent, Kind, RegisteredHandler
from .registry import endpoints, registry_named

# What a kind's rows are grouped under in the filter besides the kinds themselves.
_GROUPS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "refusals": (_("refusals (state or capability)"), tuple(REFUSAL_KINDS)),
    # A task's end is its call's (the handlers page counts them so; its link lists them).
    "calls": (_("finished calls"), tuple(RUN_KINDS)),
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


class LimitFilter(admin.SimpleListFilter):
    """The calls a limit refused (docs/limits.md), by the limit: a rate's scope or a cap."""

    title = _("refused by limit")
    parameter_name = "limit"
    LIMITS = (
        ("user", _("rate per user")),
        ("token", _("rate per token")),
        ("tool", _("rate per user and tool")),
        ("endpoint", _("rate per endpoint")),
        ("handler", _("a handler's throttle=")),
        ("class", _("a DRF throttle class")),
        ("asks", _("open asks")),
        ("tasks", _("unfinished tasks")),
    )

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("any", _("any limit")), *self.LIMITS]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        value = self.value()
        if not value:
            return queryset
        limited = queryset.filter(kind=Kind.LIMITED)
        # A refusal's reason starts with the limit's name ("user 100/min", "asks 5 open").
        return limited if value == "any" else limited.filter(reason__startswith=f"{value} ")


class ActiveValueFilter(admin.AllValuesFieldListFilter):
    """Django's filter on a column's values, for a column with unboundedly many (a tool name, a
    principal): it lists only the value a link (the handlers page's counts) set, so that it can
    be seen and cleared, and is not shown until one is."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Not the log's every value (the query Django made is never run): the one the link set.
        self.lookup_choices = self.lookup_val or []  # type: ignore[assignment]  # any iterable serves

    def has_output(self) -> bool:
        return bool(self.lookup_val)


class ViewOnlyAdminMixin:
    """Nobody adds or changes rows from the admin, superusers included."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdminMixin(ViewOnlyAdminMixin):
    """Nor deletes them."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def stacked(first: Any, *under: Any) -> str:
    """``first`` with each of ``under`` in small print on a line of its own below it."""
    return format_html("{}" + "<br><small>{}</small>" * len(under), first, *under)


def time_column(name: str, description: Any, *, two_lines: bool = False) -> Any:
    """A column or field showing the row's time ``name`` one way in a list and on a row's page:
    local, to the second, not DATETIME_FORMAT's "2:03 p.m.". ``two_lines`` puts the date over
    the time, which leaves a list room for its other columns."""

    @admin.display(description=description, ordering=name)
    def column(model_admin: admin.ModelAdmin[Any], obj: Any) -> str:
        moment = getattr(obj, name)
        if moment is None:
            return "-"
        day, clock = timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S").split(" ")
        return format_html("{}<br>{}", day, clock) if two_lines else f"{day} {clock}"

    return column


def show_every_field(model_admin: type[admin.ModelAdmin[Any]], model: type[models.Model]) -> None:
    """A row's page shows every field of ``model`` (read-only, as nobody may change a row), its
    times printed as a list prints them (``<name>_exact`` fields of ``model_admin``)."""
    fields = []
    for field in model._meta.fields:
        if isinstance(field, models.DateTimeField):
            setattr(model_admin, f"{field.name}_exact", time_column(field.name, field.verbose_name))
            fields.append(f"{field.name}_exact")
        else:
            fields.append(field.name)
    model_admin.fields = tuple(fields)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    # Seven columns, so that at 1280 px all fit beside the filters: the method sits under its
    # target and the protocol revision under its transport (each still a filter).
    list_display = ("when", "what", "target_method", "who", "via", "round", "duration")
    list_filter = (
        KindFilter,
        LimitFilter,
        *("reason", "outcome", "version", "era", "transport", "method", "endpoint"),
        ("target", ActiveValueFilter),
        ("principal", ActiveValueFilter),
    )
    date_hierarchy = "created"
    when = time_column("created", _("time"), two_lines=True)
    list_select_related = ("user",)
    # Counting a large log on every page is the slow part of a changelist.
    show_full_result_count = False
    list_per_page = 100

    class Media:
        css = {"all": ["mcp_django/admin.css"]}

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        username = f"user__{get_user_model().USERNAME_FIELD}"
        return ("target", "principal", username, "credential", "request_id", "client_address", "reason", "error")

    @admin.display(description=_("kind"), ordering="kind")
    def what(self, obj: AuditEvent) -> str:
        # The kind, its reason or outcome under it, and a failed call's error (whole on hover).
        detail = obj.reason or (obj.outcome if obj.outcome != obj.kind else "")
        kind = obj.get_kind_display()
        if obj.error:
            error = format_html('<small class="mcp-error" title="{}">{}</small>', obj.error, obj.error)
            return format_html("{}{}", stacked(kind, detail), error)
        return stacked(kind, detail) if detail else kind

    @admin.display(description=_("target / method"), ordering="target")
    def target_method(self, obj: AuditEvent) -> str:
        return stacked(obj.target or "—", obj.method)

    @admin.display(description=_("transport / revision"), ordering="transport")
    def via(self, obj: AuditEvent) -> str:
        if obj.endpoint and obj.endpoint != "default":  # another endpoint than the default names itself
            return stacked(obj.transport, obj.version, f"@{obj.endpoint}")
        return stacked(obj.transport, obj.version)

    @admin.display(description=_("user"), ordering="principal")
    def who(self, obj: AuditEvent) -> str:
        if obj.user is not None:
            name = obj.user.get_username()
        elif obj.principal and obj.principal != "anonymous":
            name = f"{obj.principal} ({_('deleted')})"  # the account went; the label stays
        else:
            name = obj.principal or "—"
        # The credential under the user, when it names itself (an MCP token: name and id).
        return stacked(name, obj.credential) if obj.credential else name

    @admin.display(description=_("ms"), ordering="duration_ms")
    def duration(self, obj: AuditEvent) -> str:
        return "" if obj.duration_ms is None else f"{obj.duration_ms:.1f}"

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
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


show_every_field(AuditEventAdmin, AuditEvent)


@admin.register(RegisteredHandler)
class RegisteredHandlerAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The "Registered handlers" page and a page per handler, with what the audit log says (the
    proxy model only puts the entry on the admin index: its URLs are these two pages)."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        return bool(
            user.is_active
            and user.is_staff
            and (user.has_perm("mcp_django.view_auditevent") or user.has_perm("mcp_django.view_registeredhandler"))
        )

    def get_urls(self) -> list[Any]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view
        return [
            path("", view(self.changelist_view), name="{}_{}_changelist".format(*info)),
            path("<str:primitive>/<path:address>/", view(self.handler_view), name="{}_{}_handler".format(*info)),
        ]

    def _context(self, request: HttpRequest, title: Any) -> dict[str, Any]:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            "audit_url": reverse(f"{self.admin_site.name}:mcp_django_auditevent_changelist"),
            "handlers_url": reverse(f"{self.admin_site.name}:mcp_django_registeredhandler_changelist"),
            # Django 6 styles breadcrumbs as a list, 5.2 as a div.
            "breadcrumbs_as_list": django.VERSION >= (6, 0),
        }

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        context = self._context(request, _("Registered MCP handlers"))
        q = request.GET.get("q", "")
        # "type" in the URL, as the page's header says; a handler's primitive in the code.
        primitive = request.GET.get("type", "")
        if primitive not in PRIMITIVES:
            primitive = ""
        registries = endpoints()  # the default first
        # "endpoint" in the URL: one endpoint's handlers (every endpoint's without).
        endpoint = request.GET.get("endpoint", "")
        if endpoint not in {r.name for r in registries}:
            endpoint = ""
        rows = [row for r in registries if endpoint in ("", r.name) for row in report.handler_rows(r)]
        for row in rows:
            url = reverse(
                f"{self.admin_site.name}:mcp_django_registeredhandler_handler", args=[row["primitive"], row["address"]]
            )
            row["url"] = url if row["endpoint"] == "default" else f"{url}?{urlencode({'endpoint': row['endpoint']})}"
        counts = Counter(row["primitive"] for row in rows)
        primitives = [("", _("all"), len(rows)), *((p, p, counts[p]) for p in PRIMITIVES if counts[p])]

        def query(**changes: str) -> str:
            return urlencode({"q": q, "type": primitive, "endpoint": endpoint, **changes})

        context.update(
            handlers=report.matches(rows, q, primitive),
            total=len(rows),
            q=q,
            primitive=primitive,
            primitives=[{"value": v, "label": label, "count": n, "query": query(type=v)} for v, label, n in primitives],
            # Shown when there is more than one endpoint: each row says whose it is.
            endpoint=endpoint,
            endpoints=[
                {"value": v, "label": v or _("all"), "query": query(endpoint=v)}
                for v in ["", *(r.name for r in registries)]
            ]
            if len(registries) > 1
            else [],
            **(extra_context or {}),
        )
        return TemplateResponse(request, "admin/mcp_django/handlers.html", context)

    def handler_view(self, request: HttpRequest, primitive: str, address: str) -> HttpResponse:
        # ?endpoint=NAME: a handler of another endpoint than the default.
        name = request.GET.get("endpoint") or "default"
        registry = registry_named(name)
        handlers = registry.all_handlers() if registry is not None else []
        handler = next((h for h in handlers if h.primitive == primitive and report.address(h) == address), None)
        if registry is None or handler is None:
            raise Http404(f"No {primitive} {address!r} is registered at the endpoint {name!r}.")
        context = self._context(request, f"{primitive} {address}")
        series = report.activity(handler, endpoint=name)
        asked = report.asked_by(registry, report.audit_rows(handler, name)).get(id(handler), {})
        context.update(
            handler=handler,
            address=address,
            schema=json.dumps(report.schema(handler), indent=2, sort_keys=True, default=str),
            source_code=report.source_code(handler),
            permission_classes=report.permission_labels(handler),
            asks=report.ask_groups(asked),
            recent=report.recent(handler, endpoint=name),
            endpoint=name,
            several_endpoints=len(endpoints()) > 1,
            series=series,
            totals={key: sum(getattr(day, key) for day in series) for key in ("calls", "rounds", "refusals")},
            chart=report.chart(series),
            # The extensions' sections of this page (mcp_django.extensions.add_handler_panel).
            panels=[html for panel in extensions.registered.handler_panels if (html := panel(handler))],
            # The audit log's filter for this handler's rows (its links add a kind, as the list's do).
            query=urlencode(report.audit_query(handler, name)),
        )
        return TemplateResponse(request, "admin/mcp_django/handler.html", context)


from .tokens import admin as tokens_admin  # noqa: E402, F401 - registers the MCP tokens' ModelAdmin
