"""The per-call path: what happens to one request, in order, in one file (docs/pipeline.md).

Authorization sits inside the audit stage, not before it: a call refused for its handler
(unknown, forbidden, lacking a scope) is logged like any failed call. The request-level checks
run before the call exists: they cost nothing and need no database, so they come first.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import DataError, InterfaceError, OperationalError
from django.http.request import split_domain_port, validate_host

from . import content, extensions, lifecycle, signals
from .asks import live, replay
from .asks.call import Call
from .asks.invoke import run_in_thread
from .asks.replay import Outcome
from .auth import ANONYMOUS, AuthenticationFailed, Principal, refuse_anonymous
from .auth_cache import authenticate_and_remember, principal_cache
from .conf import mcp_settings
from .handlers import Handler
from .limits import stage as limits
from .log_lines import host_refused
from .protocol import jsonrpc
from .protocol.dispatch import CACHE_HINTED, Dispatcher, HandlerNext, per_handler, refused_value
from .protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    RESOURCE_NOT_FOUND_LEGACY,
    UNSUPPORTED_VERSION,
    MCPError,
    ResourceNotFound,
    Unavailable,
)
from .protocol.legacy import server_info
from .protocol.revisions import (
    META_SERVER_INFO,
    MODERN_METHODS,
    MODERN_VERSIONS,
    Era,
    RequestMeta,
    check_headers,
    check_param_headers,
    read_meta,
)
from .registry import Registry
from .request_state import StateRefused

logger = logging.getLogger("mcp_django")

# (HTTP status, JSON-RPC response, extra headers): what a transport renders.
Answer = tuple[int, dict[str, Any], list[tuple[str, str]] | None]
# The rest of a chain (its innermost: the method, as the dispatcher or an extension runs it).
Next = extensions.Run
# A call stage: stage(call, call_next) (by name, either order), awaiting call_next(call) or
# answering without it.
Stage = Callable[..., Awaitable[dict[str, Any]]]


# -- request stages: before the call exists (Pipeline.admit, check_request, Pipeline.authenticate)


_host_verdicts: dict[str, bool] = {}


def host_allowed(headers: dict[str, str]) -> bool:
    """Django's ALLOWED_HOSTS, as ``HttpRequest.get_host()`` applies it, a refusal logged as Django's;
    verdicts are remembered per Host value, boundedly, until ALLOWED_HOSTS or DEBUG change."""
    host = headers.get("host", "")
    verdict = _host_verdicts.get(host)
    if verdict is None:
        domain, _port = split_domain_port(host)
        allowed = settings.ALLOWED_HOSTS
        if settings.DEBUG and not allowed:
            allowed = [".localhost", "127.0.0.1", "[::1]"]
        verdict = bool(domain) and validate_host(domain, allowed)
        if len(_host_verdicts) < 1024:
            _host_verdicts[host] = verdict
    if not verdict:
        host_refused(host)
    return verdict


def _forget_hosts(*, setting: str, **kwargs: Any) -> None:
    if setting in ("ALLOWED_HOSTS", "DEBUG"):
        _host_verdicts.clear()


setting_changed.connect(_forget_hosts)


def request_scheme(scheme: str, headers: dict[str, str]) -> str:
    """``http`` or ``https``, as Django's ``request.scheme`` names it (``SECURE_PROXY_SSL_HEADER``)."""
    proxy_ssl = settings.SECURE_PROXY_SSL_HEADER
    if proxy_ssl:
        header, secure_value = proxy_ssl
        value = headers.get(header.removeprefix("HTTP_").lower().replace("_", "-"))
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    return scheme


def check_request(message: dict[str, Any], headers: dict[str, str] | None, registry: Registry) -> RequestMeta:
    """A 2026-07-28 request's method, ``_meta`` and (over HTTP) the headers that mirror them."""
    method: str = message["method"]
    if method not in MODERN_METHODS:
        raise MCPError(METHOD_NOT_FOUND, f"Method not found: {method}")
    params = message.get("params") or {}
    meta = read_meta(params)
    if headers is not None:
        check_headers(headers, method, params, meta)
    if meta.version not in MODERN_VERSIONS:  # after the headers: a mismatch is reported first
        supported = {"supported": list(MODERN_VERSIONS), "requested": meta.version}
        raise MCPError(UNSUPPORTED_VERSION, f"unsupported protocol version {meta.version!r}", supported)
    if headers is not None and method == "tools/call":
        name = params.get("name")
        tools = registry.tools
        tool = (tools.ready.get(name) or tools.get(name)) if isinstance(name, str) else None
        arguments = params.get("arguments")
        if tool is not None and tool.mirrors_headers and isinstance(arguments, dict):
            check_param_headers(headers, tool.input_schema, arguments)
    return meta


