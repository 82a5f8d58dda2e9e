"""The handlers one endpoint serves, and the decorators that register them."""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, ValuesView
from typing import Any, ClassVar, ParamSpec, TypeVar, overload

from django.core.exceptions import ImproperlyConfigured

from . import endpoints as endpoint_table
from . import resource_updates
from . import schema as schemas
from .completion import completers
from .conf import EndpointSettings, endpoint_name_problem, mcp_settings
from .handlers import (
    Func,
    Handler,
    Prompt,
    Resource,
    ResourceTemplate,
    Tool,
    dotted_name,
    find_context_param,
    is_template,
)
from .icons import IconSpec
from .icons import icons as checked_icons
from .views_as_tools import ViewReference, view_tools

P = ParamSpec("P")
R = TypeVar("R")


def _alias(atomic: bool | str) -> str | None:
    """``atomic=True`` is the default database; a string names another alias."""
    if atomic is True:
        from django.db import DEFAULT_DB_ALIAS

        return DEFAULT_DB_ALIAS
    return atomic or None


def _describe(func: Func, description: str | None) -> str:
    if description is not None:
        return description
    return schemas.first_paragraph(inspect.getdoc(func))


class ToolTable(Mapping[str, Tool]):
    """A registry's tools by name; views registered by dotted path are built (under a lock) when an
    unknown name, a listing or the length first needs them. One that cannot be built stays waiting (E015)."""

    def __init__(self, duplicates: list[tuple[str, str, str]]) -> None:
        # The tools built so far: a call's lookup reads it directly (a plain dict get).
        self.ready: dict[str, Tool] = {}
        # Registration order of each tool: (n, 0) for a tool, (n, i) for a view's i-th tool.
        self._order: dict[str, tuple[int, int]] = {}
        self._waiting: list[tuple[int, ViewReference]] = []
        self._count = 0
        self._lock = threading.RLock()
        self._duplicates = duplicates

    def add(self, tool: Tool) -> bool:
        """Register ``tool``; False (and a duplicate recorded) when its name is another's already."""
        with self._lock:  # not while a listing builds the views into a copy of the table
            self._count += 1
            return self._place(tool, (self._count, 0), self.ready)

    def defer(self, reference: ViewReference) -> ViewReference:
        with self._lock:
            self._count += 1
            self._waiting.append((self._count, reference))
        reference.table = self
        return reference

    def _place(self, tool: Tool, order: tuple[int, int], tools: dict[str, Tool]) -> bool:
        existing = tools.get(tool.name)
        if existing is None:
            self._order[tool.name] = order
        elif existing.source != tool.source:
            if self._order[tool.name] < order:
                self._duplicates.append((tool.primitive, tool.name, tool.source))
                return False
            self._duplicates.append((existing.primitive, existing.name, existing.source))
            self._order[tool.name] = order
        # The same source again (its module imported twice) keeps its place.
        tools[tool.name] = tool
        return True

    @property
    def waiting(self) -> bool:
        """Whether views registered by dotted path are still to be built."""
        return bool(self._waiting)

    def resolve(self, *, strict: bool = True) -> list[ImproperlyConfigured]:
        """Build every waiting view's tools. Strict: raise the first failure; else return the failures."""
        if not self._waiting:
            return []
        with self._lock:
            failures: list[ImproperlyConfigured] = []
            still: list[tuple[int, ViewReference]] = []
            # Built aside and swapped in whole, not to disturb a listing iterating the table.
            table = dict(self.ready)
            for number, reference in self._waiting:
                try:
                    made = reference.build()
                except ImproperlyConfigured as exc:
                    failures.append(exc)
                    still.append((number, reference))
                    continue
                reference.tools = made
                for index, tool in enumerate(made, 1):
                    self._place(tool, (number, index), table)
            self.ready = {name: table[name] for name in sorted(table, key=self._order.__getitem__)}
            self._waiting = still
        if failures and strict:
            raise failures[0]
        return failures

    def __getitem__(self, name: str) -> Tool:
        # get() and "in" come here: a name not built yet builds the waiting views first.
        tool = self.ready.get(name)
        if tool is None and self._waiting:
            self.resolve()
            tool = self.ready.get(name)
        if tool is None:
            raise KeyError(name)
        return tool

    def pop(self, name: str, default: Any = None) -> Any:
        """Unregister the tool ``name`` (:meth:`Registry.remove`)."""
        self.resolve()
        with self._lock:
            self._order.pop(name, None)
            return self.ready.pop(name, default)

    def __iter__(self) -> Iterator[str]:
        self.resolve()
        return iter(self.ready)

    def __len__(self) -> int:
        self.resolve()
        return len(self.ready)

    def values(self) -> ValuesView[Tool]:
        # The built dict's own view: a listing reads every tool without a lookup each.
        self.resolve()
        return self.ready.values()

    def __repr__(self) -> str:
        waiting = f", waiting for {[ref.path for _, ref in self._waiting]}" if self._waiting else ""
        return f"<ToolTable {list(self.ready)}{waiting}>"


