"""The operation one view tool performs: the request it builds and what the view's response becomes."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urlencode

from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.core.handlers.base import BaseHandler
from django.core.handlers.wsgi import WSGIRequest
from django.http import Http404, HttpRequest
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, resolve, reverse
from django.urls.exceptions import Resolver404
from django.utils.html import strip_tags

from ..content import Text, ToolResult
from ..protocol.jsonrpc import MCPError
from ..schema.drf import error_lines

logger = logging.getLogger("mcp_django")

# Headers of the MCP request that must not reach the view: the credentials (the principal is
# passed on instead), the MCP protocol headers, and what describes the MCP body rather than the view's.
DROPPED_HEADERS = (
    "HTTP_AUTHORIZATION",
    "HTTP_COOKIE",
    "HTTP_ACCEPT",
    "HTTP_MCP_",
    "HTTP_CONTENT_",
    "HTTP_LAST_EVENT_ID",
)


def view_class_of(view: Any) -> Any:
    """The class behind ``view``: a class, or what ``as_view()`` made (``view_class``/``cls``)."""
    if isinstance(view, type):
        return view
    return getattr(view, "cls", None) or getattr(view, "view_class", None)


@dataclass(eq=False)
class Operation:
    """One tool's view call: which view, which HTTP method, which action, and where each argument goes."""

    view: Any
    cls: Any
    method: str
    action: str | None = None
    actions_map: dict[str, str] | None = None
    initkwargs: dict[str, Any] = field(default_factory=dict)
    detail: bool = False
    path_params: tuple[str, ...] = ()
    # "json" (DRF) or "form" (plain Django views read request.POST).
    body_format: str = "json"
    drf: bool = True

    @cached_property
    def view_func(self) -> Any:
        if self.actions_map is not None:
            func = self.cls.as_view(self.actions_map, **self.initkwargs)
        elif isinstance(self.view, type):
            func = self.cls.as_view(**self.initkwargs)
        else:
            func = self.view
        # The atomic block Django's handler wraps a view in when ATOMIC_REQUESTS is on. It
        # also means an ask that ends an attempt rolls back what the attempt wrote.
        return BaseHandler().make_view_atomic(func)

    @cached_property
    def _routes(self) -> list[str]:
        """Names (with namespaces) of the URL patterns that route to this view and action."""
        found: list[str] = []

        def walk(patterns: Iterable[Any], namespace: str) -> None:
            for p in patterns:
                if isinstance(p, URLResolver):
                    ns = f"{namespace}:{p.namespace}" if namespace and p.namespace else (p.namespace or namespace)
                    walk(p.url_patterns, ns)
                elif isinstance(p, URLPattern) and p.name and self._routes_here(p.callback):
                    found.append(f"{namespace}:{p.name}" if namespace else p.name)

        try:
            walk(get_resolver().url_patterns, "")
        except Exception:  # a broken URLconf must not break the tool; it falls back to no URL
            logger.exception("mcp_django: could not read the URLconf to find %s", self.cls or self.view)
        return found

    def instance(self) -> Any:
        """A view instance for this action with no request yet (for schemas and permission checks)."""
        view = self.cls(**self.initkwargs)
        view.request = view.format_kwarg = None
        view.args, view.kwargs = (), {}
        if self.action is not None:
            view.action = self.action
            view.action_map = self.actions_map or {self.method: self.action}
        return view

    def _routes_here(self, callback: Any) -> bool:
        if self.actions_map is not None:
            actions = getattr(callback, "actions", None) or {}
            return getattr(callback, "cls", None) is self.cls and actions.get(self.method) == self.action
        if isinstance(self.view, type):
            return view_class_of(callback) is self.cls
        return callback is self.view

    def locate(self, kwargs: dict[str, str]) -> tuple[str, Any]:
        """The path of the view's own URL for these kwargs, and its resolver match (None if not routed)."""
        for name in self._routes:
            try:
                path = reverse(name, kwargs=kwargs or None)
                return path, resolve(path)
            except (NoReverseMatch, Resolver404):
                continue
        return "/", None

    def build_request(
        self, incoming: Any, user: Any, path: str, query: str = "", body: bytes = b"", content_type: str = ""
    ) -> HttpRequest:
        meta_in: Mapping[str, Any] = getattr(incoming, "META", None) or {}
        environ: dict[str, Any] = {
            key: value
            for key, value in meta_in.items()
            if key.startswith("HTTP_") and not key.startswith(DROPPED_HEADERS) and isinstance(value, str)
        }
        scheme = incoming.scheme if incoming is not None else "http"
        environ.update(
            {
                "REQUEST_METHOD": self.method.upper(),
                "SCRIPT_NAME": "",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "SERVER_NAME": str(meta_in.get("SERVER_NAME") or "localhost"),
                "SERVER_PORT": str(meta_in.get("SERVER_PORT") or ("443" if scheme == "https" else "80")),
                "SERVER_PROTOCOL": "HTTP/1.1",
                "REMOTE_ADDR": str(meta_in.get("REMOTE_ADDR") or "127.0.0.1"),
                "HTTP_ACCEPT": "application/json",
                "wsgi.url_scheme": scheme,
                "wsgi.input": io.BytesIO(body),
                "wsgi.errors": io.StringIO(),
                "CONTENT_LENGTH": str(len(body)),
            }
        )
        environ.setdefault("HTTP_HOST", f"{environ['SERVER_NAME']}:{environ['SERVER_PORT']}")
        if content_type:
            environ["CONTENT_TYPE"] = content_type
        request = WSGIRequest(environ)
        request.user = user
        # The MCP endpoint has authenticated the caller already: force_authenticate, DRF's public
        # way to say so, works for every view (an authentication class passed through as_view()
        # would not reach an as_view() function or a view overriding get_authenticators()).
        from rest_framework.test import force_authenticate

        force_authenticate(request, user=user)
        # The MCP endpoint refuses foreign origins and non-JSON bodies, which is what CSRF
        # protection is for; an MCP client has no token to send. Django's test client sets
        # this flag too (there is no public way to exempt a request).
        request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
        session = getattr(incoming, "session", None)
        if session is not None:
            request.session = session
        return request

    def call(self, ctx: Any, arguments: dict[str, Any]) -> ToolResult:
        path_kwargs = {k: _text(arguments[k]) for k in self.path_params if k in arguments}
        rest = {k: v for k, v in arguments.items() if k not in self.path_params}
        path, match = self.locate(path_kwargs)
        query, raw, content_type = rest, b"", ""
        if self.method not in ("get", "delete"):  # a write's arguments are its body
            query = {}
            if self.body_format == "form":
                raw, content_type = _query_string(rest).encode(), "application/x-www-form-urlencoded"
            else:
                raw, content_type = json.dumps(rest).encode(), "application/json"
        request = self.build_request(ctx.request, ctx.user, path, _query_string(query), raw, content_type)
        request.mcp_context = ctx  # type: ignore[attr-defined]
        view_kwargs: dict[str, Any] = dict(path_kwargs)
        if match is not None:
            request.resolver_match = match
            # What the real URL would hand the view (converters applied).
            view_kwargs = dict(match.kwargs)
        try:
            response = self.view_func(request, **view_kwargs)
        except MCPError:
            raise  # an ask the client must answer differently (e.g. a missing capability)
        except Http404:
            return _error("Not found.")
        except PermissionDenied:
            return _error("Permission denied.")
        except (BadRequest, SuspiciousOperation):
            return _error("Bad request.")
        except Exception:
            logger.exception("mcp_django: view %s failed", self.cls or self.view)
            return _error("The view failed with an internal error.")
        # InputRequired (an ask without an answer yet) is a BaseException: it passes every
        # handler above and DRF's own, ends this attempt, and rolls back its atomic block.
        return self.result(response)

    def result(self, response: Any) -> ToolResult:
        status = int(getattr(response, "status_code", 500))
        data = _response_data(response)
        if status >= 500:
            return _error(f"The view failed (HTTP {status}).")
        if 300 <= status < 400:
            return _error(f"The view redirected (HTTP {status}) to {response.get('Location', '?')}.")
        if status >= 400:
            return _client_error(status, data)
        if data in (None, ""):
            return ToolResult(content=[Text(f"Done (HTTP {status}).")])
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        if isinstance(data, list):
            data = {"results": data}  # structured content is an object
        return ToolResult(content=[Text(text)], structured=data if isinstance(data, dict) else None)


