"""What the admin and ``manage.py mcp_handlers`` say about each registered handler (docs/audit.md,
"The admin"); rows for a template's URIs are matched to the template in Python."""

from __future__ import annotations

import inspect
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from .asks.questions import ASK_TYPES
from .handlers import Handler, Resource, ResourceTemplate, Tool, address, dotted_name
from .models import ASKED_KINDS, REFUSAL_KINDS, RUN_KINDS, AuditEvent, Kind
from .registry import Registry

METHOD = {"tool": "tools/call", "prompt": "prompts/get", "resource": "resources/read", "template": "resources/read"}
# The key an ask gets without key=... (mcp_django.asks.questions.Ask.default_key).
_TYPES = "|".join(re.escape(ask_type) for ask_type in ASK_TYPES)
_DERIVED_KEY = re.compile(rf"^(?P<ask_type>{_TYPES})-[0-9a-f]{{12}}(?:-\d+)?$")


def schema(handler: Handler) -> Any:
    if isinstance(handler, Resource | ResourceTemplate):
        key = "uriTemplate" if isinstance(handler, ResourceTemplate) else "uri"
        return {key: address(handler), "mimeType": handler.mime_type}
    return handler.input_schema if isinstance(handler, Tool) else getattr(handler, "arguments", None)


def audit_query(handler: Handler, endpoint: str = "default") -> dict[str, str]:
    """The audit log's filter for this handler's rows (a template's: by its URIs' common prefix),
    at the endpoint that serves it (another endpoint may have a handler of the same name)."""
    query = {"endpoint": endpoint, "method": METHOD[handler.primitive]}
    if isinstance(handler, ResourceTemplate):
        query["target__startswith"] = handler.uri_template.split("{", 1)[0]
    else:
        query["target"] = address(handler)
    return query


def audit_rows(handler: Handler, endpoint: str = "default") -> QuerySet[AuditEvent]:
    """This handler's rows (a template's still to be matched with ``owns``)."""
    return AuditEvent.objects.filter(**audit_query(handler, endpoint))


def owns(handler: Handler, target: str) -> bool:
    if isinstance(handler, ResourceTemplate):
        return handler.match(target) is not None
    return target == address(handler)


@dataclass(frozen=True)
class AskGroup:
    """Asks a handler made, under their explicit key, or grouped by type when the key was derived."""

    label: str
    method: str
    explicit: bool
    # Derived keys: how many different questions (wordings) of this type were asked.
    questions: int = 0


def ask_groups(asks: dict[str, str]) -> list[AskGroup]:
    explicit = []
    derived: dict[tuple[str, str], int] = defaultdict(int)
    for key, method in asks.items():
        found = _DERIVED_KEY.match(key)
        if found is None:
            explicit.append(AskGroup(key, method, True))
        else:
            derived[(found["ask_type"], method)] += 1
    groups = sorted(explicit, key=lambda g: g.label)
    groups += [AskGroup(ask_type, method, False, n) for (ask_type, method), n in sorted(derived.items())]
    return groups


def source_code(handler: Handler) -> str:
    """The source of what the project registered: the function, or for a view tool the view (its
    class when it has one), not the adapter that calls it."""
    operation = getattr(handler, "operation", None)
    view = handler.func if operation is None else operation.cls or operation.view
    registered = view if isinstance(view, type) else inspect.unwrap(view)
    try:
        return inspect.getsource(registered)
    except (OSError, TypeError):
        return ""


def _drf_label(permission: Any) -> str:
    """A DRF permission, composed ones (``IsAuthenticated & IsOwner``) spelt as written."""
    op1, op2 = getattr(permission, "op1", None), getattr(permission, "op2", None)
    name = type(permission).__name__
    if op1 is not None and op2 is not None and name in ("AND", "OR"):
        return f"({_drf_label(op1)} {'&' if name == 'AND' else '|'} {_drf_label(op2)})"
    if op1 is not None and name == "NOT":
        return f"~{_drf_label(op1)}"
    return dotted_name(permission if isinstance(permission, type) else type(permission))


_DECORATORS = "django.contrib.auth.decorators."