class Registry:
    """The handlers one MCP endpoint serves: ``mcp_django.mcp`` is the default one, ``Registry("staff")``
    another, its settings by its name (docs/endpoints.md)."""

    # Whether any registry has a handler with throttle= (the limits stage joins the chains then).
    any_throttled: ClassVar[bool] = False

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            problem = endpoint_name_problem(name)
            if problem is not None:
                raise ImproperlyConfigured(f"Registry({name!r}): {problem}")
            if registry_named(name) is not None:
                raise ImproperlyConfigured(
                    f"Registry({name!r}): an endpoint of that name exists already; each endpoint's name is its own"
                )
        self.name: str = name or endpoint_table.DEFAULT
        self.settings: EndpointSettings = mcp_settings.endpoint(self.name)
        if name is not None:
            endpoint_table.add(self)
        # (primitive, name, source) of registrations that reused a taken name (E006).
        self.duplicates: list[tuple[str, str, str]] = []
        self.tools = ToolTable(self.duplicates)
        self.prompts: dict[str, Prompt] = {}
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, ResourceTemplate] = {}
        # Called with "tools", "prompts" or "resources" when a list changes after startup, each
        # on the event loop it subscribed on (a list may change on any thread: a sync handler's).
        self._listeners: dict[Callable[[str], None], asyncio.AbstractEventLoop] = {}
        # The HTTP endpoint serving this registry (legacy_http.endpoint_for), built on first use.
        self.endpoint: Any = None
        # Whether a handler here has its own throttle= (counted even without MCP_DJANGO["LIMITS"]).
        self.throttled = False

    # -- change notification ----------------------------------------------------

    def subscribe(self, listener: Callable[[str], None]) -> None:
        self._listeners[listener] = asyncio.get_running_loop()

    def unsubscribe(self, listener: Callable[[str], None]) -> None:
        self._listeners.pop(listener, None)

    def changed(self, listing: str) -> None:
        """Tell listeners (subscriptions/listen streams) that a list changed: "tools", "prompts" or "resources"."""
        for listener, loop in list(self._listeners.items()):
            loop.call_soon_threadsafe(listener, listing)

    def resource_updated(self, uri: str) -> None:
        """Tell the clients subscribed to ``uri`` that it changed (``notifications/resources/updated``),
        from any thread, without waiting; every worker hears it through the Channels layer."""
        resource_updates.announce_soon(uri)

    async def aresource_updated(self, uri: str) -> None:
        """:meth:`resource_updated`, returning once the update is on its way to every worker."""
        await resource_updates.announce(uri)

    def remove(self, listing: str, key: str) -> Handler | None:
        """Unregister a tool, prompt, resource or template (by name, or URI for resources) from
        ``listing``: "tools", "prompts", "resources" or "templates"."""
        removed = getattr(self, listing).pop(key, None)
        if removed is not None:
            self.changed("resources" if listing == "templates" else listing)
        return removed

    # -- registration ---------------------------------------------------------

    def _add(self, table: dict[str, Any], item: Handler, key: str) -> None:
        if key in table and table[key].source != item.source:
            self.duplicates.append((item.primitive, key, item.source))
        else:
            table[key] = item
            self._added(item)

    def _added(self, item: Handler) -> None:
        if item.throttle is not None:
            self.throttled = True
            if not Registry.any_throttled:
                # The first throttle= anywhere: the chains built without the limits stage get it.
                Registry.any_throttled = True
                pipeline = sys.modules.get("mcp_django.pipeline")
                if pipeline is not None:
                    pipeline.rebuild_all()
        if self._listeners:
            self.changed({"tool": "tools", "prompt": "prompts"}.get(item.primitive, "resources"))

    def add_tool(self, tool: Tool) -> Tool:
        if self.tools.add(tool):  # else a duplicate, recorded
            self._added(tool)
        return tool

    @overload
    def tool(self, name: Callable[P, R], /) -> Callable[P, R]: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        permissions: Iterable[str] = (),
        permission_classes: Iterable[Any] = (),
        allow_anonymous: bool | None = None,
        scopes: Iterable[str] = (),
        meta: dict[str, Any] | None = None,
        atomic: bool | str = False,
        icons: Iterable[IconSpec] = (),
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        task: str | None = None,
        input_first: bool = False,
        throttle: str | None = None,
        retries: int | None = None,
        **options: Any,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    def tool(
        self,
        name: str | Func | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        permissions: Iterable[str] = (),
        permission_classes: Iterable[Any] = (),
        allow_anonymous: bool | None = None,
        scopes: Iterable[str] = (),
        meta: dict[str, Any] | None = None,
        atomic: bool | str = False,
        icons: Iterable[IconSpec] = (),
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        task: str | None = None,
        input_first: bool = False,
        throttle: str | None = None,
        retries: int | None = None,
        **options: Any,
    ) -> Any:
        """Register a sync or async function as a tool: ``@mcp.tool()`` or ``@mcp.tool``; the function
        is returned unchanged. The options: docs/index.md (``task``, ``input_first``, ``retries``:
        docs/tasks.md; ``throttle``: docs/limits.md); other keywords are the extensions' (docs/apps.md)."""
        if callable(name):  # @mcp.tool, without parentheses
            return self.tool()(name)
        _check_name("tool", name)
        declared_by = f"tool {name!r}" if name else "a tool"
        # The keyword hints as MCP names them, over any annotations={...}.
        hints = dict(annotations or {})
        for keyword, hint, value in (
            ("read_only", "readOnlyHint", read_only),
            ("destructive", "destructiveHint", destructive),
            ("idempotent", "idempotentHint", idempotent),
            ("open_world", "openWorldHint", open_world),
        ):
            if value is None:
                continue
            if not isinstance(value, bool):
                raise TypeError(f"{declared_by}: {keyword}= takes True or False, not {value!r}")
            hints[hint] = value
        if hints.get("readOnlyHint") and (hints.get("destructiveHint") or hints.get("idempotentHint") is False):
            # The specification gives destructive and idempotent meaning only for tools that write.
            raise TypeError(f"{declared_by}: a read_only tool cannot be destructive or non-idempotent")
        if hints and title and "title" not in hints:
            hints["title"] = title  # where 2025-03-26 clients read it
        declared_icons = checked_icons(icons, declared_by)
        extra: dict[str, Any] = {}
        if options:
            # Deferred: the extensions' module reaches auth's models, before apps are ready.
            from .extensions import tool_options

            extra = tool_options(options, declared_by)

        def decorator(func: Func) -> Func:
            ctx_param = find_context_param(func)
            sig = inspect.signature(func)
            takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
            accepts = None if takes_any else frozenset(n for n in sig.parameters if n != ctx_param)
            owner = f"tool {name or func.__name__!r} ({dotted_name(func)})"
            parameters = None
            if not input_schema:
                parameters = schemas.Parameters(func, skip={ctx_param} if ctx_param else set(), owner=owner)
            self.add_tool(
                Tool(
                    name=name or func.__name__,
                    func=func,
                    description=_describe(func, description),
                    title=title,
                    input_schema=input_schema or parameters.schema,  # type: ignore[union-attr]
                    parameters=parameters,
                    output_schema=output_schema if output_schema is not None else schemas.output_schema(func, owner),
                    annotations=hints or None,
                    icons=declared_icons,
                    permissions=tuple(permissions),
                    permission_classes=tuple(permission_classes),
                    allow_anonymous=allow_anonymous,
                    scopes=tuple(scopes),
                    meta=meta,
                    context_param=ctx_param,
                    atomic=_alias(atomic),
                    accepts=accepts,
                    task=task,
                    input_first=input_first,
                    throttle=throttle,
                    retries=retries,
                    options=extra,
                )
            )
            return func

        return decorator

    @overload
    def prompt(self, name: Callable[P, R], /) -> Callable[P, R]: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        permissions: Iterable[str] = (),
        permission_classes: Iterable[Any] = (),
        allow_anonymous: bool | None = None,
        scopes: Iterable[str] = (),
        completions: dict[str, Any] | None = None,
        atomic: bool | str = False,
        icons: Iterable[IconSpec] = (),
        throttle: str | None = None,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    def prompt(
        self,
        name: str | Func | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        permissions: Iterable[str] = (),
        permission_classes: Iterable[Any] = (),
        allow_anonymous: bool | None = None,
        scopes: Iterable[str] = (),
        completions: dict[str, Any] | None = None,
        atomic: bool | str = False,
        icons: Iterable[IconSpec] = (),
        throttle: str | None = None,
    ) -> Any:
        """Register a function returning a string, a message or a list of messages:
        ``@mcp.prompt()`` or ``@mcp.prompt`` (``completions``: docs/index.md)."""
        if callable(name):  # @mcp.prompt, without parentheses
            return self.prompt()(name)
        _check_name("prompt", name)
        owner = f"prompt {name!r}" if name else "a prompt"
        declared_icons = checked_icons(icons, owner)
        declared_completions = completers(completions, owner)

        def decorator(func: Func) -> Func:
            ctx_param = find_context_param(func)
            owner = f"prompt {name or func.__name__!r} ({dotted_name(func)})"
            parameters = schemas.Parameters(func, skip={ctx_param} if ctx_param else set(), owner=owner)
            params = parameters.schema
            required = set(params.get("required", []))
            arguments = []
            for arg, arg_schema in params["properties"].items():
                entry: dict[str, Any] = {"name": arg, "required": arg in required}
                if arg_schema.get("description"):
                    entry["description"] = arg_schema["description"]
                arguments.append(entry)
            item = Prompt(
                name=name or func.__name__,
                func=func,
                description=_describe(func, description),
                title=title,
                arguments=arguments,
                completions=declared_completions,
                icons=declared_icons,
                permissions=tuple(permissions),
                permission_classes=tuple(permission_classes),
                allow_anonymous=allow_anonymous,
                scopes=tuple(scopes),
                context_param=ctx_param,
                parameters=parameters,
                atomic=_alias(atomic),
                throttle=throttle,
            )
            self._add(self.prompts, item, item.name)
            return func

        return decorator

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        permissions: Iterable[str] = (),
        permission_classes: Iterable[Any] = (),
        allow_anonymous: bool | None = None,
        scopes: Iterable[str] = (),
        completions: dict[str, Any] | None = None,
        atomic: bool | str = False,
        icons: Iterable[IconSpec] = (),
        throttle: str | None = None,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Register a resource; a URI with ``{placeholders}`` registers a template
        (``atomic``, ``icons``: as for tools; ``completions``: as for prompts)."""
        if not isinstance(uri, str):
            raise TypeError(
                "@mcp.resource needs the resource's URI: write @mcp.resource('app://...'), "
                f"not @mcp.resource (it was given {uri!r})"
            )
        declared_icons = checked_icons(icons, f"resource {uri!r}")
        declared_completions = completers(completions, f"resource template {uri!r}")

        def decorator(func: Func) -> Func:
            common: dict[str, Any] = dict(
                name=name or func.__name__,
                func=func,
                description=_describe(func, description),
                title=title,
                mime_type=mime_type,
                permissions=tuple(permissions),
                permission_classes=tuple(permission_classes),
                allow_anonymous=allow_anonymous,
                scopes=tuple(scopes),
                atomic=_alias(atomic),
                icons=declared_icons,
                throttle=throttle,
            )
            if is_template(uri):
                item = ResourceTemplate(uri_template=uri, completions=declared_completions, **common)
                self._add(self.templates, item, uri)
            else:
                self._add(self.resources, Resource(uri=uri, **common), uri)
            return func

        return decorator

    def register_view(self, view: Any, **options: Any) -> Sequence[Tool]:
        """Serve an existing Django or DRF view (or its dotted path, imported when first needed) as
        tools; returns the tools it made (docs/views.md)."""
        if isinstance(view, str):
            return self.tools.defer(ViewReference(view, options))
        return [self.add_tool(tool) for tool in view_tools(view, **options)]

    # -- lookup ---------------------------------------------------------------

    def find_resource(self, uri: str) -> tuple[Handler, dict[str, str]] | None:
        resource = self.resources.get(uri)
        if resource is not None:
            return resource, {}
        for template in self.templates.values():
            params = template.match(uri)
            if params is not None:
                return template, params
        return None

    def handler_for(self, method: str, target: str | None) -> Handler | None:
        """The handler a ``tools/call``, ``prompts/get`` or ``resources/read`` of ``target`` names, if any."""
        if not target:
            return None
        if method == "tools/call":
            return self.tools.get(target)
        if method == "prompts/get":
            return self.prompts.get(target)
        found = self.find_resource(target) if method == "resources/read" else None
        return found[0] if found is not None else None

    def all_handlers(self) -> list[Handler]:
        return [*self.tools.values(), *self.prompts.values(), *self.resources.values(), *self.templates.values()]


def _check_name(primitive: str, name: Any) -> None:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"@mcp.{primitive}(name) takes the {primitive}'s name as a string, not {name!r}")


registry_named = endpoint_table.named
endpoints = endpoint_table.every
mcp = Registry(endpoint_table.DEFAULT)
