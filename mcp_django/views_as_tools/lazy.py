"""A view registered by its dotted path: imported, and its tools built, when they are first needed.

A process that never lists or calls them need not import the view's module and DRF with it.
Registration checks what it can without the import (the path, the module, the options' names);
the rest fails at ``manage.py check`` (E015) or at the first listing or call.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .tools import ViewTool, view_tools

_OPTIONS = frozenset(inspect.signature(view_tools).parameters) - {"view"}


class ViewReference:
    """A view by dotted path and the options of ``register_view``; :meth:`build` makes its tools."""

    def __init__(self, path: str, options: Mapping[str, Any]) -> None:
        module = path.rpartition(".")[0]
        if not module or not all(part.isidentifier() for part in path.split(".")):
            raise ImproperlyConfigured(f"register_view({path!r}): not a dotted path to a view (module.attribute)")
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(f"register_view({path!r}) got unexpected option(s) {', '.join(unknown)}")
        try:
            # Finds the module without running it (its parent packages are imported).
            found = importlib.util.find_spec(module)
        except ImportError:
            found = None
        if found is None:
            raise ImproperlyConfigured(f"register_view({path!r}): there is no module {module!r}")
        self.path = path
        self.options = dict(options)
        # What build() made, once the registry has built it.
        self.tools: list[ViewTool] | None = None

    def build(self) -> list[ViewTool]:
        """Import the view and make its tools; any failure is an ``ImproperlyConfigured`` naming the path."""
        try:
            view = import_string(self.path)
            return view_tools(view, **self.options)
        except Exception as exc:
            raise ImproperlyConfigured(f"register_view({self.path!r}): {exc}") from exc

    def __repr__(self) -> str:
        return f"<ViewReference {self.path}>"