def _auth_decorator_label(func: Any) -> str | None:
    """Which of Django's auth decorators made ``func`` (its test or the decorator), by its qualname."""
    qualname = getattr(func, "__qualname__", "")
    if qualname == "login_required" or qualname.startswith("login_required."):
        return _DECORATORS + "login_required"
    if qualname.startswith("permission_required."):
        perms = _closure(func).get("perms") or ()
        return f"{_DECORATORS}permission_required({', '.join(map(str, perms))})"
    return None


def _closure(func: Any) -> dict[str, Any]:
    try:
        return dict(inspect.getclosurevars(func).nonlocals)
    except (TypeError, ValueError):  # not a Python function, or an empty cell
        return {}


def _decorator_guards(func: Any) -> list[str]:
    """Django's auth decorators on a view function or (``method_decorator``) method, read from
    the closures of their wrappers down the ``__wrapped__`` chain: they leave no other mark."""
    labels: list[str] = []
    seen = 0
    while func is not None and seen < 20:
        seen += 1
        cells = _closure(func)
        test = cells.get("test_func")
        # Not a test Django made inside staff_member_required or user_passes_test.
        if test is not None and not getattr(test, "__qualname__", "").startswith(
            ("staff_member_required.", "user_passes_test.")
        ):
            labels.append(_auth_decorator_label(test) or f"{_DECORATORS}user_passes_test({dotted_name(test)})")
        for decorator in cells.get("decorators") or ():  # method_decorator(...)
            if label := _auth_decorator_label(decorator):
                labels.append(label)
        func = getattr(func, "__wrapped__", None)
    return labels


def _short(label: str) -> str:
    """``rest_framework.permissions.IsAuthenticated`` as ``IsAuthenticated``, for the list's narrow column."""
    head, paren, rest = label.partition("(")
    return head.rsplit(".", 1)[-1] + paren + rest if head else label


def permission_labels(handler: Handler) -> list[str]:
    """Who may use the handler, as its code says: its own permission classes, and a view tool's
    view's (DRF's permission classes for the action, or Django's auth decorators and mixins)."""
    from django.contrib.auth import mixins

    labels = [_drf_label(c) for c in handler.permission_classes]
    operation = getattr(handler, "operation", None)
    if operation is not None and operation.drf:
        # The permission classes the view applies to this action (the project's DRF default included),
        # from the instance the tool's own permission check makes.
        try:
            labels += [_drf_label(p) for p in operation.instance().get_permissions()]
        except Exception:
            # get_permissions() may read the request, which a page of the admin has none of.
            labels += [_drf_label(p) for p in getattr(operation.cls, "permission_classes", ())]
    elif operation is not None:
        view = operation.cls or operation.view
        if isinstance(view, type):
            if issubclass(view, mixins.PermissionRequiredMixin):
                perms = view.permission_required
                perms = (perms,) if isinstance(perms, str) else tuple(perms or ())
                labels.append(f"{dotted_name(mixins.PermissionRequiredMixin)}({', '.join(perms)})")
            elif issubclass(view, mixins.LoginRequiredMixin):
                labels.append(dotted_name(mixins.LoginRequiredMixin))
            if issubclass(view, mixins.UserPassesTestMixin):
                labels.append(dotted_name(mixins.UserPassesTestMixin))
            view = getattr(view, "dispatch", None)
        labels += _decorator_guards(view)
    return list(dict.fromkeys(labels))


# What a kind's rows count as, on both pages: a handler's calls (its task runs included), rounds and refusals.
_SERIES: dict[str, str] = {
    **dict.fromkeys(RUN_KINDS, "calls"),
    Kind.ROUND: "rounds",
    **dict.fromkeys(REFUSAL_KINDS, "refusals"),
}
# The calls the handlers page notes as failed.
_FAILED = (Kind.FAILED, Kind.TASK_FAILED)


def asked_by(registry: Registry, rows: QuerySet[AuditEvent]) -> dict[int, dict[str, str]]:
    """What each handler (by ``id``) asked, from its ``rows``: ask key -> ask method."""
    asked: dict[int, dict[str, str]] = defaultdict(dict)
    for method, target, asks in rows.filter(kind__in=ASKED_KINDS).values_list("method", "target", "asks").distinct():
        asker = registry.handler_for(method, target)
        if asker is not None and isinstance(asks, dict):
            asked[id(asker)].update(asks)
    return asked


