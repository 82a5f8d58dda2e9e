"""The per-call path (mcp_django/pipeline.py): its stages in their order, built into each
era's chains, the one exception handler, and what it is built of."""

from __future__ import annotations

import ast
import asyncio
import gc
import inspect
import weakref
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any

import orjson

import mcp_django
from mcp_django import pipeline, tracing
from mcp_django.asks import live, replay
from mcp_django.asks.call import Call
from mcp_django.auth import ANONYMOUS, AuthenticationFailed
from mcp_django.conf import SETTINGS
from mcp_django.limits import stage as limits
from mcp_django.mcp_ui import methods as apps_methods
from mcp_django.pipeline import Pipeline, exception_handler, refusal
from mcp_django.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND_LEGACY,
    MCPError,
    ResourceNotFound,
    Unavailable,
)
from mcp_django.protocol.revisions import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    MODERN_METHODS,
    ClientCapabilities,
    Era,
    read_meta,
)
from mcp_django.registry import Registry
from mcp_django.signals import Event
from mcp_django.tasks import methods as task_methods
from mcp_django.transports.asgi import MCPApplication
from mcp_django.transports.http import HttpIn, HttpOut
from mcp_django.transports.legacy_http import endpoint_for
from tests.conftest import MODERN, mcp_settings, meta

PACKAGE = Path(mcp_django.__file__).parent


def _chain(run: Any) -> list[Any]:
    """The functions a chain built of ``partial(stage, next)`` (handler stages, and call stages
    that take ``call_next`` first) or ``partial(stage, call_next=next)`` runs, outermost first."""
    functions = []
    while isinstance(run, partial):
        functions.append(run.func)
        run = run.keywords["call_next"] if "call_next" in run.keywords else run.args[0]
    return [*functions, run]


def test_the_stages_in_their_order() -> None:
    assert pipeline.OUTER_STAGES == (
        pipeline.complete_result,
        pipeline.result_meta,
        pipeline.database_lifecycle,
        limits.limit,
    )
    assert pipeline.INNER_STAGES == (pipeline.cache_hints,)
    assert SETTINGS["PIPELINE"].default == ["mcp_django.tracing.trace", "mcp_django.pipeline.audit"]
    assert [name for name, _stage in pipeline.HANDLER_STAGES[Era.MODERN]] == ["handler errors", "request state"]
    assert [name for name, _stage in pipeline.HANDLER_STAGES[Era.LEGACY]] == ["handler errors"]
    assert pipeline.ENGINES == {Era.MODERN: replay.run, Era.LEGACY: live.run}


def test_the_limits_stage_joins_the_chains_once_there_is_something_to_count(monkeypatch: Any) -> None:
    """No LIMITS and no throttle= anywhere: no chain holds the stage (a call crosses none of
    mcp_django.limits); the first handler registered with throttle= builds the chains again."""
    monkeypatch.setattr(Registry, "any_throttled", False)
    registry = Registry()
    built = Pipeline(registry)
    assert limits.limit not in _chain(built.chains[Era.MODERN]["tools/call"])

    def slow(text: str) -> str:
        return text

    registry.tool(throttle="5/min")(slow)
    assert Registry.any_throttled
    assert limits.limit in _chain(built.chains[Era.MODERN]["tools/call"])
    assert limits.limit in _chain(built.chains[Era.LEGACY]["prompts/get"])
    assert limits.limit not in _chain(built.chains[Era.MODERN]["tools/list"])


