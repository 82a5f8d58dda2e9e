"""A page where signed-in users list, create (the secret shown once) and revoke their own MCP
tokens; a project includes it with ``include("mcp_django.tokens.urls")``."""

from __future__ import annotations

import datetime

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from .models import MCPToken


class TokenForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=100, help_text=_("Which client it is for."))
    scopes = forms.CharField(
        label=_("Scopes"), max_length=500, required=False, help_text=_("Space-separated; empty: all of them.")
    )
    handlers = forms.CharField(
        label=_("Tools, prompts and resources"),
        required=False,
        help_text=_("Names, space-separated; empty: all of them."),
    )
    days = forms.IntegerField(
        label=_("Expires after (days)"), min_value=1, max_value=3650, required=False, help_text=_("Empty: never.")
    )


def _page(request: HttpRequest, form: TokenForm, token_text: str | None = None, status: int = 200) -> HttpResponse:
    tokens = MCPToken.objects.filter(user=request.user.pk).order_by("-created")
    context = {"tokens": tokens, "form": form, "token_text": token_text, "now": timezone.now()}
    return render(request, "mcp_django/tokens/list.html", context, status=status)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request, TokenForm())
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    data = form.cleaned_data
    expires = timezone.now() + datetime.timedelta(days=data["days"]) if data["days"] else None
    _token, text = MCPToken.objects.issue(
        request.user, data["name"], scopes=data["scopes"].split(), handlers=data["handlers"].split(), expires=expires
    )
    # Answered on this page, not after a redirect: the secret is never kept anywhere to show again.
    return _page(request, TokenForm(), token_text=text)


@login_required
@require_POST
def revoke(request: HttpRequest, prefix: str) -> HttpResponse:
    # Only the user's own: someone else's id is a 404, as if it did not exist.
    token = get_object_or_404(MCPToken, prefix=prefix, user=request.user.pk)
    token.revoke()
    return redirect("mcp_tokens:list")
