from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from .views import OrderSummary, OrderViewSet, ProductViewSet, stock_report

router = DefaultRouter()
router.register("products", ProductViewSet, basename="product")
router.register("orders", OrderViewSet, basename="order")

urlpatterns = [
    path("orders/summary/", OrderSummary.as_view(), name="order-summary"),
    path("stock-report/", stock_report, name="stock-report"),
    *router.urls,
]
