"""Tools, prompts and resources registered in code, and the decorators that register them."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar, get_type_hints, overload

from . import schema as schemas
from .protected_resource import scopes_granted

TOOL_NAME_MAX = 64
# What a handler can be (Handler.primitive): MCP's server primitives, a resource template apart.
PRIMITIVES = ("tool", "prompt", "resource", "template")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_TEMPLATE_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

Func = Callable[..., Any]
P = ParamSpec("P")
R = TypeVar("R")
# What ``@mcp.tool()`` and ``@mcp.prompt()`` return: the function, its signature intact.
Decorator = Callable[[Callable[P, R]], Callable[P, R]]


def _is_context_annotation(annotation: Any) -> bool:
    from .asks.context import Context

    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] in ("Context", "SyncContext", "AsyncContext")
    return isinstance(annotation, type) and issubclass(annotation, Context)


def _context_param(func: Func) -> str | None:
    try:
        hints = get_type_hints(func)
    except Exception:
        hints = {}
    for name, param in inspect.signature(func).parameters.items():
        annotation = hints.get(name, param.annotation)
        if name == "ctx" or _is_context_annotation(annotation):
            return name
    return None


@functools.lru_cache(maxsize=1024)
def completer_info(func: Func) -> tuple[str | None, bool]:
    """(the name of its context parameter or None, whether it is async) for a completer.

    A completer is called as ``completer(value)``, or ``completer(value, ctx=ctx)``
    when it takes a context (a parameter named ``ctx`` or annotated ``Context``):
    ``ctx.user`` lets it filter by the caller. A sync completer runs in the worker
    pool (it may use the ORM), an async one on the event loop.
    """
    return _context_param(func), inspect.iscoroutinefunction(func)


def _dotted(func: Any) -> str:
    target = getattr(func, "view_class", None) or getattr(func, "cls", None) or func
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def _alias(atomic: bool | str) -> str | None:
    """``atomic=True`` is the default database; a string names another alias."""
    if atomic is True:
        from django.db import DEFAULT_DB_ALIAS

        return DEFAULT_DB_ALIAS
    return atomic or None


def _describe(func: Func, description: str | None) -> str:
    if description is not None:
        return description
    doc = inspect.getdoc(func) or ""
    return doc.split("\n\n", 1)[0].strip()


@dataclass(eq=False)
class Handler:
    """What every registered handler shares."""

    name: str
    func: Func
    description: str = ""
    title: str | None = None
    permissions: tuple[str, ...] = ()
    permission_classes: tuple[Any, ...] = ()
    allow_anonymous: bool | None = None
    # OAuth scopes an access token must carry to use this handler (see protected_resource).
    scopes: tuple[str, ...] = ()
    meta: dict[str, Any] | None = None
    source: str = ""
    context_param: str | None = None
    is_async: bool = False
    # Which of MCP's server primitives this is: "tool", "prompt", "resource" or
    # "template" (a resource template), as logs, signals and the admin name it.
    primitive: str = "handler"
    # The database alias whose transaction wraps each attempt of a sync handler
    # (``atomic=True``: the default one); an attempt ending with input_required rolls back.
    atomic: str | None = None

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.func)
        if self.atomic and self.is_async:
            raise TypeError(
                f"{self.primitive} {self.name!r}: atomic= needs a sync handler (an async handler's queries "
                "run in other threads, outside any one transaction)"
            )
        if self.context_param is None:
            self.context_param = _context_param(self.func)
        if not self.source:
            self.source = _dotted(self.func)

    @property
    def guarded(self) -> bool:
        return bool(self.permissions or self.permission_classes or self.scopes)

    def scopes_granted(self, auth: Any) -> bool:
        """Whether the credential ``auth`` carries this handler's OAuth scopes (cheap: no database)."""
        return not self.scopes or scopes_granted(auth, self.scopes)

    def has_permission(self, user: Any, request: Any) -> bool:
        """Sync: permission checks may query the database."""
        if not self.scopes_granted(getattr(request, "auth", None)):
            return False
        if self.permissions and not user.has_perms(self.permissions):
            return False
        for cls in self.permission_classes:
            if not cls().has_permission(request, self):
                return False
        return True

    def kwargs(self, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        kwargs = dict(arguments)
        if self.context_param:
            kwargs[self.context_param] = ctx
        return kwargs

    def descriptor(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(eq=False)
class Tool(Handler):
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    # Names of the parameters the handler accepts from arguments; None: it takes **kwargs.
    accepts: frozenset[str] | None = None
    primitive: str = "tool"
    # Validates a call's arguments and converts them into what the handler takes
    # (schemas.Parameters from the signature; by default, a check against input_schema).
    parameters: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.parameters is None:
            self.parameters = schemas.SchemaArguments(self.input_schema, self.accepts, owner=f"tool {self.name!r}")

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.title:
            out["title"] = self.title
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        if self.meta:
            out["_meta"] = self.meta
        return out


@dataclass(eq=False)
class Prompt(Handler):
    arguments: list[dict[str, Any]] = field(default_factory=list)
    completions: dict[str, Func] = field(default_factory=dict)
    primitive: str = "prompt"
    # Converts the (string) arguments into the parameters' declared types.
    parameters: Any = None

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "arguments": self.arguments}
        if self.title:
            out["title"] = self.title
        return out


@dataclass(eq=False)
class Resource(Handler):
    uri: str = ""
    mime_type: str | None = None
    primitive: str = "resource"

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name}
        for key, value in (("title", self.title), ("description", self.description), ("mimeType", self.mime_type)):
            if value:
                out[key] = value
        return out


