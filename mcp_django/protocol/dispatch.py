"""Method dispatch: what each MCP method does, whatever transport brought it."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from functools import lru_cache, partial
from typing import Any, NamedTuple

from django.db import DataError

from .. import content, extensions, resource_updates, schema
from ..asks import replay
from ..asks.call import LOG_LEVELS, Call
from ..asks.context import AsyncContext, SyncContext
from ..asks.invoke import invoke, run_in_thread
from ..completion import LIMIT
from ..conf import mcp_settings
from ..handlers import Handler, ResourceTemplate, completer_info
from ..icons import IconBase, icon_base
from ..permissions import admitted, allowed, permitted, require_scopes
from ..registry import Registry
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    InvalidParams,
    MCPError,
    ResourceNotFound,
    notification,
    storable,
)
from .legacy import server_described, server_info, too_many_subscriptions
from .revisions import ALL_VERSIONS, META_SERVER_INFO, MODERN_METHODS, Era

logger = logging.getLogger("mcp_django")

# Runs a handler: the handler stages and the era's engine (Dispatcher.handler_chains).
HandlerNext = Callable[[Handler, dict[str, Any], Call], Awaitable[replay.Outcome]]

# Methods only the legacy revisions have (2026-07-28 answers them -32601); they act
# through the transport's session control (Call.control: protocol.legacy.SessionControl).
LEGACY_METHODS = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})

# What each listing method lists: its result's key and the registry's table.
_LISTINGS = {
    "tools/list": ("tools", "tools"),
    "prompts/list": ("prompts", "prompts"),
    "resources/list": ("resources", "resources"),
    "resources/templates/list": ("resourceTemplates", "templates"),
}

# The core's methods whose results carry 2026-07-28's caching hints (ttlMs, cacheScope:
# mcp_django.pipeline.cache_hints); an extension's method says so itself (add_method's cache_hints).
CACHE_HINTED = frozenset({"server/discover", *_LISTINGS, "resources/read"})

# subscriptions/listen filter fields, by the registry's list names.
_LIST_FILTERS = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

# What is built for each handler on its first call (its chain, its filters) is kept, boundedly:
# handlers may be registered and removed at run time.
per_handler = lru_cache(maxsize=4096)


class Dispatcher:
    """What each method does; a stage of the pipeline (mcp_django.pipeline), the innermost one."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        # Each era's method's handler chain, by handler (Pipeline.build makes them).
        self.handler_chains: dict[Era, dict[str, Callable[[Handler], HandlerNext]]] = {}
        # The extensions' filters that concern each handler (extensions.add_handler_filter).
        self.handler_filters = per_handler(extensions.handler_filters)
        self.methods: dict[str, extensions.Run] = {
            "server/discover": self.discover,
            "tools/list": self.list_handlers,
            "tools/call": self.call_tool,
            "prompts/list": self.list_handlers,
            "prompts/get": self.get_prompt,
            "resources/list": self.list_handlers,
            "resources/templates/list": self.list_handlers,
            "resources/read": self.read_resource,
            "completion/complete": self.complete,
            "subscriptions/listen": self.listen,
            "initialize": self.initialize,
            "ping": self.ping,
            "logging/setLevel": self.set_log_level,
            "resources/subscribe": self.subscribe,
            "resources/unsubscribe": self.subscribe,
            "notifications/cancelled": self.cancelled,
            "notifications/initialized": self.ping,
        }

    def methods_of(self, era: Era) -> dict[str, extensions.Run]:
        """The methods a call of ``era`` may name: the core's, and the extensions' (mcp_django.extensions)."""
        found = {name: run for name, run in self.methods.items() if era == Era.LEGACY or name in MODERN_METHODS}
        for name, method in extensions.registered.methods.items():
            if era in method.eras:
                found[name] = method.run
        return found

    # -- helpers ------------------------------------------------------------------------

    def _admits(self, call: Call, handler: Handler) -> bool:
        """Whether no extension's filter hides ``handler`` from ``call``."""
        return all(check(call, handler) for check in self.handler_filters(handler))

    async def _visible(self, call: Call, handlers: list[Handler]) -> list[Handler]:
        if call.principal.is_anonymous:
            handlers = [h for h in handlers if h.allow_anonymous is not False]
        if extensions.registered.handler_filters:
            handlers = [h for h in handlers if self._admits(call, h)]
        # A credential limited to some handlers (an MCP token) does not see the others.
        limit = getattr(call.principal.auth, "mcp_allows_handler", None)
        if limit is not None:
            handlers = [h for h in handlers if limit(h)]
        if not any(h.guarded for h in handlers):
            return handlers
        return await permitted(call, handlers)

    def require_scopes(self, call: Call) -> None:
        """The 403 ``insufficient_scope`` of a call whose handler the token lacks scopes for,
        asked early by a transport that commits to a stream before the handler runs (legacy SSE)."""
        call.endpoint = self.registry.settings
        handler = self.registry.handler_for(call.method, call.target)
        if handler is not None:
            require_scopes(call, handler)

    # -- methods ------------------------------------------------------------------------

    async def discover(self, call: Call) -> dict[str, Any]:
        info = server_info(call.version, _icons(call))
        return server_described(
            Era.MODERN, {"supportedVersions": list(ALL_VERSIONS), "_meta": {META_SERVER_INFO: info}}
        )

    async def list_handlers(self, call: Call) -> dict[str, Any]:
        """tools/list, prompts/list, resources/list and resources/templates/list: what the caller may see."""
        key, name = _LISTINGS[call.method]
        table = getattr(self.registry, name)
        if name == "tools" and table.waiting:
            # Views registered by dotted path are imported in a worker thread, not on the loop.
            await run_in_thread(table.resolve)
        handlers = await self._visible(call, list(table.values()))
        icons = _icons(call)
        listed = [h.descriptor(icons) for h in handlers]
        if extensions.registered.descriptor_meta:
            # The extensions' per-call _meta (mcp_django.extensions.add_descriptor_meta).
            listed = extensions.described(call, handlers, listed)
        if name == "resources":
            for extension in extensions.registered.resources:
                listed += await extension.listed()
        return {key: listed}

    async def call_tool(self, call: Call) -> dict[str, Any]:
        name = call.params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("params.name must be a string")
        tools = self.registry.tools
        tool = tools.ready.get(name) or tools.get(name)  # the dict first: the table's get() builds waiting views
        if (
            tool is None
            # admitted(), inline for a caller without credentials (nothing to check but that).
            or not (tool.allow_anonymous is not False if call.principal.is_anonymous else admitted(call, tool))
            or (self.handler_filters(tool) and not self._admits(call, tool))
            or (tool.guarded and not await permitted(call, [tool]))
        ):
            raise InvalidParams(f"Unknown tool: {name}")
        arguments = call.params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("params.arguments must be an object")
        try:
            # Validated and converted into the declared types in one pass. A mistake is a tool
            # error (SEP-1303), so the model reads which field was wrong and can try again.
            arguments = tool.parameters.convert(arguments)
        except schema.ArgumentsInvalid as exc:
            return content.error_result(f"Invalid arguments for tool {name}: {exc}")
        # A task instead (the tasks extension), or a failure as a tool error: handler stages.
        outcome = await self.handler_chains[call.era]["tools/call"](tool)(tool, arguments, call)
        if outcome.result is not None:
            return outcome.result
        if type(outcome.value) is str:  # the commonest return, as content.tool_result() makes it
            return {"content": [{"type": "text", "text": outcome.value}]}
        try:
            return content.tool_result(outcome.value)
        except TypeError as exc:
            logger.error("tool %s returned a value with no JSON form: %s", name, exc)
            return content.error_result(f"Error executing tool {name}: {exc}")

    async def get_prompt(self, call: Call) -> dict[str, Any]:
        name = call.params.get("name")
        prompt = self.registry.prompts.get(name) if isinstance(name, str) else None
        if prompt is None or not self._admits(call, prompt) or not await allowed(call, prompt):
            raise InvalidParams(f"Unknown prompt: {name}")
        arguments = call.params.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise InvalidParams("params.arguments must be an object of strings")
        missing = [a["name"] for a in prompt.arguments if a["required"] and a["name"] not in arguments]
        if missing:
            raise InvalidParams(f"missing required arguments: {', '.join(missing)}")
        known = {a["name"] for a in prompt.arguments}
        arguments = {k: v for k, v in arguments.items() if k in known}
        if prompt.parameters is not None:
            try:
                # Prompt arguments are strings: read as the declared types (int, date, enum...).
                arguments = prompt.parameters.convert(arguments, strict=False)
            except schema.ArgumentsInvalid as exc:
                raise InvalidParams(f"Invalid arguments for prompt {name}: {exc}") from None
        outcome = await self.handler_chains[call.era]["prompts/get"](prompt)(prompt, arguments, call)
        if outcome.result is not None:
            return outcome.result
        result: dict[str, Any] = {"messages": content.prompt_messages(outcome.value)}
        if prompt.description:
            result["description"] = prompt.description
        return result

    async def read_resource(self, call: Call) -> dict[str, Any]:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams("params.uri must be a string")
        # A template's variables come from it, and handlers look them up.
        storable(uri, "params.uri")
        found = self.registry.find_resource(uri)
        if found is None:
            for extension in extensions.registered.resources:
                entry = await extension.read(uri)
                if entry is not None:
                    return {"contents": [entry]}
        if found is None or not self._admits(call, found[0]) or not await allowed(call, found[0]):
            raise ResourceNotFound(uri)
        handler, variables = found
        if isinstance(handler, ResourceTemplate):
            try:
                # The URI's variables are strings: read as the declared types (an int id, a date...).
                variables = handler.parameters.convert(variables, strict=False)
            except schema.ArgumentsInvalid as exc:
                raise ResourceNotFound(uri, f" ({exc})") from None
        outcome = await self.handler_chains[call.era]["resources/read"](handler)(handler, variables, call)
        if outcome.result is not None:
            return outcome.result
        mime = getattr(handler, "mime_type", None)
        value = outcome.value
        if isinstance(value, list) and all(isinstance(v, dict) and "uri" in v for v in value):
            contents = value
        else:
            contents = [content.resource_contents(uri, value, mime)]
        return {"contents": contents}

    # -- the legacy revisions' handshake and session methods ------------------------------

    async def initialize(self, call: Call) -> dict[str, Any]:
        """The handshake: the transport's session control opens the session; this says what the server is."""
        record = await call.control.open(call)
        icons = icon_base(record.version, lambda: call.request, self.registry.settings.RESOURCE_URL)
        return server_described(
            Era.LEGACY, {"protocolVersion": record.version, "serverInfo": server_info(record.version, icons)}
        )

    async def ping(self, call: Call) -> dict[str, Any]:
        return {}

    async def set_log_level(self, call: Call) -> dict[str, Any]:
        level = call.params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"level must be one of {', '.join(LOG_LEVELS)}")
        await call.control.set_log_level(level)
        return {}

    async def subscribe(self, call: Call) -> dict[str, Any]:
        """resources/subscribe and resources/unsubscribe, of any URI, listed or not."""
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams("params.uri must be a string")
        await call.control.subscribe(uri, call.method == "resources/subscribe")
        return {}

    async def cancelled(self, call: Call) -> dict[str, Any]:
        """notifications/cancelled: the session's call of that id is cancelled, wherever it runs."""
        if "requestId" in call.params:
            await call.control.cancel(call.params["requestId"])
        return {}

    async def listen(self, call: Call) -> dict[str, Any]:
        """subscriptions/listen: a stream of list-changed notifications the client opted in to."""
        if call.notify is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen needs a stream: send Accept: text/event-stream")
        requested = call.params.get("notifications")
        if not isinstance(requested, dict):
            raise InvalidParams("params.notifications must be an object")
        agreed: dict[str, Any] = {field: True for field in _LIST_FILTERS.values() if requested.get(field) is True}
        uris = requested.get("resourceSubscriptions")
        if uris is not None:
            if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
                raise InvalidParams("params.notifications.resourceSubscriptions must be a list of URIs")
            # Every URI is honoured, listed or not (a template's instances are not listed).
            agreed["resourceSubscriptions"] = list(dict.fromkeys(uris))
            if len(agreed["resourceSubscriptions"]) > mcp_settings.MAX_SUBSCRIPTIONS:
                raise too_many_subscriptions()
        # The extensions' topics (extensions.add_listen_topic: the tasks extension's taskIds).
        topics = {field: topic for field, topic in extensions.registered.listen_topics.items() if field in requested}
        for field, topic in topics.items():
            agreed[field] = topic.agree(call, requested[field])
            if len(agreed[field]) > mcp_settings.MAX_SUBSCRIPTIONS:
                raise too_many_subscriptions()
        tag = {META_SUBSCRIPTION_ID: call.request_id}
        watched = frozenset(agreed.get("resourceSubscriptions", ()))
        notify = call.notify

        def on_update(uri: str) -> None:
            # Called on this loop, for updates announced on any worker.
            if uri in watched:
                notify(notification("notifications/resources/updated", {"uri": uri, "_meta": tag}))

        pushing: set[asyncio.Task[None]] = set()
        # One read at a time, in the order the changes were heard: the last push never
        # shows an older state than the one before it.
        in_order = asyncio.Lock()

        async def push(topic: extensions.ListenTopic, key: str) -> None:
            # Read again for this listener (only what its principal may see).
            async with in_order:
                params = await topic.push(call, key)
            if params is not None:
                notify(notification(topic.notification, {**params, "_meta": tag}))

        def on_change_of(topic: extensions.ListenTopic, keys: frozenset[str], key: str) -> None:
            if key in keys:
                pushed = asyncio.get_running_loop().create_task(push(topic, key))
                pushing.add(pushed)  # a task nobody references may be collected before it runs
                pushed.add_done_callback(pushing.discard)

        watching: list[tuple[str, Callable[[str], None]]] = [
            (topic.kind, partial(on_change_of, topic, frozenset(agreed[field])))
            for field, topic in topics.items()
            if agreed[field]
        ]
        if watched:
            watching.append((resource_updates.UPDATED, on_update))
        if watching:
            # Watching before the acknowledgment: an update announced after it is never missed.
            updates = await resource_updates.listeners()
            for kind, listener in watching:
                updates.watch(listener, kind)
        try:
            notify(notification("notifications/subscriptions/acknowledged", {"notifications": agreed, "_meta": tag}))
            changes: asyncio.Queue[str] = asyncio.Queue()
            self.registry.subscribe(changes.put_nowait)
            try:
                while True:
                    listing = await changes.get()
                    if agreed.get(_LIST_FILTERS.get(listing, "")):
                        notify(notification(f"notifications/{listing}/list_changed", {"_meta": tag}))
            finally:
                self.registry.unsubscribe(changes.put_nowait)
        finally:
            for kind, listener in watching:
                updates.unwatch(listener, kind)
            for pending in pushing:
                pending.cancel()

    async def complete(self, call: Call) -> dict[str, Any]:
        ref = call.params.get("ref")
        argument = call.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise InvalidParams("params.ref and params.argument are required")
        name = argument.get("name")
        value = argument.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidParams("params.argument.name and params.argument.value must be strings")
        # What was typed goes into the completer's query (from_queryset's istartswith).
        storable(value, "params.argument.value")
        handler: Handler | None
        ref_type = ref.get("type")
        if ref_type == "ref/prompt":
            prompt_name = ref.get("name")
            if not isinstance(prompt_name, str):
                raise InvalidParams("params.ref.name must be a string")
            handler = self.registry.prompts.get(prompt_name)
            unknown: MCPError = InvalidParams(f"Unknown prompt: {prompt_name}")
        elif ref_type == "ref/resource":
            uri = ref.get("uri")
            if not isinstance(uri, str):
                raise InvalidParams("params.ref.uri must be a string")
            storable(uri, "params.ref.uri")
            handler = self.registry.templates.get(uri)
            if handler is None:
                found = self.registry.find_resource(uri)
                handler = found[0] if found else None
            unknown = ResourceNotFound(uri)
        else:
            raise InvalidParams("params.ref.type must be ref/prompt or ref/resource")
        # One the caller may not get or read (as prompts/get and resources/read decide): the same
        # answer as for one that does not exist.
        if handler is None or not self._admits(call, handler) or not await allowed(call, handler):
            raise unknown
        completions = getattr(handler, "completions", None) or {}
        completer = completions.get(name)
        values = await self._completions(handler, completer, value, call) if completer is not None else []
        # One value past the most a result may carry (LIMIT - 1) says that there are more (hasMore).
        more = len(values) == LIMIT
        values = values[: LIMIT - 1]
        completion: dict[str, Any] = {"values": values, "hasMore": more}
        if not more:
            completion["total"] = len(values)
        return {"completion": completion}

    async def _completions(self, handler: Handler, completer: Any, value: str, call: Call) -> list[str]:
        """Run one completer like a handler: a sync one in the pool, with ``ctx`` when it takes one."""
        ctx_param, is_async = completer_info(completer)
        ctx = (AsyncContext if is_async else SyncContext)(call, _NO_ASKS)
        kwargs = {ctx_param: ctx} if ctx_param else {}
        run = partial(completer, value, **kwargs)
        try:
            # A sync completer's values are read in its thread too: a QuerySet is read there.
            values = await invoke(_Completion(run if is_async else lambda: _values(run()), is_async), {}, ctx)
            return _values(values) if is_async else values
        except MCPError:
            raise
        except DataError as exc:
            raise refused_value(f"completion of {handler.primitive}", handler.name, exc) from None
        except Exception:
            logger.exception("completion of %s %s failed", handler.primitive, handler.name)
            raise MCPError(INTERNAL_ERROR, f"Error completing {handler.primitive} {handler.name}") from None


