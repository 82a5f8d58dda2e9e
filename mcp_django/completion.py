"""Completers for ``completions={...}`` on prompts and resource templates: what each spec may be,
and how values match, is in docs/index.md ("Completers from models")."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db.models import Field, QuerySet

if TYPE_CHECKING:
    from .asks.context import SyncContext

__all__ = ["Completer", "from_choices", "from_field", "from_queryset"]

# One past the 100 values a result may carry, so that the answer can say there are more.
LIMIT = 101
Completer = Callable[..., Any]


def from_choices(values: Iterable[Any]) -> Completer:
    """A completer offering ``values`` (kept as strings, in their order) that start with what was typed."""
    kept = tuple(dict.fromkeys(str(v) for v in values))

    def complete(value: str) -> list[str]:
        typed = value.casefold()
        return [v for v in kept if v.casefold().startswith(typed)][:LIMIT]

    return complete


def from_queryset(queryset: QuerySet[Any] | Callable[[SyncContext], QuerySet[Any]], field: str) -> Completer:
    """A completer offering ``field``'s distinct values in ``queryset`` that start with what was typed.

    ``queryset`` may be a function of the completion's context, for values that depend
    on the caller: ``from_queryset(lambda ctx: Order.objects.filter(owner=ctx.user), "id")``.
    The queryset is evaluated anew on each completion, in the worker pool.
    """
    if not isinstance(field, str) or not field:
        raise ImproperlyConfigured(f"from_queryset: field must name a field, not {field!r}")
    if isinstance(queryset, QuerySet):
        try:
            queryset.model._meta.get_field(field.split("__", 1)[0])
        except FieldDoesNotExist:
            raise ImproperlyConfigured(f"from_queryset: {queryset.model.__name__} has no field {field!r}") from None
    elif not callable(queryset):
        raise ImproperlyConfigured(f"from_queryset: expected a QuerySet or a function returning one, not {queryset!r}")

    def complete(value: str, ctx: SyncContext) -> list[Any]:
        qs = queryset(ctx) if callable(queryset) and not isinstance(queryset, QuerySet) else queryset
        if value:
            qs = qs.filter(**{f"{field}__istartswith": value})
        return list(qs.order_by(field).values_list(field, flat=True).distinct()[:LIMIT])

    return complete


def from_field(field: Field[Any, Any]) -> Completer:
    """A model field's choices, or (without choices) the distinct values its column holds."""
    if field.is_relation:
        raise ImproperlyConfigured(
            f"completions: {field.model.__name__}.{field.name} is a relation; "
            f"use from_queryset(<the related model's queryset>, '<a field of it>')"
        )
    if field.choices:
        return from_choices(value for value, _label in field.flatchoices)
    return from_queryset(field.model._default_manager.all(), field.name)


def completer(spec: Any, owner: str) -> Completer:
    """What ``completions={name: spec}`` holds, as a completer (at registration)."""
    if isinstance(getattr(spec, "field", None), Field):
        spec = spec.field  # Order.status, Order.product: the model's descriptors name their field
    if isinstance(spec, Field):
        return from_field(spec)
    if isinstance(spec, QuerySet):
        raise ImproperlyConfigured(f"{owner}: for a queryset, name its field: from_queryset(queryset, 'field')")
    if isinstance(spec, (list, tuple)):
        return from_choices(spec)
    if callable(spec):
        return spec
    raise ImproperlyConfigured(
        f"{owner}: a completion is a function, a model field, a list of values or from_queryset(...), not {spec!r}"
    )


def completers(specs: dict[str, Any] | None, owner: str) -> dict[str, Completer]:
    return {name: completer(spec, f"{owner} argument {name!r}") for name, spec in (specs or {}).items()}
