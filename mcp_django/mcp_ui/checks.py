"""The MCP Apps views' system checks (E001: does not render; E002: loads what it does not declare, which
the host's policy, built from the declaration alone, blocks), and what a page loads."""

from __future__ import annotations

import re
from collections.abc import Iterable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

from django.core.checks import Error, register
from django.template import TemplateDoesNotExist

from ..conf import mcp_settings
from . import CSP_ARGUMENTS, render, views

# Elements whose attribute loads something, and the CSP list that must allow it.
_LOADS = {
    ("script", "src"): "resourceDomains",
    ("img", "src"): "resourceDomains",
    ("img", "srcset"): "resourceDomains",
    ("source", "src"): "resourceDomains",
    ("source", "srcset"): "resourceDomains",
    ("audio", "src"): "resourceDomains",
    ("video", "src"): "resourceDomains",
    ("video", "poster"): "resourceDomains",
    ("track", "src"): "resourceDomains",
    ("link", "href"): "resourceDomains",
    ("image", "href"): "resourceDomains",
    ("use", "href"): "resourceDomains",
    ("iframe", "src"): "frameDomains",
    ("frame", "src"): "frameDomains",
    ("base", "href"): "baseUriDomains",
}
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)|@import\s+["']([^"']+)""", re.IGNORECASE)
_CONNECT = re.compile(r"""\b(?:fetch|WebSocket|EventSource)\(\s*["'`]([^"'`]+)""")


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        # Each URL the page loads, the CSP list (resourceDomains...) that must allow it, and its origin,
        # scheme://host[:port] ("" when relative: the host's origin, which no view can declare).
        self.loads: list[tuple[str, str, str]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in = tag if tag in ("script", "style") else None
        for name, value in attrs:
            if not value:
                continue
            kind = _LOADS.get((tag, name))
            if name == "href" and tag == "link":
                rel = dict(attrs).get("rel") or ""
                kind = None if rel.lower() in ("canonical", "alternate", "author", "help", "license") else kind
            if kind is not None:
                self._add(kind, [u.strip().split(" ")[0] for u in value.split(",")] if name == "srcset" else [value])
            elif name == "style":
                self._css(value)

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self._css(data)
        elif self._in == "script":
            self._add("connectDomains", _CONNECT.findall(data))

    def _css(self, text: str) -> None:
        self._add("resourceDomains", [a or b for a, b in _CSS_URL.findall(text)])

    def _add(self, kind: str, urls: Iterable[str]) -> None:
        for url in urls:
            parts = urlsplit(url)
            if not url or url.startswith("#") or parts.scheme in ("data", "blob", "about", "javascript"):
                continue  # it stays in the page
            origin = f"{parts.scheme or 'https'}://{parts.netloc}".lower() if parts.netloc else ""
            self.loads.append((url, kind, origin))


def allows(declared: Iterable[str], origin: str) -> bool:
    """Whether a CSP list allows ``origin`` (``https://*.example.com`` allows its subdomains)."""
    for entry in declared:
        entry = entry.rstrip("/").lower()
        if entry == origin:
            return True
        scheme, _, host = entry.partition("://*.")
        if host and origin.startswith(f"{scheme}://") and origin.endswith(f".{host}"):
            return True
    return False


_ARGUMENT = {kind: argument for argument, kind in CSP_ARGUMENTS.items()}


@register()
def check_views(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    if "mcp_django.mcp_ui.methods" not in mcp_settings.EXTENSIONS:
        return []
    problems: list[Any] = []
    for view in views.values():
        try:
            html = render.render(view)
        except TemplateDoesNotExist as exc:
            problems.append(
                Error(
                    f"the MCP Apps view {view.uri} has no template {view.template!r} ({exc})",
                    hint="create the template in an app's templates/ folder or a TEMPLATES DIRS entry",
                    id="mcp_django.ui.E001",
                )
            )
            continue
        except render.RENDER_ERRORS as exc:
            problems.append(
                Error(f"the MCP Apps view {view.uri} ({view.template}) does not render: {exc}", id="mcp_django.ui.E001")
            )
            continue
        reader = _Reader()
        reader.feed(html)
        reader.close()
        for url, kind, origin in reader.loads:
            if origin and allows(view.csp.get(kind, ()), origin):
                continue  # declared (a relative URL never is: it never loads)
            if origin == "":
                message = f"the MCP Apps view {view.uri} ({view.template}) loads the relative URL {url!r}"
                hint = (
                    "a view runs in a sandboxed frame with no origin of the site's: inline it with {% mcp_app_inline %}"
                )
            else:
                message = (
                    f"the MCP Apps view {view.uri} ({view.template}) loads {url!r} from {origin}, "
                    f"which it does not declare: the host's CSP will block it"
                )
                hint = f"declare it: mcp_django.mcp_ui.view({view.template!r}, {_ARGUMENT[kind]}=[{origin!r}])"
            problems.append(Error(message, hint=hint, id="mcp_django.ui.E002"))
    return problems
