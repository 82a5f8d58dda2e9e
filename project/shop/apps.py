from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "project.shop"
    label = "shop"
    verbose_name = "Shop (demo)"
    default_auto_field = "django.db.models.BigAutoField"