def test_each_chain_holds_the_stages_that_apply_to_its_era_and_method(monkeypatch: Any) -> None:
    monkeypatch.setattr(Registry, "any_throttled", True)  # the limits stage is in (see above)
    built = Pipeline(Registry())
    methods = built.dispatcher
    modern, legacy = built.chains[Era.MODERN], built.chains[Era.LEGACY]
    traced = [tracing.trace] if tracing.ENABLED else []
    calls = [
        pipeline.complete_result,
        pipeline.database_lifecycle,
        limits.limit,
        *traced,
        pipeline.audit,
        methods.call_tool,
    ]
    assert _chain(modern["tools/call"]) == calls
    assert _chain(legacy["tools/call"]) == calls[1:]
    assert _chain(modern["tools/list"]) == [
        pipeline.complete_result,
        *traced,
        pipeline.cache_hints,
        methods.list_handlers,
    ]
    assert _chain(legacy["tools/list"]) == [*traced, methods.list_handlers]
    assert _chain(modern["completion/complete"]) == [
        pipeline.complete_result,
        pipeline.database_lifecycle,
        *traced,
        methods.complete,
    ]
    # The handshake and the session's methods are legacy chains only, traced like the rest.
    assert _chain(legacy["initialize"]) == [*traced, methods.initialize]
    assert "initialize" not in modern and "ping" not in modern
    # A method 2026-07-28 does not have is in no modern chain (-32601).
    assert set(modern) == MODERN_METHODS and set(legacy) == set(methods.methods_of(Era.LEGACY))
    # The tasks extension attaches to 2026-07-28 only: on a legacy revision its methods are
    # there only to say so (-32601 naming the extension, tests/test_tasks.py).
    assert "tasks/get" in legacy and _chain(legacy["tasks/get"])[:-1] == traced
    # The extensions' methods are there too (mcp_django.extensions), each with its era's stages.
    assert _chain(modern["skills/list"]) == [
        pipeline.complete_result,
        *traced,
        pipeline.cache_hints,
        methods.methods_of(Era.MODERN)["skills/list"],
    ]
    assert {"tasks/get", "skills/get", "resources/directory/read"} <= set(modern)
    handlers = built.dispatcher.handler_chains

    class Tool:  # what the extensions' applies= read of a handler
        def __init__(self, task: str | None, options: dict[str, Any]) -> None:
            self.task, self.options = task, options

    both, plain = Tool("optional", {"app": "view"}), Tool(None, {})
    # The extensions' stages (mcp_django.extensions.add_handler_stage) are outermost, in the
    # order EXTENSIONS lists them: the tasks extension's, then MCP Apps' text fallback; each
    # only in the chains of the handlers it concerns (applies=), so a plain tool crosses neither.
    assert _chain(handlers[Era.MODERN]["tools/call"](both)) == [
        task_methods.run_as_task,
        apps_methods.text_fallback,
        pipeline.handler_errors,
        replay.request_state,
        replay.run,
    ]
    assert _chain(handlers[Era.MODERN]["tools/call"](plain)) == [
        pipeline.handler_errors,
        replay.request_state,
        replay.run,
    ]
    assert _chain(handlers[Era.LEGACY]["tools/call"](both)) == [
        apps_methods.text_fallback,
        pipeline.handler_errors,
        live.run,
    ]
    assert _chain(handlers[Era.MODERN]["prompts/get"](plain)) == [
        pipeline.handler_errors,
        replay.request_state,
        replay.run,
    ]
    assert _chain(handlers[Era.LEGACY]["resources/read"](plain)) == [pipeline.handler_errors, live.run]


def _call(era: Era, method: str = "tools/call", request_id: Any = 7) -> Call:
    return Call(
        method=method,
        params={},
        request_id=request_id,
        version="2026-07-28" if era == Era.MODERN else "2025-11-25",
        era=era,
        transport="http",
        capabilities=ClientCapabilities(),
        principal=ANONYMOUS,
    )


def test_the_exception_handler_maps_every_error() -> None:
    refused = MCPError(INVALID_PARAMS, "no", http_status=403, headers=[("www-authenticate", "Bearer")])
    assert exception_handler(refused, _call(Era.MODERN)) == (
        403,
        {"jsonrpc": "2.0", "id": 7, "error": {"code": INVALID_PARAMS, "message": "no"}},
        [("www-authenticate", "Bearer")],
    )
    # A legacy session's error is a JSON-RPC error in a 200 (or on its stream).
    assert exception_handler(refused, _call(Era.LEGACY))[::2] == (200, None)
    # A resource not found: -32602 on 2026-07-28, the legacy revisions' own -32002 on theirs.
    missing = ResourceNotFound("file:///x")
    assert exception_handler(missing, _call(Era.MODERN))[1]["error"]["code"] == INVALID_PARAMS
    assert exception_handler(missing, _call(Era.LEGACY))[1]["error"] == {
        "code": RESOURCE_NOT_FOUND_LEGACY,
        "message": "Resource not found: file:///x",
        "data": {"uri": "file:///x"},
    }
    status, payload, headers = exception_handler(RuntimeError("a bug"), _call(Era.MODERN))
    assert (status, payload["error"], headers) == (200, {"code": INTERNAL_ERROR, "message": "Internal error"}, None)
    assert refusal(None, Unavailable("the database"))[0] == 503
    status, payload, headers = refusal(1, AuthenticationFailed("who?", challenge='Bearer realm="mcp"'))
    assert status == 401 and payload["error"]["message"] == "who?"
    assert headers == [("www-authenticate", 'Bearer realm="mcp"')]
    assert refusal(None, RuntimeError("a bug"))[0] == 500