def _text(value: Any) -> str:
    """An argument as URL text: JSON's spelling for booleans and objects, ``str()`` for the rest."""
    return json.dumps(value) if isinstance(value, (bool, dict)) else str(value)


def _query_string(values: dict[str, Any]) -> str:
    """The arguments as a query string, a list's items each under its name, None left out."""
    pairs = [
        (key, _text(item))
        for key, value in values.items()
        if value is not None
        for item in (value if isinstance(value, list) else [value])
    ]
    return urlencode(pairs)


def _response_data(response: Any) -> Any:
    """The response's payload as plain JSON values (or text); None when it has none."""
    if hasattr(response, "data") and hasattr(response, "accepted_renderer"):
        from rest_framework.utils.encoders import JSONEncoder

        # DRF's encoder: what the REST endpoint would put on the wire (decimals, dates, lazy text).
        return None if response.data is None else json.loads(json.dumps(response.data, cls=JSONEncoder))
    if hasattr(response, "render") and callable(response.render) and not getattr(response, "is_rendered", True):
        response.render()
    if getattr(response, "streaming", False):
        body = b"".join(response.streaming_content)
    else:
        body = getattr(response, "content", b"")
    if not body:
        return None
    content_type = response.get("Content-Type", "") if hasattr(response, "get") else ""
    text = body.decode(getattr(response, "charset", None) or "utf-8", errors="replace")
    if "json" in content_type:
        try:
            return json.loads(text)
        except ValueError:
            return text
    if "html" in content_type:
        text = re.sub(r"\s+", " ", strip_tags(text)).strip()
    return text


def _error(message: str, structured: dict[str, Any] | None = None) -> ToolResult:
    return ToolResult(content=[Text(message)], structured=structured, is_error=True)


def _client_error(status: int, data: Any) -> ToolResult:
    if status == 400:
        lines = error_lines(data)
        message = "Invalid input: " + "; ".join(lines) if lines else "Invalid input."
        return _error(message, {"status": status, "errors": data})
    detail = data.get("detail") if isinstance(data, dict) and set(data) == {"detail"} else None
    prefix = {
        401: "Not authenticated",
        403: "Permission denied",
        404: "Not found",
        405: "Method not allowed",
        429: "Too many requests",
    }.get(status, f"HTTP {status}")
    text = f"{prefix}: {detail}" if isinstance(detail, str) else prefix + "."
    if detail is None and isinstance(data, (dict, list)):
        text += " " + json.dumps(data, ensure_ascii=False)
    return _error(text, {"status": status, "errors": data} if data is not None else {"status": status})
