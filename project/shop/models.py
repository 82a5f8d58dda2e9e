"""A small shop: products anyone signed in may browse, orders that belong to their owner."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models


class Product(models.Model):
    name = models.CharField(max_length=100, unique=True)
    sku = models.CharField(
        "SKU",
        max_length=20,
        unique=True,
        validators=[RegexValidator(r"^[A-Z0-9-]+\Z", "Upper-case letters, digits and '-' only.")],
        help_text="Stock-keeping unit, e.g. MUG-01.",
    )
    price = models.DecimalField(max_digits=8, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))])
    stock = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Order(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        PAID = "paid", "Paid"
        SHIPPED = "shipped", "Shipped"
        CANCELLED = "cancelled", "Cancelled"

    class Shipping(models.TextChoices):
        STANDARD = "standard", "Standard"
        EXPRESS = "express", "Express"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="shop_orders")
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="orders")
    quantity = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(100)])
    shipping = models.CharField(max_length=10, choices=Shipping.choices, default=Shipping.STANDARD)
    note = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Order #{self.pk}: {self.quantity} x {self.product}"

    @property
    def total(self) -> Decimal:
        return self.product.price * self.quantity