def refused_value(primitive: str, name: str, exc: DataError) -> InvalidParams:
    """A value the database refused (a NUL in a string, a number out of its column's range):
    the request's fault, so -32602 (a tool's error result) and one log line, no traceback."""
    reason = (str(exc).strip().splitlines() or ["DataError"])[0][:200]
    logger.warning("%s %s: the database refused a value of the request (%s)", primitive, name, reason)
    return InvalidParams(f"Invalid arguments for {primitive} {name}: the database refused a value")


def _icons(call: Call) -> IconBase | None:
    # The request is built only if an icon's URL needs its host (see mcp_django.icons).
    return icon_base(call.version, lambda: call.request, (call.endpoint or mcp_settings).RESOURCE_URL)


class _Completion(NamedTuple):
    """What :func:`~mcp_django.asks.invoke.invoke` needs of a handler, for a completer."""

    func: Callable[..., Any]
    is_async: bool


class _NoAsks:
    """The backend of a completer's context: a completion cannot ask the client anything."""

    def resolve_blocking(self, asks: Any) -> list[Any]:
        raise MCPError(INTERNAL_ERROR, "a completer cannot ask the client")

    async def resolve(self, asks: Any) -> list[Any]:
        return self.resolve_blocking(asks)

    resolve_one = resolve


_NO_ASKS = _NoAsks()


def _values(out: Any) -> list[str]:
    if isinstance(out, (str, bytes)) or out is None:
        raise TypeError(f"a completer returns an iterable of values, not {type(out).__name__}")
    return [str(v) for v in itertools.islice(out, LIMIT)]