# -- call stages: each takes ``call`` and ``call_next`` (``link`` binds them, ``applies`` picks them)


# server_info()'s short form, made once per settings and shared (never changed in place) by every result.
_server_info: dict[str, Any] | None = None


async def complete_result(call_next: Next, call: Call) -> dict[str, Any]:
    global _server_info
    result = await call_next(call)
    result.setdefault("resultType", "complete")
    # Without a handshake, every result identifies the server (a SHOULD of 2026-07-28).
    info = _server_info
    if info is None:
        info = _server_info = server_info()
    meta = result.get("_meta")
    result["_meta"] = {META_SERVER_INFO: info, **meta} if meta else {META_SERVER_INFO: info}
    return result


complete_result.eras = frozenset({Era.MODERN})  # type: ignore[attr-defined]


async def cache_hints(call_next: Next, call: Call) -> dict[str, Any]:
    """2026-07-28's caching hints on lists and reads (not on a round's ``input_required``)."""
    result = await call_next(call)
    if "resultType" not in result:
        result["ttlMs"] = mcp_settings.LIST_TTL_MS
        result["cacheScope"] = mcp_settings.CACHE_SCOPE
    return result


def _hinted(era: Era, method: str) -> bool:
    if era != Era.MODERN:
        return False
    extension = extensions.registered.methods.get(method)
    return method in CACHE_HINTED if extension is None else extension.cache_hints


cache_hints.applies_to = _hinted  # type: ignore[attr-defined]


async def result_meta(call_next: Next, call: Call) -> dict[str, Any]:
    """The ``_meta`` extensions add to results (:func:`mcp_django.extensions.add_result_meta`)."""
    result = await call_next(call)
    for add in extensions.result_meta_for(call.method):
        found = add(call, result)
        if found:
            result["_meta"] = {**(result.get("_meta") or {}), **found}
    return result


result_meta.applies_to = lambda era, method: bool(extensions.result_meta_for(method))  # type: ignore[attr-defined]


async def database_lifecycle(call_next: Next, call: Call) -> dict[str, Any]:
    """Database connections as Django's handler manages them (:mod:`mcp_django.lifecycle`), for the
    methods that run a handler's async code (the worker pool does it after every sync job)."""
    entered = lifecycle.enter()
    try:
        return await call_next(call)
    finally:
        cleanup = lifecycle.leave(entered)
        if cleanup is not None:
            await lifecycle.finished(cleanup)


# The methods whose end is sent as ``signals.call_finished`` (the audit log's call rows), by sender.
_SENDER = {"tools/call": "tool", "prompts/get": "prompt", "resources/read": "resource"}
FINISH_SIGNALLED = frozenset(_SENDER)
database_lifecycle.methods = FINISH_SIGNALLED | {"completion/complete"}  # type: ignore[attr-defined]


async def audit(call_next: Next, call: Call) -> dict[str, Any]:
    """Run an ask-capable method and send ``call_finished`` with its outcome (rounds, refused
    states and missing capabilities are the engine's own events). The receiver only queues the row."""
    sender = _SENDER[call.method]
    try:
        result = await call_next(call)
    except asyncio.CancelledError:
        await _send_finished(call, sender, "cancelled", "")
        raise
    except MCPError as exc:
        if not (isinstance(exc, StateRefused) or exc.code == MISSING_CAPABILITY):
            await _send_finished(call, sender, "failed", f"error {exc.code}", exc.message)
        raise
    except Exception as exc:
        await _send_finished(call, sender, "failed", type(exc).__name__)
        raise
    # A round is its own event; a task created sends its own rows (mcp_django.tasks).
    if result.get("resultType") not in ("input_required", "task"):
        if result.get("isError"):
            await _send_finished(call, sender, "failed", "tool error", _error_text(result))
        else:  # _send_finished, inline: nearly every call ends here
            await signals.call_finished.asend(sender, event=call.event("completed", outcome="completed"))
    return result


audit.methods = FINISH_SIGNALLED  # type: ignore[attr-defined]


def _send_finished(call: Call, sender: str, outcome: str, reason: str, error: str = "") -> Awaitable[Any]:
    # No has_listeners() first: asend finds the live receivers anyway, at less cost (bench/HISTORY.md).
    event = call.event(outcome, reason=reason, outcome=outcome)
    if error:
        event.error = error[:500]
    return signals.call_finished.asend(sender, event=event)


