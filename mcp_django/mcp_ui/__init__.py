"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865, docs/apps.md): the views, rendered from Django
templates, and the tool options ``app=`` and ``visibility=``. Named after the extension's identifier: in
Django, "apps" and "views" mean other things."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured

__all__ = ["EXTENSION", "MIME_TYPE", "View", "view"]

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"

CSP_ARGUMENTS = {
    "connect": "connectDomains",
    "resources": "resourceDomains",
    "frames": "frameDomains",
    "base_uri": "baseUriDomains",
}
PERMISSIONS = {
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboard_write": "clipboardWrite",
}
VISIBILITIES = ("model", "app")


@dataclass(frozen=True)
class View:
    """One view: its template, its ``ui://`` URI and what the host is asked to allow."""

    template: str
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    # The spec's _meta.ui.csp: origins by kind (connectDomains, resourceDomains, ...); empty: none.
    csp: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    permissions: tuple[str, ...] = ()
    prefers_border: bool | None = None
    domain: str | None = None

    def ui_meta(self) -> dict[str, Any]:
        """The resource's ``_meta.ui``: its CSP, permissions and presentation."""
        ui: dict[str, Any] = {"csp": {key: list(self.csp[key]) for key in CSP_ARGUMENTS.values() if self.csp.get(key)}}
        if self.permissions:
            ui["permissions"] = {PERMISSIONS[p]: {} for p in self.permissions}
        if self.prefers_border is not None:
            ui["prefersBorder"] = self.prefers_border
        if self.domain:
            ui["domain"] = self.domain
        return ui

    def descriptor(self) -> dict[str, Any]:
        """The view in ``resources/list``."""
        out: dict[str, Any] = {"uri": self.uri, "name": self.name, "mimeType": MIME_TYPE}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        out["_meta"] = {"ui": self.ui_meta()}
        return out


# Every view registered, by URI (a view is the same page on every endpoint: its data comes by tool calls).
views: dict[str, View] = {}


def _origins(value: Iterable[str], argument: str) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
        raise ImproperlyConfigured(f"view(): {argument}= must be a list of origins, not {value!r}")
    return tuple(value)


def view(
    template: str,
    *,
    uri: str | None = None,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    connect: Iterable[str] | None = None,
    resources: Iterable[str] | None = None,
    frames: Iterable[str] | None = None,
    base_uri: Iterable[str] | None = None,
    permissions: Iterable[str] = (),
    prefers_border: bool | None = True,
    domain: str | None = None,
) -> View:
    """Register the view rendered from ``template`` (``ui://<template>`` unless ``uri``); the same
    template registered again must have the same settings (docs/apps.md)."""
    if not isinstance(template, str) or not template:
        raise ImproperlyConfigured(f"view(): the template must be a template name, not {template!r}")
    uri = uri or f"ui://{template}"
    if not uri.startswith("ui://"):
        raise ImproperlyConfigured(f"view({template!r}): uri= must start with ui://, not {uri!r}")
    unknown = [p for p in permissions if p not in PERMISSIONS]
    if isinstance(permissions, str) or unknown:
        raise ImproperlyConfigured(f"view({template!r}): permissions are of {sorted(PERMISSIONS)}, not {permissions!r}")
    given = {"connect": connect, "resources": resources, "frames": frames, "base_uri": base_uri}
    csp = {CSP_ARGUMENTS[arg]: _origins(value, arg) for arg, value in given.items() if value}
    made = View(
        template=template,
        uri=uri,
        name=name or template.rsplit("/", 1)[-1].rsplit(".", 1)[0],
        title=title,
        description=description,
        csp=csp,
        permissions=tuple(permissions),
        prefers_border=prefers_border,
        domain=domain,
    )
    known = views.get(uri)
    if known is not None and known != made:
        raise ImproperlyConfigured(f"view {uri!r} is registered already with other settings")
    views[uri] = made
    return made


def app_option(value: Any, owner: str) -> View:
    """``@mcp.tool(app=...)``: a template name (its view registered with the defaults) or a :class:`View`."""
    if isinstance(value, View):
        return value
    if isinstance(value, str):
        known = views.get(f"ui://{value}")
        return known if known is not None and known.template == value else view(value)
    raise TypeError(f"{owner}: app= must be a template name or an mcp_django.mcp_ui.View, not {value!r}")


def visibility_option(value: Any, owner: str) -> tuple[str, ...]:
    """``@mcp.tool(visibility=[...])``: who may call the tool, of ``"model"`` and ``"app"``."""
    if not isinstance(value, (list, tuple)) or not value:
        raise TypeError(f"{owner}: visibility= must be a non-empty list of 'model' and 'app', not {value!r}")
    if any(v not in VISIBILITIES for v in value):
        raise TypeError(f"{owner}: visibility= takes 'model' and 'app' only, not {value!r}")
    return tuple(dict.fromkeys(value))
