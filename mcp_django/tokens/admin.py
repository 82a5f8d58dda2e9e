"""MCP tokens in Django's admin: created with the secret shown once, on the page after the save;
edited (name, limits, expiry) and revoked, never shown again. Registered from ``mcp_django.admin``."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from .models import MCPToken


@admin.register(MCPToken)
class MCPTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "user", "status", "scopes", "created", "expires", "last_used")
    list_filter = ("created", "expires", "last_used", "revoked")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
    fields = ("user", "name", "scopes", "handlers", "expires", "prefix", "created", "last_used", "revoked")
    readonly_fields = ("prefix", "created", "last_used", "revoked")
    actions = ["revoke_tokens"]

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        # The user model's own name field: a custom user model may have no username.
        return ("=prefix", "name", f"user__{get_user_model().USERNAME_FIELD}")

    @admin.display(description=_("status"))
    def status(self, obj: MCPToken) -> str:
        if obj.revoked is not None:
            return str(_("revoked"))
        return str(_("expired")) if obj.is_expired else str(_("active"))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A token stays its user's: moving it would hand someone a secret another person holds.
        return (*self.readonly_fields, "user") if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: MCPToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        # Kept on the request only, for the one response that shows it.
        request._mcp_token_text = obj.set_new_secret()  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: MCPToken, post_url_continue: str | None = None) -> HttpResponse:
        # save_model set it: the admin calls response_add only after adding the token there.
        text = request._mcp_token_text  # type: ignore[attr-defined]
        # Rendered here, not carried through a redirect: the secret never reaches the
        # session or the message store, and reloading the page cannot show it again.
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("MCP token created"),
            "token": obj,
            "token_text": text,
        }
        # The admin's views are never_cache already: no browser or proxy keeps this page.
        return TemplateResponse(request, "admin/mcp_django/token_created.html", context)

    @admin.action(description=_("Revoke the selected tokens"), permissions=["change"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[MCPToken]) -> None:
        count = 0
        for token in queryset.filter(revoked__isnull=True):
            token.revoke()  # one save each: every process hears of it
            count += 1
        self.message_user(request, ngettext("%d token revoked.", "%d tokens revoked.", count) % count, messages.SUCCESS)
