from __future__ import annotations

from typing import Any

from rest_framework import serializers

from .models import Order, Product


class ProductSerializer(serializers.ModelSerializer):
    class Meta:
        model = Product
        fields = ["id", "name", "sku", "price", "stock"]


class ProductSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = Product
        fields = ["id", "name", "price"]


class OrderSerializer(serializers.ModelSerializer):
    product_detail = ProductSummarySerializer(source="product", read_only=True)
    total = serializers.DecimalField(max_digits=12, decimal_places=2, read_only=True)

    class Meta:
        model = Order
        fields = ["id", "product", "product_detail", "quantity", "shipping", "note", "status", "total", "created_at"]
        read_only_fields = ["status", "created_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # A rule JSON Schema cannot say: it depends on the product's stock in the database.
        product = attrs.get("product") or getattr(self.instance, "product", None)
        quantity = attrs.get("quantity", getattr(self.instance, "quantity", None))
        if product is not None and quantity is not None and quantity > product.stock:
            raise serializers.ValidationError({"quantity": f"Only {product.stock} of {product.name} in stock."})
        return attrs