# The builders of an error's answer: only the pipeline's exception handler calls them.
ERROR_BUILDERS = {"error_response"}
# Where they are defined (mcp_django.protocol.jsonrpc) and the one place that maps errors.
MAY_BUILD = {PACKAGE / "protocol" / "jsonrpc.py", PACKAGE / "pipeline.py"}


def _maps_errors(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ERROR_BUILDERS:
                lines.append(node.lineno)
        # Reading an error's HTTP status is choosing the answer's.
        if isinstance(node, ast.Attribute) and node.attr == "http_status" and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
    return lines


def test_no_module_outside_the_pipeline_maps_errors_to_answers() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in PACKAGE.rglob("*.py")
        if path not in MAY_BUILD
        for line in _maps_errors(ast.parse(path.read_text(), str(path)))
    }
    assert found == set(), "map errors with mcp_django.pipeline.exception_handler or refusal"
    # The scan sees what it looks for.
    assert _maps_errors(ast.parse("jsonrpc.error_response(None, exc)\nstatus = exc.http_status")) == [1, 2]


def test_an_endpoint_lives_no_longer_than_its_registry() -> None:
    registry = Registry()
    endpoint = endpoint_for(registry)
    assert endpoint_for(registry) is endpoint  # one per registry, shared by its transports
    assert endpoint_for(Registry()) is not endpoint
    registry_ref, endpoint_ref = weakref.ref(registry), weakref.ref(endpoint)
    del registry, endpoint
    gc.collect()
    assert registry_ref() is None and endpoint_ref() is None


def test_a_signals_receivers_are_found_anew_after_any_change() -> None:
    """Each sender's receivers are kept between sends (signals.Signal caches them): a receiver
    connected or disconnected since, or a weakly connected one collected, counts at the next send."""
    from mcp_django.signals import Signal

    signal = Signal()
    heard: list[str] = []

    async def first(sender: Any, **kwargs: Any) -> None:
        heard.append(f"first {sender}")

    async def second(sender: Any, **kwargs: Any) -> None:
        heard.append(f"second {sender}")

    def send(sender: str) -> None:
        asyncio.run(signal.asend(sender))

    signal.connect(first, weak=False)
    send("tool")
    signal.connect(second)  # weak: held only by this test's local name
    send("tool")
    send("prompt")
    signal.disconnect(first)
    send("tool")
    del second
    gc.collect()
    send("tool")
    assert heard == ["first tool", "first tool", "second tool", "first prompt", "second prompt", "second tool"]


def test_a_signals_sync_receivers_run_off_the_loop_before_its_async_ones() -> None:
    """A project's plain-function receiver (a Django receiver as usually written) is called in a
    worker thread, so its database work never blocks the loop; every receiver's answer is returned."""
    import threading

    from mcp_django.signals import Signal

    signal = Signal()
    loop_thread = threading.get_ident()  # asyncio.run runs its loop in this thread
    threads: list[str] = []

    def sync_receiver(sender: Any, **kwargs: Any) -> str:
        threads.append("loop" if threading.get_ident() == loop_thread else "worker")
        return f"sync {sender} {kwargs['n']}"

    async def async_receiver(sender: Any, **kwargs: Any) -> str:
        threads.append("loop" if threading.get_ident() == loop_thread else "worker")
        return f"async {sender} {kwargs['n']}"

    signal.connect(async_receiver, weak=False)
    signal.connect(sync_receiver, weak=False)
    responses = asyncio.run(signal.asend("tool", n=1))
    assert responses == [(sync_receiver, "sync tool 1"), (async_receiver, "async tool 1")]
    assert threads == ["worker", "loop"]


