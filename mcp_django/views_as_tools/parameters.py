"""Schemas of list views' query parameters (filters, search, ordering, pagination) and list output."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

from ..schema.drf import enum_schema, nullable

logger = logging.getLogger("mcp_django")


def query_parameters(view: Any, model: Any) -> dict[str, Any]:
    """The arguments a list action takes: filters, search, ordering and pagination, as the view has them."""
    out: dict[str, Any] = {}
    for backend_cls in getattr(view, "filter_backends", ()) or ():
        out.update(_backend_parameters(backend_cls, view, model))
    paginator = getattr(view, "paginator", None)
    if paginator is not None:
        max_size = getattr(paginator, "max_page_size", None) or getattr(paginator, "max_limit", None)
        sizes = (getattr(paginator, "page_size_query_param", None), getattr(paginator, "limit_query_param", None))
        for param in paginator.get_schema_operation_parameters(view):
            name = param["name"]
            schema = out[name] = _openapi_parameter(param)
            if name == "offset" or schema.get("type") == "integer":
                schema["minimum"] = 0 if name == "offset" else 1
            if max_size and name in sizes:
                schema["maximum"] = max_size
    return out


def _backend_parameters(backend_cls: Any, view: Any, model: Any) -> dict[str, Any]:
    from rest_framework import filters

    backend = backend_cls()
    # django-filter is optional: one of its backends exists only once it is imported.
    django_filters = sys.modules.get("django_filters.rest_framework")
    if django_filters is not None and isinstance(backend, django_filters.DjangoFilterBackend):
        # One argument per filter, typed (django-filter's own OpenAPI says "string" for all).
        try:
            filterset = backend.get_filterset_class(view, model._default_manager.none() if model is not None else None)
        except Exception:
            logger.exception("mcp_django: could not read the filterset of %s", type(view).__name__)
            return {}
        found = filterset.base_filters.items() if filterset is not None else ()
        return {k: v for name, f in found for k, v in filter_schema(name, f).items()}
    if isinstance(backend, filters.SearchFilter):
        fields = getattr(view, "search_fields", None)
        if not fields:
            return {}
        listed = ", ".join(f.lstrip("^=@$") for f in fields)
        return {backend.search_param: {"type": "string", "description": f"Search text, matched against {listed}."}}
    if isinstance(backend, filters.OrderingFilter):
        fields = getattr(view, "ordering_fields", None)
        schema: dict[str, Any] = {
            "type": "string",
            "description": "Order by a field; '-' first for descending; several comma-separated.",
        }
        if fields and fields != "__all__":
            names = [f if isinstance(f, str) else f[0] for f in fields]
            alternatives = "|".join(re.escape(n) for n in names)
            schema["pattern"] = f"^-?({alternatives})(,-?({alternatives}))*$"
            schema["description"] += f" One of: {', '.join(names)}."
        return {backend.ordering_param: schema}
    # Any other backend that describes itself for OpenAPI describes itself here too.
    try:
        params = backend.get_schema_operation_parameters(view)
    except Exception:
        return {}
    return {p["name"]: _openapi_parameter(p) for p in params or () if p.get("in") == "query" and p.get("name")}


def _openapi_parameter(param: dict[str, Any]) -> dict[str, Any]:
    schema = openapi_to_json_schema(param.get("schema", {}))
    if param.get("description"):
        schema["description"] = str(param["description"])
    return schema


def filter_schema(name: str, f: Any) -> dict[str, Any]:
    import django_filters as df

    def described(schema: dict[str, Any], text: str | None = None) -> dict[str, Any]:
        label = text or (str(f.label) if f.label else None)
        if label:
            schema["description"] = label
        return schema

    if isinstance(f, df.DateFromToRangeFilter):
        return {
            f"{name}_after": described({"type": "string", "format": "date"}),
            f"{name}_before": described({"type": "string", "format": "date"}),
        }
    if isinstance(f, df.RangeFilter):
        return {f"{name}_min": described({"type": "number"}), f"{name}_max": described({"type": "number"})}
    if isinstance(f, df.BaseCSVFilter):
        return {name: described({"type": "string"}, f"{f.label or name} (comma-separated values)")}
    if isinstance(f, (df.MultipleChoiceFilter, df.ModelMultipleChoiceFilter)):
        return {name: described({"type": "array", "items": _choice_schema(f)})}
    if isinstance(f, (df.ChoiceFilter, df.ModelChoiceFilter)):
        return {name: described(_choice_schema(f))}
    typed = (t for cls, t in _FILTER_TYPES if isinstance(f, getattr(df, cls)))
    return {name: described({"type": "string", **next(typed, {})})}


# The filters of one JSON type (IsoDateTimeFilter is a DateTimeFilter); any other takes a string.
_FILTER_TYPES = (
    ("BooleanFilter", {"type": "boolean"}),
    ("NumberFilter", {"type": "number"}),
    ("DateTimeFilter", {"format": "date-time"}),
    ("DateFilter", {"format": "date"}),
    ("TimeFilter", {"format": "time"}),
    ("UUIDFilter", {"format": "uuid"}),
)


def _choice_schema(f: Any) -> dict[str, Any]:
    import django_filters as df

    if isinstance(f, (df.ModelChoiceFilter, df.ModelMultipleChoiceFilter)):
        model = getattr(f.queryset, "model", None)
        internal = model._meta.pk.get_internal_type() if model is not None else ""
        return {"type": "integer"} if "Integer" in internal or internal.endswith("AutoField") else {"type": "string"}
    choices = f.extra.get("choices")
    if callable(choices) or choices is None:
        return {"type": "string"}
    return enum_schema(c[0] for c in choices if c[0] not in ("", None))


def list_output_schema(view: Any, item: dict[str, Any]) -> dict[str, Any]:
    """What a list action returns: the paginator's envelope, or ``{"results": [...]}`` unpaginated."""
    items = {"type": "array", "items": item}
    paginator = getattr(view, "paginator", None)
    if paginator is None:
        return {"type": "object", "properties": {"results": items}, "required": ["results"]}
    try:
        return openapi_to_json_schema(paginator.get_paginated_response_schema(items))
    except Exception:
        return {"type": "object", "properties": {"results": items}}


def openapi_to_json_schema(schema: Any) -> Any:
    """DRF describes pagination and filters in OpenAPI 3.0; JSON Schema says ``nullable`` as a type."""
    if isinstance(schema, list):
        return [openapi_to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: openapi_to_json_schema(v) for k, v in schema.items() if k not in ("nullable", "example")}
    return nullable(out) if schema.get("nullable") else out
