"""The project's MCP endpoints by name, and the paths ASGI routes serve them at.

Low in the layers, so that the metadata, checks, task runner and admin find an endpoint
without importing the registry or a transport.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .registry import Registry

DEFAULT = "default"

_named: dict[str, Registry] = {}
# Paths the ASGI routes serve an endpoint at ("/mcp") -> its registry (None: the default one's).
paths: dict[str, Registry | None] = {}


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
    paths["/" + path.strip("/")] = registry
