"""One request as the pipeline and the ask engines see it, whatever transport brought it
(each transport builds it with :meth:`Call.modern` or :meth:`Call.in_session`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..auth import Principal
from ..conf import EndpointSettings
from ..protocol.jsonrpc import valid_id
from ..protocol.revisions import LATEST_LEGACY, ClientCapabilities, Era, RequestMeta
from ..signals import Event

_NO_CAPABILITIES = ClientCapabilities()
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(eq=False)
class Call:
    method: str
    params: dict[str, Any]
    request_id: Any
    version: str
    era: Era
    transport: str  # "http", "wsgi", "websocket"
    capabilities: ClientCapabilities
    principal: Principal
    client_info: dict[str, Any] | None = None
    client_address: str | None = None
    # Sends a JSON-RPC notification to the client; called on the event loop's thread.
    notify: Callable[[dict[str, Any]], None] | None = None
    log_level: str | None = None
    request_factory: Callable[[], Any] | None = field(default=None, repr=False)
    # The legacy session that sends server-to-client requests, when there is one.
    session: Any = None
    # time.perf_counter() when the request reached the engines: audit rows' durations start here.
    started: float = field(default_factory=time.perf_counter)
    # MCP tasks: the task this attempt runs for, whether ``ctx.start_task()`` may make one,
    # and the runner's cancel flag (``ctx.check_cancelled()``; None outside tasks).
    task_id: str | None = None
    may_start_task: bool = False
    cancelled: Callable[[], bool] | None = field(default=None, repr=False)
    # The settings of the endpoint serving the call (set by its pipeline), and its Registry.
    endpoint: EndpointSettings | None = field(default=None, repr=False)
    registry: Any = field(default=None, repr=False)
    # The HTTP request as the transport received it (transports.http.HttpIn), if any.
    http: Any = field(default=None, repr=False)
    # A legacy call's control of its session (protocol.legacy.SessionControl).
    control: Any = field(default=None, repr=False)
    # Entered around each legacy server-to-client request, when a stage set one (limits: open asks).
    ask_guard: Callable[[], AbstractAsyncContextManager[Any]] | None = field(default=None, repr=False)
    # While the call is traced, a tracing.CallTrace the engines tell what happens; else None.
    trace: Any = field(default=None, repr=False)

    @classmethod
    def modern(
        cls,
        message: dict[str, Any],
        meta: RequestMeta,
        *,
        transport: str,
        principal: Principal,
        client_address: str | None,
        request_factory: Callable[[], Any] | None,
        notify: Callable[[dict[str, Any]], None] | None = None,
        http: Any = None,
    ) -> Call:
        """A 2026-07-28 request: everything about the client comes from this request's ``_meta``."""
        return cls(
            method=message["method"],
            params=message.get("params") or {},
            request_id=message["id"],
            version=meta.version,
            era=Era.MODERN,
            transport=transport,
            capabilities=meta.capabilities,
            principal=principal,
            client_info=meta.client_info,
            client_address=client_address,
            notify=notify,
            log_level=meta.log_level,
            request_factory=request_factory,
            http=http,
        )

    @classmethod
    def in_session(
        cls,
        message: dict[str, Any],
        record: Any,
        *,
        transport: str,
        principal: Principal,
        client_address: str | None,
        request_factory: Callable[[], Any] | None,
        log_level: str | None,
        session: Any,
        control: Any,
        notify: Callable[[dict[str, Any]], None] | None = None,
    ) -> Call:
        """A legacy request: the client's version and capabilities are the session's (``record``;
        None before ``initialize``). A session hears every log message until ``logging/setLevel``."""
        params = message.get("params")
        return cls(
            method=message["method"],
            # A notification's malformed params are read as none: a notification is never refused.
            params=params if isinstance(params, dict) else {},
            request_id=message.get("id"),  # a notification has none
            version=LATEST_LEGACY if record is None else record.version,
            era=Era.LEGACY,
            transport=transport,
            capabilities=_NO_CAPABILITIES if record is None else record.capabilities,
            principal=principal,
            client_info=None if record is None else record.client_info,
            client_address=client_address,
            notify=notify,
            log_level=log_level or LOG_LEVELS[0],
            request_factory=request_factory,
            session=session,
            control=control,
        )

    @cached_property
    def request(self) -> Any:
        """The Django ``HttpRequest`` (built on first use on the fast path)."""
        request = self.request_factory() if self.request_factory else None
        if request is not None:
            if not hasattr(request, "user"):
                request.user = self.principal.user
            if self.endpoint is not None and not hasattr(request, "mcp_endpoint"):
                request.mcp_endpoint = self.endpoint
        return request

    @property
    def progress_token(self) -> Any:
        meta = self.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return token if valid_id(token) else None  # anything else is not echoed

    @cached_property
    def target(self) -> str:
        """The tool, prompt or resource the call names ("" when none): found once a call (the
        request state binds it, the audit event and the limits read it)."""
        value = self.params.get("uri" if self.method == "resources/read" else "name")
        return value if isinstance(value, str) else ""

    def event(self, kind: str, *, since: float | None = None, **details: Any) -> Event:
        """A :class:`mcp_django.signals.Event` about this call (``details``: its ``round``, ``asks``,
        ``reason``, ``outcome``); its duration runs from ``since`` (by default the call's start) until now."""
        started = self.started if since is None else since
        return Event(
            kind=kind,
            era=self.era,
            transport=self.transport,
            method=self.method,
            target=self.target,
            principal=self.principal,
            request_id=self.request_id,
            client_address=self.client_address,
            version=self.version,
            duration_ms=(time.perf_counter() - started) * 1000,
            endpoint=self.endpoint.name if self.endpoint is not None else "default",
            **details,
        )

    def wants_log(self, level: str) -> bool:
        # 2026-07-28: no logLevel in _meta means the client wants no log messages.
        if self.notify is None or self.log_level is None:
            return False
        try:
            return LOG_LEVELS.index(level) >= LOG_LEVELS.index(self.log_level)
        except ValueError:
            return True