def _error_text(result: dict[str, Any]) -> str:
    """A tool error result's message: its text blocks, as the model read them."""
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    texts = [block["text"] for block in content if isinstance(block, dict) and isinstance(block.get("text"), str)]
    return " ".join(texts)[:500]


# The protocol's own stages around and inside the project's, and why there: docs/pipeline.md.
OUTER_STAGES: tuple[Stage, ...] = (complete_result, result_meta, database_lifecycle, limits.limit)
INNER_STAGES: tuple[Stage, ...] = (cache_hints,)


def applies(stage: Any, era: Era, method: str) -> bool:
    """Whether a stage is in an era's method's chain: ``applies_to(era, method)``, else ``eras`` and ``methods``."""
    applies_to = getattr(stage, "applies_to", None)
    if applies_to is not None:
        return bool(applies_to(era, method))
    eras = getattr(stage, "eras", None)
    methods = getattr(stage, "methods", None)
    return (eras is None or era in eras) and (methods is None or method in methods)


def link(stage: Any, call_next: Next) -> Next:
    """``stage`` bound to the rest of the chain; positionally when ``call_next`` comes first (docs/pipeline.md)."""
    if next(iter(inspect.signature(stage).parameters), None) == "call_next":
        return partial(stage, call_next)
    return partial(stage, call_next=call_next)


def adapted(stage: Stage) -> Stage:
    """A stage as the chain awaits it: a sync one runs in a worker thread, as a sync Django middleware."""
    if asyncio.iscoroutinefunction(stage) or getattr(stage, "async_capable", False):
        return stage

    async def in_thread(call_next: Next, call: Call) -> dict[str, Any]:
        async def rest(call: Call) -> dict[str, Any]:
            return await call_next(call)

        # asgiref's pair, as Django adapts a sync middleware: the rest of the chain runs
        # back on this loop while the stage's thread waits for it.
        run: Any = sync_to_async(stage, thread_sensitive=False)
        result: dict[str, Any] = await run(call=call, call_next=async_to_sync(rest))
        return result

    # The chain's builder asks the thread's wrapper which calls the stage applies to.
    for choice in ("eras", "methods", "applies_to"):
        setattr(in_thread, choice, getattr(stage, choice, None))
    return in_thread


# -- handler stages: ``stage(next, handler, arguments, call)`` -----------------------------


async def handler_errors(next: HandlerNext, handler: Handler, arguments: dict[str, Any], call: Call) -> Outcome:
    """A handler's failure: a tool's is a result the model reads (``isError``, SEP-1303);
    a prompt's or a resource's is a JSON-RPC error (503 while the database is away)."""
    try:
        return await next(handler, arguments, call)
    except MCPError:
        raise
    except Exception as exc:
        if isinstance(exc, DataError):
            refused = refused_value(handler.primitive, handler.name, exc)
            if handler.primitive == "tool":
                return Outcome(result=content.error_result(refused.message))
            raise refused from None
        if handler.primitive == "tool":
            if isinstance(exc, content.ToolError):
                return Outcome(result=content.error_result(str(exc)))
            logger.exception("tool %s failed", handler.name)
            return Outcome(result=content.error_result(f"Error executing tool {handler.name}"))
        if isinstance(exc, (OperationalError, InterfaceError)):
            # The database refuses connections or timed out: the client may try again (503).
            logger.warning("%s %s could not reach the database", handler.primitive, handler.name, exc_info=True)
            raise Unavailable("the database") from None
        logger.exception("%s %s failed", handler.primitive, handler.name)
        raise MCPError(INTERNAL_ERROR, f"Error in {handler.primitive} {handler.name}") from None


# The handler stages of each era, outermost first, and the engine innermost; the extensions'
# (mcp_django.extensions.add_handler_stage: the tasks extension's) come before them.
HANDLER_STAGES: dict[Era, tuple[tuple[str, Callable[..., Awaitable[Outcome]]], ...]] = {
    Era.MODERN: (("handler errors", handler_errors), ("request state", replay.request_state)),
    Era.LEGACY: (("handler errors", handler_errors),),
}
ENGINES: dict[Era, Callable[..., Awaitable[Outcome]]] = {Era.MODERN: replay.run, Era.LEGACY: live.run}