@dataclass(eq=False)
class ResourceTemplate(Handler):
    uri_template: str = ""
    mime_type: str | None = None
    completions: dict[str, Func] = field(default_factory=dict)
    primitive: str = "template"
    pattern: re.Pattern[str] | None = None
    # Converts the URI's variables (strings) into the parameters' declared types.
    parameters: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.parameters is None:
            owner = f"resource template {self.uri_template!r} ({self.source})"
            self.parameters = schemas.Parameters(self.func, skip={self.context_param or ""}, owner=owner)
        parts = _TEMPLATE_VAR.split(self.uri_template)
        regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(parts))
        self.pattern = re.compile(f"^{regex}$")

    def match(self, uri: str) -> dict[str, str] | None:
        assert self.pattern is not None
        m = self.pattern.match(uri)
        return m.groupdict() if m else None

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        for key, value in (("title", self.title), ("description", self.description), ("mimeType", self.mime_type)):
            if value:
                out[key] = value
        return out


class Registry:
    """The handlers one MCP endpoint serves. ``mcp_django.mcp`` is the default one."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.prompts: dict[str, Prompt] = {}
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, ResourceTemplate] = {}
        # (primitive, name, source) of registrations that reused a taken name; a system check reports them.
        self.duplicates: list[tuple[str, str, str]] = []
        # Called with "tools", "prompts" or "resources" when a list changes after startup.
        self._listeners: set[Callable[[str], None]] = set()

    # -- change notification ----------------------------------------------------

    def subscribe(self, listener: Callable[[str], None]) -> None:
        self._listeners.add(listener)

    def unsubscribe(self, listener: Callable[[str], None]) -> None:
        self._listeners.discard(listener)

    def changed(self, listing: str) -> None:
        """Tell listeners (subscriptions/listen streams) that a list changed: "tools", "prompts" or "resources"."""
        for listener in list(self._listeners):
            listener(listing)

    def resource_updated(self, uri: str) -> None:
        """Tell the clients subscribed to ``uri`` that it changed (``notifications/resources/updated``).

        Callable from sync or async code, on any thread; it returns without waiting.
        Every worker process hears it through the Channels layer and tells its legacy
        sessions that subscribed (``resources/subscribe``) and its 2026-07-28
        ``subscriptions/listen`` streams listing ``uri`` in ``resourceSubscriptions``.
        URIs are matched exactly, across every registry of the process.
        """
        from .transports.relay import announce_soon

        announce_soon(uri)

    async def aresource_updated(self, uri: str) -> None:
        """:meth:`resource_updated`, returning once the update is on its way to every worker."""
        from .transports.relay import announce

        await announce(uri)

    def remove(self, listing: str, key: str) -> Handler | None:
        """Unregister a tool, prompt, resource or template (by name, or URI for resources).

        ``listing`` names the list it is on: "tools", "prompts", "resources" or "templates".
        """
        tables: dict[str, dict[str, Any]] = {
            "tools": self.tools,
            "prompts": self.prompts,
            "resources": self.resources,
            "templates": self.templates,
        }
        removed = tables[listing].pop(key, None)
        if removed is not None:
            self.changed("resources" if listing == "templates" else listing)
        return removed

    # -- registration ---------------------------------------------------------

    def _add(self, table: dict[str, Any], item: Handler, key: str) -> None:
        if key in table and table[key].source != item.source:
            self.duplicates.append((item.primitive, key, item.source))
            return
        table[key] = item
        if self._listeners:
            self.changed({"tool": "tools", "prompt": "prompts"}.get(item.primitive, "resources"))

    def add_tool(self, tool: Tool) -> Tool:
        self._add(self.tools, tool, tool.name)
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
    ) -> Any:
        """Register a sync or async function as a tool: ``@mcp.tool()`` or ``@mcp.tool``.

        The input schema comes from the signature (``ctx`` excluded) unless given, and
        arguments are converted into the annotated types; the output schema comes from
        a return annotation that is an object type (dataclass, TypedDict, serializer,
        model) unless given. An annotation with no JSON schema raises
        ``ImproperlyConfigured`` here, naming the tool and the parameter.
        ``atomic=True`` (or a database alias): a sync handler's every attempt runs in
        ``transaction.atomic()``, rolled back when it ends with ``input_required``.
        The function is returned unchanged (its signature intact for type checkers).
        """
        if callable(name):  # @mcp.tool, without parentheses
            return self.tool()(name)
        _check_name("tool", name)

        def decorator(func: Func) -> Func:
            ctx_param = _context_param(func)
            sig = inspect.signature(func)
            takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
            accepts = None if takes_any else frozenset(n for n in sig.parameters if n != ctx_param)
            owner = f"tool {name or func.__name__!r} ({_dotted(func)})"
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
                    annotations=annotations,
                    permissions=tuple(permissions),
                    permission_classes=tuple(permission_classes),
                    allow_anonymous=allow_anonymous,
                    scopes=tuple(scopes),
                    meta=meta,
                    context_param=ctx_param,
                    atomic=_alias(atomic),
                    accepts=accepts,
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
        completions: dict[str, Func] | None = None,
        atomic: bool | str = False,
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
        completions: dict[str, Func] | None = None,
        atomic: bool | str = False,
    ) -> Any:
        """Register a function returning a string, a message or a list of messages:
        ``@mcp.prompt()`` or ``@mcp.prompt`` (``atomic``: as for tools)."""
        if callable(name):  # @mcp.prompt, without parentheses
            return self.prompt()(name)
        _check_name("prompt", name)

        def decorator(func: Func) -> Func:
            ctx_param = _context_param(func)
            owner = f"prompt {name or func.__name__!r} ({_dotted(func)})"
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
                completions=dict(completions or {}),
                permissions=tuple(permissions),
                permission_classes=tuple(permission_classes),
                allow_anonymous=allow_anonymous,
                scopes=tuple(scopes),
                context_param=ctx_param,
                parameters=parameters,
                atomic=_alias(atomic),
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
        completions: dict[str, Func] | None = None,
        atomic: bool | str = False,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Register a resource; a URI with ``{placeholders}`` registers a template (``atomic``: as for tools)."""
        if not isinstance(uri, str):
            raise TypeError(
                "@mcp.resource needs the resource's URI: write @mcp.resource('app://...'), "
                f"not @mcp.resource (it was given {uri!r})"
            )

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
            )
            if _TEMPLATE_VAR.search(uri):
                item = ResourceTemplate(uri_template=uri, completions=dict(completions or {}), **common)
                self._add(self.templates, item, uri)
            else:
                self._add(self.resources, Resource(uri=uri, **common), uri)
            return func

        return decorator

    def register_view(self, view: Any, **options: Any) -> list[Tool]:
        """Serve an existing Django or DRF view as tools; returns the tools it made.

        A viewset gives one tool per action (``orders_list``, ``orders_create``, ... and its
        ``@action`` methods); an ``APIView`` or generic view one per HTTP method; a plain
        Django view needs ``input_schema=``. Options: ``actions``, ``methods``, ``name`` /
        ``names``, ``basename``, ``description`` / ``descriptions``, ``input_schema`` /
        ``input_schemas``, ``output_schema``, ``path_params``, ``permissions``,
        ``permission_classes``, ``allow_anonymous``, ``scopes``, ``initkwargs``, ``body`` ("json" or
        "form"). See :mod:`mcp_django.views_as_tools` and docs/views.md.
        """
        from .views_as_tools import view_tools

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

    def all_handlers(self) -> list[Handler]:
        return [*self.tools.values(), *self.prompts.values(), *self.resources.values(), *self.templates.values()]

    @property
    def guarded(self) -> bool:
        return any(h.guarded for h in self.all_handlers())


def _check_name(primitive: str, name: Any) -> None:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"@mcp.{primitive}(name) takes the {primitive}'s name as a string, not {name!r}")


def name_problems(registry: Registry) -> list[str]:
    """Tool names that clients refuse."""
    out = []
    for tool in registry.tools.values():
        if len(tool.name) > TOOL_NAME_MAX:
            out.append(f"tool name {tool.name!r} is longer than {TOOL_NAME_MAX} characters")
        elif not _NAME_RE.match(tool.name):
            out.append(f"tool name {tool.name!r} may use only letters, digits, '_', '-' and '.'")
    return out


mcp = Registry()
