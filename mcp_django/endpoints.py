"""The project's MCP endpoints: each registry made with a name, and the paths routes serve them at.

A table, nothing more, low in the layers so that what answers for an endpoint without
serving it (the protected-resource metadata, the checks, the task runner, the admin)
can find one by its name or its path without importing the registry or a transport.
:class:`mcp_django.registry.Registry` adds itself here when it is given a name;
:func:`mcp_django.routing.mcp_urlpatterns` adds the paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .registry import Registry

DEFAULT = "default"

_named: dict[str, Registry] = {}
# Paths the ASGI routes serve an endpoint at -> its registry (None: the default one's).
_paths: dict[str, Registry | None] = {}


def add(registry: Registry) -> None:
    _named[registry.name] = registry


def named(name: str) -> Registry | None:
    """The endpoint of that name (``"default"``: ``mcp_django.mcp``), or None."""
    return _named.get(name)


def every() -> list[Registry]:
    """Every named endpoint, the default first, then in the order they were made."""
    return list(_named.values())


def add_path(path: str, registry: Registry | None) -> None:
    """Record that an ASGI route serves ``registry``'s endpoint (None: the default) at ``path``."""
    _paths["/" + path.strip("/")] = registry


def routed_at(path: str) -> tuple[bool, Registry | None]:
    """(whether an ASGI route serves an endpoint at ``path``, its registry: None for the default)."""
    path = "/" + path.strip("/")
    return path in _paths, _paths.get(path)
