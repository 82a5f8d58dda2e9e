"""A view's HTML, and the tags of ``{% load mcp_ui %}`` that inline static files into it: a host's
sandboxed frame would block a ``<script src>`` to the project's site."""

from __future__ import annotations

import functools
import os
import re

from django import template
from django.contrib.staticfiles import finders
from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from . import View

SCRIPT = "mcp_django/mcp_ui/ext-apps-2.0.4.js"
# The element each kind of static file is inlined as, and its attributes.
_ELEMENTS = {"css": ("style", ""), "js": ("script", ""), "mjs": ("script", ' type="module"')}

register = template.Library()


class StaticFileMissing(LookupError):
    """A static file a view inlines that no staticfiles finder has."""


# What a view that cannot render raises (mcp_django.ui.E001 reports it at startup).
RENDER_ERRORS = (TemplateDoesNotExist, TemplateSyntaxError, StaticFileMissing, ValueError)


def render(view: View) -> str:
    """The view's page (blocking: templates and static files are files)."""
    return render_to_string(view.template, {"view": view})


@functools.lru_cache(maxsize=64)
def _read(absolute: str, mtime_ns: int, size: int) -> str:
    # Keyed by the file's time and size too: an edited file is read again (runserver, DEBUG).
    with open(absolute, encoding="utf-8") as file:
        return file.read()


@register.simple_tag
def mcp_app_inline(path: str) -> SafeString:
    """A static file as an element of the page (a stylesheet, a script or a module), any ``</tag``
    inside escaped so the text cannot end the element (``<\\/`` means the same in JavaScript and CSS)."""
    kind = path.rsplit(".", 1)[-1].lower()
    if kind not in _ELEMENTS:
        raise ValueError(f"mcp_app_inline inlines .css, .js and .mjs files, not {path!r}")
    found = finders.find(path)  # as {% static %} names it
    if not found:
        raise StaticFileMissing(f"no static file {path!r} (django.contrib.staticfiles' finders found none)")
    stat = os.stat(found)
    tag, attributes = _ELEMENTS[kind]
    text = re.sub(f"</({tag})", r"<\\/\1", _read(found, stat.st_mtime_ns, stat.st_size), flags=re.IGNORECASE)
    return mark_safe(f"<{tag}{attributes}>{text}</{tag}>")  # a static file, its closing tags escaped


@register.simple_tag
def mcp_app_script() -> SafeString:
    """The ext-apps script (the global ``McpApps``), inlined."""
    return mcp_app_inline(SCRIPT)