def handler_rows(registry: Registry) -> list[dict[str, Any]]:
    """One dict per handler: what it is, where it lives, what it asked and how often it ran
    (two grouped queries over the audit log, whatever the number of handlers)."""
    counts: dict[int, Counter[str]] = defaultdict(Counter)
    methods = sorted(set(METHOD.values()))
    rows_here = AuditEvent.objects.filter(endpoint=registry.name, method__in=methods)
    for row in rows_here.values("method", "target", "kind").annotate(n=Count("id")):
        ran = registry.handler_for(row["method"], row["target"])
        if ran is not None and (series := _SERIES.get(row["kind"])):
            counts[id(ran)][series] += row["n"]
            if row["kind"] in _FAILED:
                counts[id(ran)]["failed"] += row["n"]
    asked = asked_by(registry, rows_here)
    return [
        {
            "endpoint": registry.name,
            "primitive": handler.primitive,
            "name": handler.name,
            "address": address(handler),
            "title": handler.title or "",
            "description": handler.description,
            "source": handler.source,
            "is_async": handler.is_async,
            "permissions": ", ".join([*handler.permissions, *map(_short, permission_labels(handler))]),
            "asks": ask_groups(asked.get(id(handler), {})),
            **{key: counts[id(handler)][key] for key in ("calls", "failed", "rounds", "refusals")},
            "query": urlencode(audit_query(handler, registry.name)),
        }
        for handler in registry.all_handlers()
    ]


def matches(rows: list[dict[str, Any]], q: str, primitive: str) -> list[dict[str, Any]]:
    """The handlers page's search (name, URI, title, description, source) and type filter."""
    q = q.strip().lower()
    return [
        row
        for row in rows
        if (not primitive or row["primitive"] == primitive)
        and q in " ".join(row[key] for key in ("address", "name", "title", "description", "source")).lower()
    ]


@dataclass
class Day:
    day: date
    calls: int = 0
    rounds: int = 0
    refusals: int = 0


def activity(handler: Handler, days: int = 14, endpoint: str = "default") -> list[Day]:
    """Calls, rounds and refusals per day over the last ``days`` days (today included)."""
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    series = {first + timedelta(days=n): Day(first + timedelta(days=n)) for n in range(days)}
    since = timezone.make_aware(datetime.combine(first, time.min))
    rows = (
        audit_rows(handler, endpoint)
        .filter(created__gte=since)
        .annotate(day=TruncDate("created", tzinfo=timezone.get_current_timezone()))
        .values("day", "kind", "target")
        .annotate(n=Count("id"))
    )
    for row in rows:
        day = series.get(row["day"])
        if day is not None and (key := _SERIES.get(row["kind"])) and owns(handler, row["target"]):
            setattr(day, key, getattr(day, key) + row["n"])
    return list(series.values())


def chart(series: list[Day], width: int = 560, height: int = 120) -> dict[str, Any]:
    """Bar geometry for the detail page's SVG: three bars a day, one scale."""
    top = max([max(d.calls, d.rounds, d.refusals) for d in series] + [1])
    slot = width / len(series)
    bar = max(slot / 4, 1)
    bars = []
    for i, d in enumerate(series):
        for j, (name, value) in enumerate((("calls", d.calls), ("rounds", d.rounds), ("refusals", d.refusals))):
            h = round(value / top * height, 1)
            x = round(i * slot + bar * (j + 0.5), 1)
            bars.append({"series": name, "x": x, "y": round(height - h, 1), "w": round(bar, 1), "h": h, "value": value})
    labels = [{"x": round(i * slot + slot / 2, 1), "text": d.day.strftime("%d %b")} for i, d in enumerate(series)]
    return {"width": width, "height": height, "top": top, "bars": bars, "labels": labels[:: max(1, len(series) // 7)]}


def recent(handler: Handler, limit: int = 25, endpoint: str = "default") -> list[AuditEvent]:
    rows = audit_rows(handler, endpoint).select_related("user").order_by("-created", "-id")
    if not isinstance(handler, ResourceTemplate):
        return list(rows[:limit])
    # A template's prefix may also match other resources' URIs: keep its own.
    return [row for row in rows[: limit * 4] if owns(handler, row.target)][:limit]
