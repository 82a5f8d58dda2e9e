"""The MCP Apps section of the admin's page of a tool: its view in a sandboxed frame, as a host
would show it before a result arrives, with its URI, template, CSP and visibility."""

from __future__ import annotations

import re

from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from ..handlers import Handler
from . import render
from .views import View

_HEAD = re.compile(r"<head[^>]*>", re.IGNORECASE)


def content_security_policy(view: View) -> str:
    """The policy a host builds from the view's declared origins (the spec's construction)."""
    csp = view.csp

    def listed(kind: str, fallback: str = "") -> str:
        return " ".join(csp.get(kind, ())) or fallback

    resources = listed("resourceDomains")
    frames, base = listed("frameDomains", "'none'"), listed("baseUriDomains", "'self'")
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src 'self' 'unsafe-inline' {resources}".rstrip(),
            f"style-src 'self' 'unsafe-inline' {resources}".rstrip(),
            f"connect-src 'self' {listed('connectDomains')}".rstrip(),
            f"img-src 'self' data: {resources}".rstrip(),
            f"font-src 'self' {resources}".rstrip(),
            f"media-src 'self' data: {resources}".rstrip(),
            f"frame-src {frames}",
            "object-src 'none'",
            f"base-uri {base}",
        ]
    )


def framed(view: View, html: str) -> str:
    """The page with the host's policy as its first ``<meta>``, for a ``srcdoc`` frame."""
    policy = f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy(view)}">'
    found = _HEAD.search(html)
    return html[: found.end()] + policy + html[found.end() :] if found else policy + html


def view_panel(handler: Handler) -> SafeString | None:
    view: View | None = handler.options.get("app")
    visibility = handler.options.get("visibility")
    if view is None and visibility is None:
        return None
    page = problem = None
    if view is not None:
        try:
            page = framed(view, render.render(view))
        except (TemplateDoesNotExist, TemplateSyntaxError, render.StaticFileMissing, ValueError) as exc:
            problem = str(exc)
    context = {
        "view": view,
        "visibility": visibility or ("model", "app"),
        "page": page,
        "problem": problem,
        "ui": view.ui_meta() if view is not None else None,
    }
    return SafeString(render_to_string("admin/mcp_django/mcp_ui_view.html", context))
