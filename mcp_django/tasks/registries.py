"""Which registry a task's tool is on: the name a task row records, and the registry a worker
finds by that name (a project may serve several endpoints, each with a registry of its own).

- The default registry (``mcp_django.mcp``) is recorded as ``""`` (rows made before
  registries were recorded are the default's).
- A registry with a ``name`` is recorded by it.
- Any other is recorded by where it is defined, ``"module:attribute"`` (a module-level
  registry), or, defined elsewhere (in a function), by its identity in this process only: a
  worker in another process cannot find it and fails the task saying so.

A worker finds a registry among the ones this process has served tasks for, else by
importing ``"module:attribute"``, else among the module-level registries of the modules it
has imported (an app's ``mcp.py`` is imported at startup, and the URLconf first, where
endpoints are routed).
"""

from __future__ import annotations

import sys
import threading
import weakref
from importlib import import_module
from typing import Any

from ..registry import Registry, mcp

DEFAULT = ""

_lock = threading.Lock()
# name -> registry: every registry this process recorded or found.
_known: weakref.WeakValueDictionary[str, Registry] = weakref.WeakValueDictionary()
# registry -> name, so a registry's name is worked out once per process.
_names: weakref.WeakKeyDictionary[Registry, str] = weakref.WeakKeyDictionary()


def _own_name(registry: Registry) -> str | None:
    name = getattr(registry, "name", None)
    return name if isinstance(name, str) and name else None


def _module_level() -> dict[str, Registry]:
    """Every registry bound to a module-level name, by ``"module:attribute"``."""
    found: dict[str, Registry] = {}
    for module_name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attribute, value in list(namespace.items()):
            if isinstance(value, Registry) and value is not mcp:
                found.setdefault(f"{module_name}:{attribute}", value)
    return found


def name_of(registry: Registry) -> str:
    """The name a task of ``registry`` records (and remembers it for this process's runs)."""
    if registry is mcp:
        return DEFAULT
    name = _names.get(registry)
    if name is not None:
        return name
    name = _own_name(registry)
    if name is None:
        # Where it is defined: the first module-level binding (sorted, so every process picks the same).
        located = sorted(key for key, value in _module_level().items() if value is registry)
        name = located[0] if located else f"registry-{id(registry):x}"
    with _lock:
        _names[registry] = name
        _known[name] = registry
    return name


def named(name: str) -> Registry | None:
    """The registry a task recorded as ``name``, or None when this process has none by it."""
    if name == DEFAULT:
        return mcp
    found = _known.get(name)
    if found is not None:
        return found
    found = _find(name)
    if found is not None:
        with _lock:
            _known[name] = found
            _names.setdefault(found, name)
    return found


def _find(name: str) -> Registry | None:
    module_name, colon, attribute = name.partition(":")
    if colon:
        try:
            value: Any = getattr(import_module(module_name), attribute, None)
        except ImportError:
            return None
        return value if isinstance(value, Registry) else None
    if name.startswith("registry-"):
        return None  # another process's registry, defined where no other process can find it
    _load_urlconf()
    for registry in _module_level().values():
        if _own_name(registry) == name:
            return registry
    return None


def _load_urlconf() -> None:
    # The URLconf is where endpoints are routed, so where registries are often made; a
    # worker process has not imported it (a server process has, by its first request).
    from django.conf import settings

    urlconf = getattr(settings, "ROOT_URLCONF", None)
    if isinstance(urlconf, str):
        try:
            import_module(urlconf)
        except Exception:  # a URLconf that cannot load here: the registries already loaded are searched
            return


__all__ = ["DEFAULT", "name_of", "named"]
