"""What a registered handler is: a tool, a prompt, a resource or a resource template.

Built by :mod:`mcp_django.registry` and :mod:`mcp_django.views_as_tools`; depends on neither.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from django.core.exceptions import ImproperlyConfigured

from . import schema as schemas
from .icons import Icon, IconBase
from .schema.types import dotted_name

TOOL_NAME_MAX = 64
# What a handler can be (Handler.primitive): MCP's server primitives, a resource template apart.
PRIMITIVES = ("tool", "prompt", "resource", "template")
_TEMPLATE_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

Func = Callable[..., Any]


def _is_context_annotation(annotation: Any) -> bool:
    # Deferred: asks.context reaches django.contrib.auth's models, before apps are ready.
    from .asks.context import Context

    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] in ("Context", "SyncContext", "AsyncContext")
    return isinstance(annotation, type) and issubclass(annotation, Context)


def find_context_param(func: Func) -> str | None:
    """The parameter that receives the context: one named ``ctx`` or annotated ``Context``."""
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
    """(its context parameter or None, whether it is async) for a completer, called as
    ``completer(value)`` or ``completer(value, ctx=ctx)``."""
    return find_context_param(func), inspect.iscoroutinefunction(func)


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
    # Checked at registration (mcp_django.icons); their URLs are resolved on first use.
    icons: tuple[Icon, ...] = ()
    source: str = ""
    context_param: str | None = None
    is_async: bool = False
    # One of PRIMITIVES, as logs, signals and the admin name it.
    primitive: str = "handler"
    # The database alias whose transaction wraps each attempt of a sync handler.
    atomic: str | None = None
    # The extensions' decorator options (mcp_django.extensions.add_tool_option), by name.
    options: dict[str, Any] = field(default_factory=dict)
    # Its own rate per user ("10/min", docs/limits.md).
    throttle: str | None = None
    # Whether it has checks beyond anonymous callers: a field, not a property, as every call reads it.
    guarded: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.func)
        self.guarded = bool(self.permissions or self.permission_classes or self.scopes)
        if self.throttle is not None:
            from .limits.rates import parse  # deferred: DRF's throttling loads with the first throttle=

            try:
                parse(self.throttle)
            except ValueError as exc:
                raise ImproperlyConfigured(f"{self.primitive} {self.name!r}: throttle= {exc}") from None
        if self.atomic and self.is_async:
            raise TypeError(
                f"{self.primitive} {self.name!r}: atomic= needs a sync handler (an async handler's queries "
                "run in other threads, outside any one transaction)"
            )
        if self.context_param is None:
            self.context_param = find_context_param(self.func)
        if not self.source:
            self.source = dotted_name(self.func)

    def scopes_granted(self, auth: Any) -> bool:
        """Whether the credential ``auth`` carries this handler's scopes (no database).

        Only a credential with ``allow_scopes`` (an OAuth or MCP token) is limited by scopes.
        """
        if not self.scopes or not hasattr(auth, "allow_scopes"):
            return True
        return bool(auth.allow_scopes(list(self.scopes)))

    def has_permission(self, user: Any, request: Any) -> bool:
        """Sync: permission checks may query the database."""
        if not self.scopes_granted(getattr(request, "auth", None)):
            return False
        if self.permissions and not user.has_perms(self.permissions):
            return False
        return self.classes_permit(user, request)

    def classes_permit(self, user: Any, request: Any) -> bool:
        """Whether its ``permission_classes`` let the caller use it."""
        return all(cls().has_permission(request, self) for cls in self.permission_classes)

    def kwargs(self, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        kwargs = dict(arguments)
        if self.context_param:
            kwargs[self.context_param] = ctx
        return kwargs

    def descriptor(self, icons: IconBase | None = None) -> dict[str, Any]:
        """What a listing says of this handler; ``icons``: how to resolve its icons (None: leave them out)."""
        raise NotImplementedError

    def _iconed(self, out: dict[str, Any], icons: IconBase) -> dict[str, Any]:
        # Called only for a handler with icons: the others' listing pays one test.
        described = icons.describe(self.icons)
        if described:
            out["icons"] = described
        return out


@dataclass(eq=False)
class Tool(Handler):
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    # Names of the parameters the handler accepts from arguments; None: it takes **kwargs.
    accepts: frozenset[str] | None = None
    primitive: str = "tool"
    # Validates and converts a call's arguments (schemas.Parameters, or a check against input_schema).
    parameters: Any = None
    # MCP tasks (docs/tasks.md): None, "optional" or "required"; retries None: TASK_RETRIES.
    task: str | None = None
    input_first: bool = False
    retries: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.task not in (None, "optional", "required"):
            raise TypeError(f"tool {self.name!r}: task= must be None, 'optional' or 'required', not {self.task!r}")
        if self.retries is not None and (
            not isinstance(self.retries, int) or isinstance(self.retries, bool) or self.retries < 0
        ):
            raise TypeError(f"tool {self.name!r}: retries= must be a whole number 0 or more, not {self.retries!r}")
        if self.parameters is None:
            self.parameters = schemas.SchemaArguments(self.input_schema, self.accepts, owner=f"tool {self.name!r}")

    @functools.cached_property
    def mirrors_headers(self) -> bool:
        """Whether an argument is mirrored into an ``Mcp-Param-*`` header: read by every 2026-07-28 HTTP call."""
        properties = self.input_schema.get("properties")
        return isinstance(properties, dict) and any(
            isinstance(prop, dict) and "x-mcp-header" in prop for prop in properties.values()
        )

    def descriptor(self, icons: IconBase | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.title:
            out["title"] = self.title
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        if self.meta:
            out["_meta"] = self.meta
        return self._iconed(out, icons) if self.icons and icons is not None else out


@dataclass(eq=False)
class Prompt(Handler):
    arguments: list[dict[str, Any]] = field(default_factory=list)
    completions: dict[str, Func] = field(default_factory=dict)
    primitive: str = "prompt"
    # Converts the (string) arguments into the parameters' declared types.
    parameters: Any = None

    def descriptor(self, icons: IconBase | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "arguments": self.arguments}
        if self.title:
            out["title"] = self.title
        return self._iconed(out, icons) if self.icons and icons is not None else out


def _described(out: dict[str, Any], handler: Resource | ResourceTemplate, icons: IconBase | None) -> dict[str, Any]:
    """A resource's or template's descriptor: its title, description, MIME type and icons when given."""
    for key, value in (("title", handler.title), ("description", handler.description), ("mimeType", handler.mime_type)):
        if value:
            out[key] = value
    return handler._iconed(out, icons) if handler.icons and icons is not None else out


@dataclass(eq=False)
class Resource(Handler):
    uri: str = ""
    mime_type: str | None = None
    primitive: str = "resource"

    def descriptor(self, icons: IconBase | None = None) -> dict[str, Any]:
        return _described({"uri": self.uri, "name": self.name}, self, icons)


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

    def descriptor(self, icons: IconBase | None = None) -> dict[str, Any]:
        return _described({"uriTemplate": self.uri_template, "name": self.name}, self, icons)


def address(handler: Handler) -> str:
    """What the admin, ``mcp_handlers`` and the traces know a handler by: its name, URI or URI template."""
    if isinstance(handler, Resource):
        return handler.uri
    if isinstance(handler, ResourceTemplate):
        return handler.uri_template
    return handler.name


def is_template(uri: str) -> bool:
    """Whether ``uri`` has ``{placeholders}``: a resource template rather than a resource."""
    return _TEMPLATE_VAR.search(uri) is not None