def _handler_chain(era: Era, method: str, handler: Handler) -> HandlerNext:
    """The extensions' stages that concern ``handler``, the core's, and the era's engine innermost."""
    chain: Any = ENGINES[era]
    for stage in reversed([*extensions.handler_stages(era, method, handler), *dict(HANDLER_STAGES[era]).values()]):
        chain = partial(stage, chain)
    return chain  # type: ignore[no-any-return]


# -- the exception handler: every error mapped to its answer, here only ------------------


def exception_handler(exc: Exception, call: Call) -> Answer:
    """A call's error as its answer (the default ``MCP_DJANGO["EXCEPTION_HANDLER"]``, docs/pipeline.md):
    a 2026-07-28 error carries its HTTP status and headers; a legacy one is a JSON-RPC error in a 200."""
    if isinstance(exc, MCPError):
        if call.era == Era.MODERN:
            return exc.http_status, jsonrpc.error_response(call.request_id, exc), exc.headers
        if isinstance(exc, ResourceNotFound):
            # The legacy revisions' own code for it (2026-07-28 has -32602).
            exc = MCPError(RESOURCE_NOT_FOUND_LEGACY, exc.message, exc.data)
        return 200, jsonrpc.error_response(call.request_id, exc), None
    # A bug must still answer the request: a legacy stream would otherwise never
    # end, and a 2026-07-28 client would get a bare 500.
    logger.error("%s failed", call.method, exc_info=exc)
    return 200, jsonrpc.error_response(call.request_id, MCPError(INTERNAL_ERROR, "Internal error")), None


async def answer(handle: Next, call: Call, finished: Callable[[], None] | None = None) -> Answer:
    """The call's result, or its error mapped by ``MCP_DJANGO["EXCEPTION_HANDLER"]``; ``finished``
    is called as the call ends, whichever way."""
    try:
        result = await handle(call)
    except Exception as exc:
        return mcp_settings.EXCEPTION_HANDLER(exc, call)  # type: ignore[no-any-return]
    finally:
        if finished is not None:
            finished()
    return 200, jsonrpc.response(call.request_id, result), None


def refusal(request_id: Any, exc: Exception, extra: list[tuple[str, str]] | None = None) -> Answer:
    """A request refused before or instead of its call: the error's own HTTP status, whatever the era."""
    if isinstance(exc, AuthenticationFailed):
        challenge = [("www-authenticate", exc.challenge)] if exc.challenge else []
        headers = [*challenge, *(exc.headers or [])]
        exc = MCPError(INVALID_REQUEST, exc.detail, http_status=exc.status, headers=headers)
    elif not isinstance(exc, MCPError):
        logger.error("mcp_django: a request failed", exc_info=exc)
        exc = MCPError(INTERNAL_ERROR, "Internal error", http_status=500)
    if exc.headers:
        extra = [*(extra or []), *exc.headers]
    return exc.http_status, jsonrpc.error_response(request_id, exc), extra


# -- the pipeline ---------------------------------------------------------------------------


