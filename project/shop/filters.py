from __future__ import annotations

import django_filters

from .models import Order


class OrderFilter(django_filters.FilterSet):
    min_quantity = django_filters.NumberFilter(field_name="quantity", lookup_expr="gte", label="At least this quantity")
    created_after = django_filters.IsoDateTimeFilter(
        field_name="created_at", lookup_expr="gte", label="Created at or after"
    )

    class Meta:
        model = Order
        fields = ["status", "shipping", "product"]
