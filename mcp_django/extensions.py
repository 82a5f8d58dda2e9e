"""The public points an extension of the protocol plugs into: each ``add_*``/``declare_*`` is described
in docs/extensions.md. The core imports no extension; ``MCP_DJANGO["EXTENSIONS"]`` lists them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from django.utils.module_loading import import_string

from . import permissions
from .protocol.revisions import MODERN_METHODS, Era

if TYPE_CHECKING:
    from .asks.call import Call
    from .handlers import Handler

__all__ = [
    "ALL_ERAS",
    "add_descriptor_meta",
    "add_handler_filter",
    "add_handler_panel",
    "add_handler_stage",
    "add_listen_topic",
    "add_method",
    "add_resources",
    "add_result_meta",
    "add_tool_option",
    "allowed",
    "client_extension",
    "declare_capabilities",
    "declare_extension",
]

ALL_ERAS = frozenset(Era)

Run = Callable[["Call"], Awaitable[dict[str, Any]]]
ResultMeta = Callable[["Call", dict[str, Any]], Mapping[str, Any] | None]
HandlerFilter = Callable[["Call", "Handler"], bool]
DescriptorMeta = Callable[["Call", "Handler"], Mapping[str, Any] | None]
# applies(handler): whether a stage or filter concerns that handler (asked once, when its chain
# is built): a plain tool's calls then cross none of an extension's code.
Applies = Callable[["Handler"], bool] | None
# check(value, owner) -> the value kept (raise TypeError or ImproperlyConfigured to refuse it).
OptionCheck = Callable[[Any, str], Any]


class Method(NamedTuple):
    run: Run
    eras: frozenset[Era]
    # Whether a 2026-07-28 result carries the caching hints (ttlMs, cacheScope), as lists do.
    cache_hints: bool


class Resources(NamedTuple):
    listed: Callable[[], Awaitable[list[dict[str, Any]]]]
    read: Callable[[str], Awaitable[dict[str, Any] | None]]


class ListenTopic(NamedTuple):
    agree: Callable[[Call, Any], list[str]]
    push: Callable[[Call, str], Awaitable[dict[str, Any] | None]]
    notification: str
    kind: str


class _Registered:
    """What the listed extensions registered (made anew by :func:`load`)."""

    def __init__(self) -> None:
        self.methods: dict[str, Method] = {}
        self.capabilities: list[tuple[Callable[[Era], Mapping[str, Any] | None], frozenset[Era]]] = []
        self.resources: list[Resources] = []
        self.result_meta: list[tuple[ResultMeta, frozenset[str] | None]] = []
        self.handler_stages: list[tuple[Callable[..., Awaitable[Any]], frozenset[Era], frozenset[str], Applies]] = []
        self.tool_options: dict[str, OptionCheck | None] = {}
        self.handler_filters: list[tuple[HandlerFilter, Applies]] = []
        self.descriptor_meta: list[DescriptorMeta] = []
        self.handler_panels: list[Callable[[Handler], str | None]] = []
        self.listen_topics: dict[str, ListenTopic] = {}


registered = _Registered()
_CORE_MODERN_METHODS = frozenset(MODERN_METHODS)


def add_method(name: str, run: Run, *, eras: Iterable[Era] = ALL_ERAS, cache_hints: bool = False) -> None:
    """Serve ``name``: ``await run(call)`` is its result, in ``eras``."""
    registered.methods[name] = Method(run, frozenset(eras), cache_hints)
    if Era.MODERN in eras:
        MODERN_METHODS.add(name)


def declare_extension(
    name: str,
    settings: Mapping[str, Any] | Callable[[], Mapping[str, Any] | None] | None = None,
    *,
    eras: Iterable[Era] = ALL_ERAS,
) -> None:
    """Declare ``capabilities.extensions[name]`` (SEP-2133), with ``settings`` or a function giving them."""

    def declare(era: Era) -> Mapping[str, Any] | None:
        found = settings() if callable(settings) else settings or {}
        return None if found is None else {"extensions": {name: dict(found)}}

    registered.capabilities.append((declare, frozenset(eras)))


def declare_capabilities(declare: Callable[[Era], Mapping[str, Any] | None]) -> None:
    """``declare(era)`` gives capabilities merged into the server's, in that era's shape."""
    registered.capabilities.append((declare, ALL_ERAS))


def add_resources(
    listed: Callable[[], Awaitable[list[dict[str, Any]]]], read: Callable[[str], Awaitable[dict[str, Any] | None]]
) -> None:
    """Resources of the extension's own, listed by ``listed()`` and read by ``read(uri)`` (None: not its URI)."""
    registered.resources.append(Resources(listed, read))


