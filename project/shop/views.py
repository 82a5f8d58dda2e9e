"""The shop's REST API: ordinary DRF views, served at /api/ and, unchanged, as MCP tools (see mcp.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, JsonResponse
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import filters, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_django import get_context

from .filters import OrderFilter
from .models import Order, Product
from .serializers import OrderSerializer, ProductSerializer


class ShopPagination(PageNumberPagination):
    page_size = 10
    page_size_query_param = "page_size"
    max_page_size = 50


class ProductViewSet(viewsets.ModelViewSet):
    """The catalogue: everyone signed in reads it; changing it takes the shop.*_product permissions."""

    queryset = Product.objects.all()
    serializer_class = ProductSerializer
    permission_classes = [permissions.DjangoModelPermissions]
    pagination_class = ShopPagination
    filter_backends = [filters.SearchFilter, filters.OrderingFilter]
    search_fields = ["name", "sku"]
    ordering_fields = ["name", "price", "stock"]


class OrderIsEditable(permissions.BasePermission):
    """Orders can be changed or deleted only while they are pending."""

    message = "Only pending orders can be changed or deleted."

    def has_object_permission(self, request: Request, view: Any, obj: Order) -> bool:
        if request.method in permissions.SAFE_METHODS or getattr(view, "action", None) == "cancel":
            return True
        return obj.status == Order.Status.PENDING


class OrderViewSet(viewsets.ModelViewSet):
    """The caller's own orders."""

    serializer_class = OrderSerializer
    permission_classes = [permissions.IsAuthenticated, OrderIsEditable]
    pagination_class = ShopPagination
    filter_backends = [DjangoFilterBackend, filters.SearchFilter, filters.OrderingFilter]
    filterset_class = OrderFilter
    search_fields = ["note", "product__name"]
    ordering_fields = ["created_at", "quantity", "id"]

    def get_queryset(self) -> Any:
        # Per user: nobody sees, changes or deletes anyone else's orders (they are a 404).
        return Order.objects.filter(owner=self.request.user).select_related("product")

    def perform_create(self, serializer: OrderSerializer) -> None:
        serializer.save(owner=self.request.user)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete one of your pending orders, after you confirm."""
        order = self.get_object()
        # Over MCP the user confirms first. Nothing has changed yet, so when this ask ends
        # the attempt (the replay rule), running the view again from the top is safe.
        ctx = get_context(request)
        if ctx is not None and not ctx.confirm(f"Delete order #{order.pk} ({order.quantity} x {order.product.name})?"):
            return Response({"deleted": False, "detail": f"Order #{order.pk} was kept."})
        order.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)

    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel one of your orders that has not shipped yet, after you confirm."""
        order = self.get_object()
        if order.status in (Order.Status.SHIPPED, Order.Status.CANCELLED):
            raise ValidationError({"status": f"A {order.status} order cannot be cancelled."})
        ctx = get_context(request)
        if ctx is not None and not ctx.confirm(f"Cancel order #{order.pk}?"):
            return Response({"cancelled": False, "detail": f"Order #{order.pk} was not cancelled."})
        order.status = Order.Status.CANCELLED
        order.save(update_fields=["status"])
        return Response(self.get_serializer(order).data)


class OrderSummary(APIView):
    """How many orders you have, by status."""

    permission_classes = [permissions.IsAuthenticated]

    def get(self, request: Request) -> Response:
        rows = Order.objects.filter(owner=request.user).values("status").annotate(n=Count("id"))
        counts = {row["status"]: row["n"] for row in rows}
        return Response({"total": sum(counts.values()), "by_status": counts})


@login_required
def stock_report(request: HttpRequest) -> JsonResponse:
    """Products whose stock is at or below a threshold (a plain Django view)."""
    try:
        threshold = int(request.GET.get("at_most", "5"))
    except ValueError:
        return JsonResponse({"detail": "at_most must be an integer."}, status=400)
    products = Product.objects.filter(stock__lte=threshold).order_by("stock", "name")
    return JsonResponse(
        {"at_most": threshold, "products": [{"sku": p.sku, "name": p.name, "stock": p.stock} for p in products]}
    )