def test_a_call_and_its_events_carry_each_value_in_its_own_field() -> None:
    # Call.modern and read_meta build their objects positionally (matching a keyword per field
    # cost every request more than the rest of each construction): each value must still land
    # in the field it names, whatever order the fields are declared in. Call.event builds its
    # Event by keyword (Event takes no other), checked here for the values it passes.
    caps: dict[str, Any] = {"elicitation": {}}
    info = {"name": "c", "version": "1"}
    params = {
        "name": "t",
        "_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: caps, META_CLIENT_INFO: info, META_LOG_LEVEL: "info"},
    }
    meta = read_meta(params)
    assert (meta.version, meta.capabilities.raw, meta.client_info, meta.log_level) == ("2026-07-28", caps, info, "info")
    factory, notify, http = object(), object(), object()
    call = Call.modern(
        {"method": "tools/call", "params": params, "id": 7},
        meta,
        transport="http",
        principal=ANONYMOUS,
        client_address="10.0.0.1",
        request_factory=factory,  # type: ignore[arg-type]
        notify=notify,  # type: ignore[arg-type]
        http=http,
    )
    named = Call(
        method="tools/call",
        params=params,
        request_id=7,
        version="2026-07-28",
        era=Era.MODERN,
        transport="http",
        capabilities=meta.capabilities,
        principal=ANONYMOUS,
        client_info=info,
        client_address="10.0.0.1",
        notify=notify,  # type: ignore[arg-type]
        log_level="info",
        request_factory=factory,  # type: ignore[arg-type]
        http=http,
        started=call.started,
    )
    for field in fields(Call):
        assert getattr(call, field.name) == getattr(named, field.name), field.name
    assert isinstance(call.capabilities, ClientCapabilities)

    event = call.event(
        "round", since=call.started - 1, round=3, asks={"k": "elicitation/create"}, reason="r", outcome="o"
    )
    expected = Event(
        kind="round",
        era=Era.MODERN,
        transport="http",
        method="tools/call",
        target="t",
        principal=ANONYMOUS,
        request_id=7,
        client_address="10.0.0.1",
        version="2026-07-28",
        round=3,
        asks={"k": "elicitation/create"},
        reason="r",
        outcome="o",
        duration_ms=event.duration_ms,
        endpoint="default",
    )
    assert event == expected and event.duration_ms is not None and event.duration_ms >= 1000
    plain = call.event("completed")
    assert (plain.round, plain.asks, plain.reason, plain.outcome) == (None, {}, "", "")
    assert plain.asks is not call.event("completed").asks  # each event's own dict


def test_the_asgi_request_carries_each_value_in_its_own_field() -> None:
    # MCPApplication builds its HttpIn positionally too.
    seen: list[HttpIn] = []

    class Endpoint:
        async def handle(self, req: HttpIn, disconnected: Any) -> HttpOut:
            seen.append(req)
            return HttpOut(204)

    app = MCPApplication(Registry())
    app._endpoint = Endpoint()  # type: ignore[assignment]
    scope = {
        "type": "http",
        "method": "POST",
        "scheme": "https",
        "root_path": "/root",
        "path": "/mcp",
        "headers": [(b"host", b"example.com"), (b"content-length", b"2")],
        "client": ("10.0.0.2", 1234),
    }
    messages = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    asyncio.run(app(scope, receive, send))
    (req,) = seen
    assert (req.method, req.headers, req.body, req.client_address) == (
        "POST",
        {"host": "example.com", "content-length": "2"},
        b"{}",
        "10.0.0.2",
    )
    assert (req.transport, req.can_stream, req.too_large, req.scheme, req.endpoint) == (
        "http",
        True,
        False,
        "https",
        "/root /mcp",
    )
    assert callable(req.request_factory) and req.built is None