def add_result_meta(add: ResultMeta, *, methods: Iterable[str] | None = None) -> None:
    """``add(call, result)`` gives keys merged into the result's ``_meta``, for ``methods`` (None: all)."""
    registered.result_meta.append((add, None if methods is None else frozenset(methods)))


def add_handler_stage(
    stage: Callable[..., Awaitable[Any]],
    *,
    methods: Iterable[str],
    eras: Iterable[Era] = ALL_ERAS,
    applies: Applies = None,
) -> None:
    """``stage(next, handler, arguments, call)`` around a handler's run for ``methods``, returning an ``Outcome``."""
    registered.handler_stages.append((stage, frozenset(eras), frozenset(methods), applies))


def add_tool_option(name: str, check: OptionCheck | None = None) -> None:
    """Let ``@mcp.tool(name=value)`` take the keyword ``name``, kept in the tool's ``options`` as ``check`` returns it."""
    registered.tool_options[name] = check


def add_handler_filter(check: HandlerFilter, *, applies: Applies = None) -> None:
    """``check(call, handler)`` False hides the handler from this call, as one the principal may not use."""
    registered.handler_filters.append((check, applies))


def add_listen_topic(
    field: str,
    *,
    agree: Callable[[Call, Any], list[str]],
    push: Callable[[Call, str], Awaitable[dict[str, Any] | None]],
    notification: str,
    kind: str,
) -> None:
    """``subscriptions/listen``'s ``notifications[field]``: changes of ``kind`` pushed as ``notification``."""
    registered.listen_topics[field] = ListenTopic(agree, push, notification, kind)


def add_descriptor_meta(add: DescriptorMeta) -> None:
    """``add(call, handler)`` gives keys merged into the handler's ``_meta`` in this call's listings."""
    registered.descriptor_meta.append(add)


def add_handler_panel(panel: Callable[[Handler], str | None]) -> None:
    """``panel(handler)`` gives an HTML section (a ``SafeString``) for the admin's page of the handler, or None."""
    registered.handler_panels.append(panel)


def client_extension(call: Call, name: str) -> dict[str, Any] | None:
    """The settings the call's client declared for extension ``name`` (``capabilities.extensions``), or None."""
    declared = call.capabilities.raw.get("extensions")
    found = declared.get(name) if isinstance(declared, dict) else None
    return found if isinstance(found, dict) else None


# Whether the call's principal may use a handler, by the dispatcher's own checks.
allowed = permissions.allowed


# -- what the core reads --------------------------------------------------------------------


def capabilities(era: Era, caps: dict[str, Any]) -> dict[str, Any]:
    """``caps`` (the core's) with what the extensions declare for ``era``."""
    for declare, eras in registered.capabilities:
        if era not in eras:
            continue
        for key, value in (declare(era) or {}).items():
            if isinstance(value, Mapping) and isinstance(caps.get(key), dict):
                caps[key] = {**caps[key], **value}
            else:
                caps[key] = dict(value) if isinstance(value, Mapping) else value
    return caps


def handler_stages(era: Era, method: str, handler: Handler) -> list[Callable[..., Awaitable[Any]]]:
    return [
        stage
        for stage, eras, methods, applies in registered.handler_stages
        if era in eras and method in methods and (applies is None or applies(handler))
    ]


def handler_filters(handler: Handler) -> tuple[HandlerFilter, ...]:
    """The filters that concern ``handler`` (see :func:`add_handler_filter`)."""
    return tuple(check for check, applies in registered.handler_filters if applies is None or applies(handler))


def tool_options(options: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """``options`` given to ``@mcp.tool``, checked by the extensions that take them."""
    kept = {}
    for name, value in options.items():
        if name not in registered.tool_options:
            raise TypeError(
                f"{owner}: unexpected keyword argument {name!r} (no extension in MCP_DJANGO['EXTENSIONS'] takes it)"
            )
        check = registered.tool_options[name]
        kept[name] = value if check is None else check(value, owner)
    return kept


def described(call: Call, handlers: list[Handler], descriptors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The listed ``descriptors`` (one per handler) with the extensions' ``_meta`` for ``call``."""
    for add in registered.descriptor_meta:
        for handler, descriptor in zip(handlers, descriptors, strict=True):
            extra = add(call, handler)
            if extra:
                # A copy: the handler's own meta dict is shared by every listing.
                descriptor["_meta"] = {**descriptor.get("_meta", {}), **extra}
    return descriptors


def result_meta_for(method: str) -> list[ResultMeta]:
    return [add for add, methods in registered.result_meta if methods is None or method in methods]


def load(paths: Iterable[str]) -> None:
    """Register the extensions ``paths`` name (``MCP_DJANGO["EXTENSIONS"]``), afresh."""
    global registered
    MODERN_METHODS.intersection_update(_CORE_MODERN_METHODS)
    registered = _Registered()
    for path in paths:
        import_string(f"{path}.register")()
