"""The :class:`~mcp_django.asks.call.Call` of one request, built alike by every transport."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..asks.call import Call
from ..auth import Principal
from ..protocol.revisions import Era, RequestMeta


def modern_call(
    message: dict[str, Any],
    meta: RequestMeta,
    *,
    transport: str,
    principal: Principal,
    client_address: str | None,
    request_factory: Callable[[], Any] | None,
    notify: Callable[[dict[str, Any]], None] | None = None,
) -> Call:
    """A 2026-07-28 request: everything about the client comes from this request's ``_meta``."""
    return Call(
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
    )


def session_call(
    message: dict[str, Any],
    record: Any,
    *,
    transport: str,
    principal: Principal,
    client_address: str | None,
    request_factory: Callable[[], Any] | None,
    log_level: str | None,
    session: Any,
    notify: Callable[[dict[str, Any]], None] | None = None,
) -> Call:
    """A legacy request: the client's version and capabilities are the session's (``record``)."""
    return Call(
        method=message["method"],
        params=message.get("params") or {},
        request_id=message["id"],
        version=record.version,
        era=Era.LEGACY,
        transport=transport,
        capabilities=record.capabilities,
        principal=principal,
        client_info=record.client_info,
        client_address=client_address,
        notify=notify,
        log_level=log_level,
        request_factory=request_factory,
        session=session,
    )