def test_a_client_gone_during_a_json_call_cancels_it_and_is_sent_nothing() -> None:
    """The client disconnects while a call answered in JSON still runs: the call is cancelled
    (its handler stops), and nothing is sent to the connection that went away."""
    registry = Registry()
    started, stopped = asyncio.Event(), asyncio.Event()

    @registry.tool()
    async def slow() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()
        return "never"

    app = MCPApplication(registry)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "slow", "arguments": {}, "_meta": meta()},
    }
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "slow"}
    scope = {
        "type": "http",
        "method": "POST",
        "scheme": "http",
        "root_path": "",
        "path": "/mcp",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json"),
            *((k.encode(), v.encode()) for k, v in headers.items()),
        ],
        "client": ("127.0.0.1", 1234),
    }
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        body = [{"type": "http.request", "body": orjson.dumps(call), "more_body": False}]

        async def receive() -> dict[str, Any]:
            if body:
                return body.pop(0)
            await started.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await asyncio.wait_for(app(scope, receive, send), 10)

    with mcp_settings(AUDIT={"ENABLED": False}):  # no database here for the cancelled call's row
        asyncio.run(run())
    assert stopped.is_set() and sent == []


def test_the_engines_per_call_objects_keep_the_order_their_builders_pass() -> None:
    # The request-state boundary builds Prior, and the replay engine its backend and Outcome,
    # positionally on every call: a reordered field would take another's value.
    assert [f.name for f in fields(replay.Prior)] == ["answers", "asked", "state", "round", "responses"]
    assert fields(replay.Outcome)[0].name == "value"
    parameters = list(inspect.signature(replay.ReplayBackend.__init__).parameters)
    assert parameters == ["self", "call", "known", "asked", "responses"]


def test_a_notifications_malformed_params_are_read_as_none() -> None:
    # A notification is never refused (nothing answers it): its chain (tracing, a project's
    # stages) must still find an object in call.params.
    record = type("Record", (), {"version": "2025-11-25", "capabilities": ClientCapabilities(), "client_info": None})
    message = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": 1.5}
    call = Call.in_session(
        message,
        record,
        transport="websocket",
        principal=ANONYMOUS,
        client_address=None,
        request_factory=None,
        log_level=None,
        session=None,
        control=None,
    )
    assert (call.params, call.request_id, call.log_level) == ({}, None, "debug")


def test_what_is_kept_per_handler_is_bounded() -> None:
    """Handlers registered and removed at run time are not kept for ever by the chains' cache."""
    built: list[object] = []
    kept = pipeline.per_handler(lambda handler: built.append(handler) or handler)

    class Handler:
        pass

    handlers = [Handler() for _ in range(5)]
    for handler in handlers:
        assert kept(handler) is handler
    assert kept(handlers[-1]) is handlers[-1] and built == handlers  # built once, then kept
    assert kept.cache_info().maxsize == 4096


def test_a_sync_stage_keeps_its_choice_of_calls_in_its_thread() -> None:
    """A sync stage runs in a worker thread behind a wrapper; the wrapper answers for it which calls
    it applies to, whichever way the stage says it (``applies_to``, or ``eras`` and ``methods``)."""

    def listings_only(call: Call, call_next: Any) -> dict[str, Any]:
        return call_next(call)  # type: ignore[no-any-return]

    listings_only.applies_to = lambda era, method: method.endswith("/list")  # type: ignore[attr-defined]

    def modern_calls(call: Call, call_next: Any) -> dict[str, Any]:
        return call_next(call)  # type: ignore[no-any-return]

    modern_calls.eras = {Era.MODERN}  # type: ignore[attr-defined]
    modern_calls.methods = {"tools/call"}  # type: ignore[attr-defined]

    for stage, wanted in (
        (listings_only, {(Era.MODERN, "tools/list"), (Era.LEGACY, "tools/list")}),
        (modern_calls, {(Era.MODERN, "tools/call")}),
    ):
        in_thread = pipeline.adapted(stage)
        assert in_thread is not stage and asyncio.iscoroutinefunction(in_thread)
        every = {(era, method) for era in Era for method in ("tools/list", "tools/call", "ping")}
        assert {(era, method) for era, method in every if pipeline.applies(in_thread, era, method)} == wanted