class Pipeline:
    """The per-call path of one registry: its chains, by era and method, built once (again when the settings change)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.dispatcher = Dispatcher(registry)
        self.build()
        _pipelines.add(self)

    def build(self) -> None:
        stages = [*OUTER_STAGES, *map(adapted, mcp_settings.PIPELINE), *INNER_STAGES]
        self.chains: dict[Era, dict[str, Next]] = {}
        for era in Era:
            chains: dict[str, Next] = {}
            for method, run in self.dispatcher.methods_of(era).items():
                chain: Next = run
                for stage in reversed(stages):
                    if applies(stage, era, method):
                        chain = link(stage, chain)
                chains[method] = chain
            self.chains[era] = chains
            self.dispatcher.handler_chains[era] = {
                method: per_handler(partial(_handler_chain, era, method)) for method in FINISH_SIGNALLED
            }
        self.dispatcher.handler_filters.cache_clear()

    def admit(self, headers: dict[str, str], scheme: str) -> list[tuple[str, str]]:
        """The first request stage: ``Host`` (Django's ALLOWED_HOSTS) and ``Origin`` (this site's, or
        ``ALLOWED_ORIGINS``), else a 403. Returns the CORS headers a browser on another allowed origin gets."""
        if not host_allowed(headers):
            raise MCPError(INVALID_REQUEST, "Host not allowed", http_status=403)
        origin = headers.get("origin")
        host = headers.get("host")
        # Most MCP clients are not browsers: no Origin, nothing to check and no CORS headers.
        # This site's own page: the Origin names the request's scheme and host, as Django's
        # CSRF check compares them (scheme included, ASCII case aside).
        if origin is None or (host and origin.lower() == f"{request_scheme(scheme, headers)}://{host}".lower()):
            return []
        allowed = mcp_settings.ALLOWED_ORIGINS
        if "*" not in allowed and origin not in allowed:
            raise MCPError(INVALID_REQUEST, "Origin not allowed", http_status=403)
        return [
            ("access-control-allow-origin", origin),
            ("access-control-allow-methods", "POST, GET, DELETE, OPTIONS"),
            (
                "access-control-allow-headers",
                "content-type, accept, authorization, dpop, mcp-protocol-version, mcp-method, mcp-name, "
                "mcp-session-id, last-event-id",
            ),
            # A browser client reads the challenge and the DPoP nonce (RFC 9449 section 8) too.
            ("access-control-expose-headers", "mcp-session-id, www-authenticate, dpop-nonce"),
            ("vary", "origin"),
        ]

    async def authenticate(self, req: Any, request: Any) -> Principal:
        """The caller, or :class:`AuthenticationFailed` (401) or :class:`Unavailable` (503). ``req``: the
        transport's ``HttpIn``; ``request``: a callable that builds the Django request when needed."""
        endpoint = self.registry.settings  # its authentication classes and anonymous policy
        headers = req.headers
        if "authorization" not in headers and "cookie" not in headers and endpoint.reads_only_headers:
            principal = ANONYMOUS
        else:
            key = principal_cache.key(headers, f"{endpoint.name} {req.scheme} {req.endpoint}", endpoint)
            cached = await principal_cache.get(key) if key is not None else None
            waited = 0.0
            if cached is None and key is not None:
                waiting = time.monotonic()
                cached = await principal_cache.after_pending(key)
                waited = time.monotonic() - waiting
            if cached is not None:
                principal = cached
            else:
                request = request()
                # Bounded, the wait for another request's authentication included: a hung
                # database (a stopped server does not even let statement_timeout fire) must
                # not hold the request; the thread is freed when the database answers or fails.
                budget = mcp_settings.AUTH_TIMEOUT - waited
                try:
                    if budget <= 0:
                        raise TimeoutError
                    with principal_cache.leading(key):
                        principal = await asyncio.wait_for(
                            run_in_thread(authenticate_and_remember, request, key, endpoint), budget
                        )
                except (OperationalError, InterfaceError, TimeoutError) as exc:
                    # The database refuses connections or does not answer: 503, not a 500.
                    # Said once per outage: an open breaker logged it when it opened.
                    if not lifecycle.database_down():
                        logger.warning("authentication could not reach the database (%s)", type(exc).__name__)
                    raise Unavailable("the database") from None
        if principal.is_anonymous and not endpoint.ALLOW_ANONYMOUS:
            raise refuse_anonymous(request() if callable(request) else request, endpoint)
        return principal

    def handle(self, call: Call) -> Awaitable[dict[str, Any]]:
        # Whatever carried it, the call is this endpoint's (its settings, its audit rows).
        call.endpoint = self.registry.settings
        call.registry = self.registry
        return self.chains[call.era].get(call.method, _not_found)(call)

    async def notified(self, call: Call) -> None:
        """A notification through its chain: an error only logged (an unknown one ignored); an outage raises (503)."""
        try:
            await self.handle(call)
        except Unavailable:
            raise
        except MCPError as exc:
            if exc.code != METHOD_NOT_FOUND:
                logger.warning("%s: %s", call.method, exc.message)
        except Exception:
            logger.exception("%s failed", call.method)


async def _not_found(call: Call) -> dict[str, Any]:
    raise MCPError(METHOD_NOT_FOUND, f"Method not found: {call.method}")


# Every pipeline, to build again when MCP_DJANGO changes (its PIPELINE, override_settings in tests).
_pipelines: weakref.WeakSet[Pipeline] = weakref.WeakSet()


def rebuild_all() -> None:
    """Build every pipeline's chains again (MCP_DJANGO, or a stage's ``applies_to`` answer, changed)."""
    for pipeline in list(_pipelines):
        try:
            pipeline.build()
        except ImproperlyConfigured:
            pass  # a bad entry (system check E020): the chains stay as they were


def _rebuild(*, setting: str, **kwargs: Any) -> None:
    global _server_info
    if setting == "MCP_DJANGO":
        _server_info = None
        try:
            extensions.load(mcp_settings.EXTENSIONS)
        except ImproperlyConfigured:
            pass  # a bad entry (system check E022): the extensions stay as they were
        rebuild_all()


setting_changed.connect(_rebuild)
