"""Existing Django and DRF views served as MCP tools.

``mcp.register_view(OrderViewSet)`` turns each action of a viewset (or each
HTTP method of an ``APIView``, a generic view, or a plain Django view) into a
tool. A call runs the *real* view: a fresh ``HttpRequest`` is built for it
(method, the view's own URL when it can be reversed, a query string for reads,
a JSON body for writes), its user is the MCP principal, and the view is called
through ``as_view()``. Nothing about the view class is patched, so its
permission classes, throttles, filter backends, per-user querysets and
pagination apply exactly as they do on its REST URL, which keeps working
unchanged beside the tool.

Why a new request rather than the MCP request itself: the view must see the
method, path, query and body of the operation it serves, not a JSON-RPC POST
to ``/mcp``. Authentication has already happened on the MCP endpoint, so the
new request carries the principal the way DRF's own ``force_authenticate``
does (``_force_auth_user``), and no credentials are re-checked or copied.
"""

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

from django.core.exceptions import BadRequest, ImproperlyConfigured, PermissionDenied, SuspiciousOperation
from django.core.handlers.base import BaseHandler
from django.core.handlers.wsgi import WSGIRequest
from django.http import Http404, HttpRequest
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, resolve, reverse
from django.urls.exceptions import Resolver404
from django.utils.html import strip_tags
from django.utils.text import camel_case_to_spaces

from . import schema as schemas
from .content import Text, ToolResult
from .protocol.jsonrpc import MCPError
from .registry import TOOL_NAME_MAX, Tool

logger = logging.getLogger("mcp_django")

STANDARD_ACTIONS: dict[str, str] = {
    "list": "get",
    "retrieve": "get",
    "create": "post",
    "update": "put",
    "partial_update": "patch",
    "destroy": "delete",
}
DETAIL_ACTIONS = frozenset({"retrieve", "update", "partial_update", "destroy"})
HTTP_METHODS = ("get", "post", "put", "patch", "delete")
# Headers of the MCP request that must not reach the view: the credentials (the
# principal is passed on instead), the MCP protocol headers, and what describes
# the MCP body rather than the view's.
_DROPPED_HEADERS = ("HTTP_AUTHORIZATION", "HTTP_COOKIE", "HTTP_ACCEPT", "HTTP_MCP_", "HTTP_CONTENT_", "HTTP_LAST_EVENT_ID")
_ACTION_TEXT = {
    "list": "List {plural}.",
    "retrieve": "Get one {name} by its {lookup}.",
    "create": "Create a {name}.",
    "update": "Replace a {name} (every writable field).",
    "partial_update": "Change some fields of a {name}.",
    "destroy": "Delete a {name}.",
}


# -- what kind of view -------------------------------------------------------------------


def _drf() -> Any:
    try:
        from rest_framework import generics, mixins, views, viewsets
    except ImportError:  # pragma: no cover - DRF is a dependency; plain views need none of it
        return None
    return views, viewsets, generics, mixins


def _is_viewset(cls: Any) -> bool:
    drf = _drf()
    return drf is not None and isinstance(cls, type) and issubclass(cls, drf[1].ViewSetMixin)


def _is_apiview(cls: Any) -> bool:
    drf = _drf()
    return drf is not None and isinstance(cls, type) and issubclass(cls, drf[0].APIView)


def _view_class(view: Any) -> Any:
    """The class behind ``view``: a class, or what ``as_view()`` made (``view_class``/``cls``)."""
    if isinstance(view, type):
        return view
    return getattr(view, "cls", None) or getattr(view, "view_class", None)


def _snake(name: str) -> str:
    for suffix in ("ViewSet", "APIView", "View"):
        if name.endswith(suffix) and name != suffix:
            name = name[: -len(suffix)]
            break
    return camel_case_to_spaces(name).replace(" ", "_") or "view"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()


def clip_name(name: str) -> str:
    """A derived name that fits the 64-character limit, kept unique by a hash of the full name."""
    if len(name) <= TOOL_NAME_MAX:
        return name
    import hashlib

    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: TOOL_NAME_MAX - 9]}_{digest}"


# -- the operation one tool performs -------------------------------------------------------


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
    query_params: frozenset[str] = frozenset()
    # "json" (DRF) or "form" (plain Django views read request.POST).
    body_format: str = "json"
    drf: bool = True
    paginated: bool = False
    wrap_list: bool = True

    # -- the view function, built once ------------------------------------------------

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

    def _routes_here(self, callback: Any) -> bool:
        if self.actions_map is not None:
            actions = getattr(callback, "actions", None) or {}
            return getattr(callback, "cls", None) is self.cls and actions.get(self.method) == self.action
        target = _view_class(callback)
        if isinstance(self.view, type):
            return target is self.cls
        return callback is self.view

    def locate(self, kwargs: dict[str, str]) -> tuple[str, Any]:
        """The path of the view's own URL for these kwargs, and its resolver match (None if not routed)."""
        for name in self._routes:
            try:
                path = reverse(name, kwargs=kwargs or None)
            except NoReverseMatch:
                continue
            try:
                return path, resolve(path)
            except Resolver404:
                continue
        return "/", None

    # -- building the request ---------------------------------------------------------

    def build_request(self, incoming: Any, user: Any, path: str, query: str = "", body: bytes = b"", content_type: str = "") -> HttpRequest:
        meta_in: Mapping[str, Any] = getattr(incoming, "META", None) or {}
        environ: dict[str, Any] = {
            key: value
            for key, value in meta_in.items()
            if key.startswith("HTTP_") and not key.startswith(_DROPPED_HEADERS) and isinstance(value, str)
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
        # DRF's force_authenticate: the view's Request takes this user without running its
        # authentication classes; the MCP endpoint has authenticated the caller already.
        request._force_auth_user = user  # type: ignore[attr-defined]
        request._force_auth_token = None  # type: ignore[attr-defined]
        # The MCP endpoint refuses foreign origins and non-JSON bodies, which is what CSRF
        # protection is for; an MCP client has no CSRF token to send.
        request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
        session = getattr(incoming, "session", None)
        if session is not None:
            request.session = session  # type: ignore[attr-defined]
        return request

    # -- one call ---------------------------------------------------------------------

    def split(self, arguments: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        path = {k: _path_value(arguments[k]) for k in self.path_params if k in arguments}
        rest = {k: v for k, v in arguments.items() if k not in self.path_params}
        if self.method in ("get", "delete"):
            return path, rest, {}
        query = {k: v for k, v in rest.items() if k in self.query_params}
        body = {k: v for k, v in rest.items() if k not in self.query_params}
        return path, query, body

    def call(self, ctx: Any, arguments: dict[str, Any]) -> ToolResult:
        path_kwargs, query, body = self.split(arguments)
        path, match = self.locate(path_kwargs)
        raw = b""
        content_type = ""
        if self.method not in ("get", "delete"):
            if self.body_format == "form":
                raw, content_type = _query_string(body).encode(), "application/x-www-form-urlencoded"
            else:
                raw, content_type = json.dumps(body).encode(), "application/json"
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
            return _error(404, "Not found.")
        except PermissionDenied:
            return _error(403, "Permission denied.")
        except (BadRequest, SuspiciousOperation):
            return _error(400, "Bad request.")
        except Exception:
            logger.exception("mcp_django: view %s failed", self.cls or self.view)
            return _error(500, "The view failed with an internal error.")
        # InputRequired (an ask without an answer yet) is a BaseException: it passes every
        # handler above and DRF's own, ends this attempt, and rolls back its atomic block.
        return self.result(response)

    def result(self, response: Any) -> ToolResult:
        status = int(getattr(response, "status_code", 500))
        data, has_data = _response_data(response)
        if status >= 500:
            return _error(status, f"The view failed (HTTP {status}).")
        if 300 <= status < 400:
            return _error(status, f"The view redirected (HTTP {status}) to {response.get('Location', '?')}.")
        if status >= 400:
            return _client_error(status, data if has_data else None)
        if not has_data or data in (None, ""):
            return ToolResult(content=[Text(f"Done (HTTP {status}).")])
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        structured = None
        if isinstance(data, dict):
            structured = data
        elif isinstance(data, list) and self.wrap_list:
            structured = {"results": data}
        return ToolResult(content=[Text(text)], structured=structured)


def _path_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value)
    return value


def _query_string(values: dict[str, Any]) -> str:
    pairs: list[tuple[str, Any]] = []
    for key, value in values.items():
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            pairs.append((key, _query_value(item)))
    return urlencode(pairs)


def _response_data(response: Any) -> tuple[Any, bool]:
    """The response's payload as plain JSON values (or text), and whether it has one."""
    if hasattr(response, "data") and hasattr(response, "accepted_renderer"):
        from rest_framework.utils.encoders import JSONEncoder

        if response.data is None:
            return None, False
        # DRF's encoder: what the REST endpoint would put on the wire (decimals, dates, lazy text).
        return json.loads(json.dumps(response.data, cls=JSONEncoder)), True
    if hasattr(response, "render") and callable(response.render) and not getattr(response, "is_rendered", True):
        response.render()
    if getattr(response, "streaming", False):
        body = b"".join(response.streaming_content)
    else:
        body = getattr(response, "content", b"")
    if not body:
        return None, False
    content_type = response.get("Content-Type", "") if hasattr(response, "get") else ""
    charset = getattr(response, "charset", None) or "utf-8"
    text = body.decode(charset, errors="replace")
    if "json" in content_type:
        try:
            return json.loads(text), True
        except ValueError:
            return text, True
    if "html" in content_type:
        text = re.sub(r"\s+", " ", strip_tags(text)).strip()
    return text, True


def _error(status: int, message: str, structured: dict[str, Any] | None = None) -> ToolResult:
    return ToolResult(content=[Text(message)], structured=structured, is_error=True)


def _client_error(status: int, data: Any) -> ToolResult:
    detail = data.get("detail") if isinstance(data, dict) and set(data) == {"detail"} else None
    if status == 400:
        lines = _flatten_errors(data)
        message = "Invalid input: " + "; ".join(lines) if lines else "Invalid input."
        return _error(status, message, {"status": status, "errors": data})
    prefix = {401: "Not authenticated", 403: "Permission denied", 404: "Not found", 405: "Method not allowed", 429: "Too many requests"}.get(status, f"HTTP {status}")
    text = f"{prefix}: {detail}" if isinstance(detail, str) else prefix + "."
    if detail is None and isinstance(data, (dict, list)):
        text += " " + json.dumps(data, ensure_ascii=False)
    return _error(status, text, {"status": status, "errors": data} if data is not None else {"status": status})


def _flatten_errors(data: Any, prefix: str = "") -> list[str]:
    """``{"quantity": ["Too many."]}`` → ``["quantity: Too many."]``; nested fields as ``a.b``."""
    if isinstance(data, dict):
        out: list[str] = []
        for key, value in data.items():
            name = "" if key in ("non_field_errors", "detail") else str(key)
            out += _flatten_errors(value, f"{prefix}.{name}" if prefix and name else (name or prefix))
        return out
    if isinstance(data, list):
        if all(isinstance(v, str) for v in data):
            return [f"{prefix}: {v}" if prefix else v for v in data]
        return [line for i, v in enumerate(data) for line in _flatten_errors(v, f"{prefix}[{i}]")]
    return [f"{prefix}: {data}" if prefix else str(data)] if data not in (None, "") else []


# -- tools ---------------------------------------------------------------------------------


@dataclass(eq=False)
class ViewTool(Tool):
    """A tool whose call runs a view; its permission check is the view's own."""

    operation: Operation | None = None

    @property
    def guarded(self) -> bool:
        # DRF views always are: their permission classes (the project default included)
        # decide who sees them in tools/list.
        return bool(self.operation and self.operation.drf) or super().guarded

    def has_permission(self, user: Any, request: Any) -> bool:
        """The view's permission classes for this action, plus the tool's own ``permissions``.

        Sync and run once per tool inside the single thread hop of ``tools/list``.
        Throttles are not consulted here (a listing must not use up the caller's rate),
        and object permissions cannot be: the view applies both when it is called.
        """
        if self.permissions and not user.has_perms(self.permissions):
            return False
        op = self.operation
        if op is None or not op.drf:
            return all(cls().has_permission(request, self) for cls in self.permission_classes)
        incoming = getattr(request, "_request", request)
        try:
            django_request = op.build_request(incoming, user, op.locate({})[0] if not op.detail else "/")
            view = op.cls(**op.initkwargs)
            if op.actions_map is not None:
                view.action_map = op.actions_map
            view.args, view.kwargs, view.format_kwarg = (), {}, None
            drf_request = view.initialize_request(django_request)
            view.request = drf_request
            if op.action and not op.actions_map:
                view.action = op.action
            checks = [cls() for cls in self.permission_classes] + list(view.get_permissions())
            return all(p.has_permission(drf_request, view) for p in checks)
        except Exception:
            # A check that cannot run says no: hiding a tool is the safe failure.
            logger.exception("mcp_django: permission check of tool %s failed", self.name)
            return False


def view_tools(
    view: Any,
    *,
    actions: Iterable[str] | None = None,
    methods: Iterable[str] | None = None,
    name: str | None = None,
    names: Mapping[str, str] | None = None,
    basename: str | None = None,
    description: str | None = None,
    descriptions: Mapping[str, str] | None = None,
    input_schema: dict[str, Any] | None = None,
    input_schemas: Mapping[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    path_params: Iterable[str] = (),
    permissions: Iterable[str] = (),
    permission_classes: Iterable[Any] = (),
    allow_anonymous: bool | None = None,
    initkwargs: Mapping[str, Any] | None = None,
    body: str = "json",
) -> list[ViewTool]:
    """The tools for one view. See :meth:`mcp_django.registry.Registry.register_view`."""
    cls = _view_class(view)
    common: dict[str, Any] = dict(
        permissions=tuple(permissions),
        permission_classes=tuple(permission_classes),
        allow_anonymous=allow_anonymous,
    )
    if body not in ("json", "form"):
        raise ImproperlyConfigured(f"register_view: body must be 'json' or 'form', not {body!r}")
    builder = _Builder(view, cls, dict(initkwargs or {}), basename, names or {}, descriptions or {}, input_schemas or {})
    if _is_viewset(cls):
        specs = builder.viewset_specs(actions)
    elif _is_apiview(cls):
        specs = builder.apiview_specs(methods, tuple(path_params), input_schema)
    else:
        specs = builder.plain_specs(methods, tuple(path_params), input_schema, body)
    if not specs:
        raise ImproperlyConfigured(f"register_view: {cls or view!r} has none of the requested actions or methods")
    if name is not None:
        if len(specs) != 1:
            raise ImproperlyConfigured("register_view: name= names one tool; this view makes several, use names={...}")
        specs[0].name = name
    tools = []
    for spec in specs:
        if len(spec.name) > TOOL_NAME_MAX:
            raise ImproperlyConfigured(f"register_view: tool name {spec.name!r} is longer than {TOOL_NAME_MAX} characters")
        if description is not None and len(specs) == 1:
            spec.description = description
        if output_schema is not None and len(specs) == 1:
            spec.output_schema = output_schema
        tools.append(spec.tool(common))
    return tools


@dataclass
class _Spec:
    name: str
    description: str
    operation: Operation
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    source: str

    def tool(self, common: dict[str, Any]) -> ViewTool:
        op = self.operation

        def handler(ctx: Any, **arguments: Any) -> ToolResult:
            return op.call(ctx, arguments)

        annotations: dict[str, Any] = {"readOnlyHint": op.method == "get"}
        if op.method != "get":
            # Only a create is known to add without changing anything; other writes may.
            annotations["destructiveHint"] = op.action != "create"
            annotations["idempotentHint"] = op.method in ("put", "delete")
        return ViewTool(
            name=self.name,
            func=handler,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=self.output_schema,
            annotations=annotations,
            accepts=frozenset(self.input_schema.get("properties", {})),
            context_param="ctx",
            source=self.source,
            operation=op,
            **common,
        )


class _Builder:
    """Derives names, schemas and operations from a view class."""

    def __init__(
        self,
        view: Any,
        cls: Any,
        initkwargs: dict[str, Any],
        basename: str | None,
        names: Mapping[str, str],
        descriptions: Mapping[str, str],
        input_schemas: Mapping[str, Any],
    ) -> None:
        self.view = view
        self.cls = cls
        self.initkwargs = initkwargs
        self.names = names
        self.descriptions = descriptions
        self.input_schemas = input_schemas
        self.model = self._model()
        if basename:
            self.prefix = basename
        elif self.model is not None and _is_viewset(cls):
            self.prefix = _slug(str(self.model._meta.verbose_name_plural))
        elif cls is not None:
            self.prefix = _snake(cls.__name__)
        else:
            self.prefix = getattr(view, "__name__", "view")

    # -- shared helpers ----------------------------------------------------------------

    def _model(self) -> Any:
        if self.cls is None:
            return None
        queryset = self.initkwargs.get("queryset", getattr(self.cls, "queryset", None))
        if queryset is not None:
            return queryset.model
        serializer = self.initkwargs.get("serializer_class", getattr(self.cls, "serializer_class", None))
        return getattr(getattr(serializer, "Meta", None), "model", None)

    def _instance(self, action: str | None, method: str, extra: Mapping[str, Any] | None = None) -> Any:
        """A view instance with no request, for reading what depends on the action."""
        view = self.cls(**{**self.initkwargs, **(extra or {})})
        view.action = action
        view.request = None
        view.format_kwarg = None
        view.args, view.kwargs = (), {}
        view.action_map = {method: action} if action else {}
        return view

    def _serializer(self, view: Any) -> Any:
        try:
            return view.get_serializer_class()
        except Exception:  # get_serializer_class may read the request, which schema time has not got
            return getattr(view, "serializer_class", None)

    def _name(self, key: str, default: str) -> str:
        return self.names.get(key) or clip_name(default)

    def _source(self, key: str) -> str:
        target = self.cls or self.view
        return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}:{key}"

    def _lookup(self, view: Any) -> tuple[str, dict[str, Any]]:
        lookup_field = getattr(view, "lookup_field", "pk")
        kwarg = getattr(view, "lookup_url_kwarg", None) or lookup_field
        schema: dict[str, Any] = {"type": "string"}
        if self.model is not None:
            try:
                model_field = (
                    self.model._meta.pk if lookup_field == "pk" else self.model._meta.get_field(lookup_field)
                )
            except Exception:
                model_field = None
            internal = model_field.get_internal_type() if model_field is not None else ""
            if "Integer" in internal or internal.endswith("AutoField"):
                schema = {"type": "integer"}
            elif internal == "UUIDField":
                schema = {"type": "string", "format": "uuid"}
        noun = str(self.model._meta.verbose_name) if self.model is not None else "object"
        schema["description"] = f"The {noun}'s {lookup_field if lookup_field != 'pk' else 'id'}."
        return kwarg, schema

    def _custom_doc(self, attr: str) -> str:
        """The docstring of ``attr`` when the project's class defines it (DRF's mixins say nothing useful)."""
        import inspect

        for klass in self.cls.__mro__:
            if attr in vars(klass):
                if klass.__module__.startswith("rest_framework."):
                    return ""
                doc = inspect.getdoc(vars(klass)[attr]) or ""
                return doc.split("\n\n", 1)[0].strip()
        return ""

    # -- viewsets -----------------------------------------------------------------------

    def viewset_specs(self, actions: Iterable[str] | None) -> list[_Spec]:
        extra = {a.__name__: a for a in self.cls.get_extra_actions()}
        available = [a for a in STANDARD_ACTIONS if hasattr(self.cls, a)] + list(extra)
        wanted = list(actions) if actions is not None else available
        unknown = [a for a in wanted if a not in available]
        if unknown:
            raise ImproperlyConfigured(f"register_view: {self.cls.__name__} has no action(s) {', '.join(unknown)}")
        specs = []
        for action in wanted:
            if action in STANDARD_ACTIONS:
                specs.append(self._standard(action, STANDARD_ACTIONS[action], {STANDARD_ACTIONS[action]: action}))
            else:
                func = extra[action]
                methods = [m for m in func.mapping if m in HTTP_METHODS]
                for method in methods:
                    key = action if len(methods) == 1 else f"{action}_{method}"
                    specs.append(self._extra(func, key, method))
        return specs

    def _standard(self, action: str, method: str, mapping: dict[str, str] | None, key: str | None = None) -> _Spec:
        view = self._instance(action, method)
        serializer = self._serializer(view)
        detail = action in DETAIL_ACTIONS
        properties: dict[str, Any] = {}
        required: list[str] = []
        output: dict[str, Any] | None = None
        query: set[str] = set()
        path_params: tuple[str, ...] = ()
        paginated = False
        override = self.input_schemas.get(key or action)
        if detail:
            kwarg, lookup = self._lookup(view)
            properties[kwarg] = lookup
            required.append(kwarg)
            path_params = (kwarg,)
        if action == "list":
            params = query_parameters(view, self.model)
            properties.update(params)
            query.update(params)
            paginated = getattr(view, "paginator", None) is not None
        elif override is not None:
            body = _schema_of(override)
            properties.update(body.get("properties", {}))
            required += body.get("required", [])
        elif action in ("create", "update", "partial_update") and serializer is not None:
            body = schemas.serializer_schema(serializer)
            properties.update(body["properties"])
            if action != "partial_update":
                required += body.get("required", [])
        if serializer is not None and action != "destroy":
            item = schemas.serializer_schema(serializer, for_output=True)
            output = list_output_schema(view, item) if action == "list" else item
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        noun = str(self.model._meta.verbose_name) if self.model is not None else self.prefix
        plural = str(self.model._meta.verbose_name_plural) if self.model is not None else self.prefix
        text = self._custom_doc(action) or _ACTION_TEXT[action].format(
            name=noun, plural=plural, lookup=path_params[0] if path_params else "id"
        )
        if action == "list" and query:
            text += " Filter, search, order and page with the optional arguments."
        op = Operation(
            view=self.view,
            cls=self.cls,
            method=method,
            action=action,
            actions_map=mapping,
            initkwargs=self.initkwargs,
            detail=detail,
            path_params=path_params,
            query_params=frozenset(query),
            paginated=paginated,
        )
        key = key or action
        return _Spec(
            name=self._name(key, f"{self.prefix}_{key}"),
            description=self.descriptions.get(key, text),
            operation=op,
            input_schema=schema,
            output_schema=output,
            source=self._source(key),
        )

    def _extra(self, func: Any, key: str, method: str) -> _Spec:
        action = func.__name__
        view = self._instance(action, method, func.kwargs)
        properties: dict[str, Any] = {}
        required: list[str] = []
        path_params: tuple[str, ...] = ()
        if func.detail:
            kwarg, lookup = self._lookup(view)
            properties[kwarg] = lookup
            required.append(kwarg)
            path_params = (kwarg,)
        # An @action's body is the serializer only when the action names one itself: the
        # viewset's default serializer describes its create/update, rarely a custom action.
        override = self.input_schemas.get(key, self.input_schemas.get(action))
        serializer = func.kwargs.get("serializer_class")
        body: dict[str, Any] | None = None
        if override is not None:
            body = _schema_of(override)
        elif serializer is not None and method != "get":
            body = schemas.serializer_schema(serializer)
        if body:
            properties.update(body.get("properties", {}))
            required += body.get("required", [])
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        doc = (func.kwargs.get("description") or func.__doc__ or "").strip().split("\n\n", 1)[0].strip()
        op = Operation(
            view=self.view,
            cls=self.cls,
            method=method,
            action=action,
            actions_map={method: action},
            initkwargs={**self.initkwargs, **func.kwargs},
            detail=bool(func.detail),
            path_params=path_params,
            query_params=frozenset(properties) - set(path_params) if method == "get" else frozenset(),
        )
        return _Spec(
            name=self._name(key, f"{self.prefix}_{key}"),
            description=self.descriptions.get(key, doc or f"{action.replace('_', ' ').capitalize()}."),
            operation=op,
            input_schema=schema,
            output_schema=None,
            source=self._source(key),
        )

    # -- APIViews and generic views -----------------------------------------------------

    def apiview_specs(self, methods: Iterable[str] | None, path_params: tuple[str, ...], input_schema: dict[str, Any] | None) -> list[_Spec]:
        drf = _drf()
        assert drf is not None
        _views, _viewsets, generics, mixins = drf
        wanted = list(methods) if methods is not None else [m for m in HTTP_METHODS if hasattr(self.cls, m)]
        generic = issubclass(self.cls, generics.GenericAPIView)
        specs = []
        for method in wanted:
            if not hasattr(self.cls, method):
                raise ImproperlyConfigured(f"register_view: {self.cls.__name__} does not handle {method.upper()}")
            action = _generic_action(self.cls, method, mixins) if generic else None
            if action is not None:
                spec = self._standard(action, method, None, key=method if method in self.names else action)
                spec.name = self._name(method, spec.name) if method in self.names else spec.name
                specs.append(spec)
                continue
            specs.append(self._method_spec(method, path_params, input_schema, drf=True, body="json"))
        return specs

    def _method_spec(self, method: str, path_params: tuple[str, ...], input_schema: dict[str, Any] | None, *, drf: bool, body: str, single: bool = False) -> _Spec:
        override = self.input_schemas.get(method, input_schema)
        if override is None:
            serializer = getattr(self.cls, "serializer_class", None) if self.cls is not None else None
            if serializer is not None and method in ("post", "put", "patch"):
                schema = schemas.serializer_schema(serializer)
            elif method in ("get", "delete") or drf:
                schema = {"type": "object", "properties": {}}
            else:
                raise ImproperlyConfigured(
                    f"register_view: {self.prefix} needs input_schema= (a plain Django view says nothing of its input)"
                )
        else:
            schema = _schema_of(override)
        schema = {**schema, "properties": dict(schema.get("properties", {}))}
        for param in path_params:
            schema["properties"].setdefault(param, {"type": "string"})
            schema["required"] = sorted({*schema.get("required", []), param})
        target = self.cls or self.view
        doc = self._custom_doc(method) if self.cls is not None else (getattr(target, "__doc__", "") or "").strip().split("\n\n", 1)[0]
        op = Operation(
            view=self.view,
            cls=self.cls,
            method=method,
            initkwargs=self.initkwargs,
            path_params=path_params,
            query_params=frozenset(schema["properties"]) - set(path_params) if method == "get" else frozenset(),
            body_format=body,
            drf=drf,
        )
        name = self.prefix if single else f"{self.prefix}_{method}"
        return _Spec(
            name=self._name(method, name),
            description=self.descriptions.get(method, doc or f"{method.upper()} {self.prefix}."),
            operation=op,
            input_schema=schema,
            output_schema=None,
            source=self._source(method),
        )

    # -- plain Django views -------------------------------------------------------------

    def plain_specs(self, methods: Iterable[str] | None, path_params: tuple[str, ...], input_schema: dict[str, Any] | None, body: str) -> list[_Spec]:
        if methods is not None:
            wanted = [m.lower() for m in methods]
        elif self.cls is not None:
            wanted = [m for m in HTTP_METHODS if hasattr(self.cls, m)]
        else:
            wanted = ["get"]
        if self.cls is None and not callable(self.view):
            raise ImproperlyConfigured(f"register_view: {self.view!r} is not a view")
        if input_schema is None and not self.input_schemas:
            raise ImproperlyConfigured(
                f"register_view: {self.prefix} is a plain Django view; pass input_schema= to say what it takes"
            )
        return [
            self._method_spec(m, path_params, input_schema, drf=False, body=body, single=len(wanted) == 1)
            for m in wanted
        ]


def _generic_action(cls: Any, method: str, mixins: Any) -> str | None:
    """The model action a generic view performs for ``method`` (ListCreateAPIView: get → list, ...)."""
    if method == "get":
        if issubclass(cls, mixins.ListModelMixin):
            return "list"
        if issubclass(cls, mixins.RetrieveModelMixin):
            return "retrieve"
    table = {"post": mixins.CreateModelMixin, "put": mixins.UpdateModelMixin, "patch": mixins.UpdateModelMixin, "delete": mixins.DestroyModelMixin}
    if method in table and issubclass(cls, table[method]):
        return {"post": "create", "put": "update", "patch": "partial_update", "delete": "destroy"}[method]
    return None


def _schema_of(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if schemas.is_serializer(value):
        return schemas.serializer_schema(value)
    return schemas.type_schema(value) or {"type": "object", "properties": {}}


# -- list parameters and list output ---------------------------------------------------------


def query_parameters(view: Any, model: Any) -> dict[str, Any]:
    """The arguments a list action takes: filters, search, ordering and pagination, as the view has them."""
    out: dict[str, Any] = {}
    for backend_cls in getattr(view, "filter_backends", ()) or ():
        out.update(_backend_parameters(backend_cls, view, model))
    paginator = getattr(view, "paginator", None)
    if paginator is not None:
        for param in paginator.get_schema_operation_parameters(view):
            schema = openapi_to_json_schema(param.get("schema", {}))
            if param.get("description"):
                schema["description"] = str(param["description"])
            if schema.get("type") == "integer" and param["name"] != "offset":
                schema["minimum"] = 1
            elif param["name"] == "offset":
                schema["minimum"] = 0
            max_size = getattr(paginator, "max_page_size", None) or getattr(paginator, "max_limit", None)
            if max_size and param["name"] in (getattr(paginator, "page_size_query_param", None), getattr(paginator, "limit_query_param", None)):
                schema["maximum"] = max_size
            out[param["name"]] = schema
    return out


def _backend_parameters(backend_cls: Any, view: Any, model: Any) -> dict[str, Any]:
    from rest_framework import filters

    try:
        from django_filters.rest_framework import DjangoFilterBackend
    except ImportError:
        DjangoFilterBackend = None  # noqa: N806 - the optional class, absent without django-filter

    backend = backend_cls()
    if DjangoFilterBackend is not None and isinstance(backend, DjangoFilterBackend):
        return filterset_parameters(backend, view, model)
    if isinstance(backend, filters.SearchFilter):
        fields = getattr(view, "search_fields", None)
        if not fields:
            return {}
        names = ", ".join(f.lstrip("^=@$") for f in fields)
        return {backend.search_param: {"type": "string", "description": f"Search text, matched against {names}."}}
    if isinstance(backend, filters.OrderingFilter):
        fields = getattr(view, "ordering_fields", None)
        schema: dict[str, Any] = {"type": "string", "description": "Order by a field; '-' first for descending; several comma-separated."}
        if fields and fields != "__all__":
            names = [f if isinstance(f, str) else f[0] for f in fields]
            alternatives = "|".join(re.escape(n) for n in names)
            schema["pattern"] = f"^-?({alternatives})(,-?({alternatives}))*$"
            schema["description"] += f" One of: {', '.join(names)}."
        return {backend.ordering_param: schema}
    # Any other backend that describes itself for OpenAPI describes itself here too.
    out: dict[str, Any] = {}
    try:
        params = backend.get_schema_operation_parameters(view)
    except Exception:
        return out
    for param in params or ():
        if param.get("in") == "query" and param.get("name"):
            schema = openapi_to_json_schema(param.get("schema", {}))
            if param.get("description"):
                schema["description"] = str(param["description"])
            out[param["name"]] = schema
    return out


def filterset_parameters(backend: Any, view: Any, model: Any) -> dict[str, Any]:
    """One argument per django-filter filter, typed (django-filter's own OpenAPI says "string" for all)."""
    queryset = model._default_manager.none() if model is not None else None
    try:
        filterset_class = backend.get_filterset_class(view, queryset)
    except Exception:
        logger.exception("mcp_django: could not read the filterset of %s", type(view).__name__)
        return {}
    if filterset_class is None:
        return {}
    out: dict[str, Any] = {}
    for name, f in filterset_class.base_filters.items():
        out.update(filter_schema(name, f))
    return out


def filter_schema(name: str, f: Any) -> dict[str, Any]:
    import django_filters as df

    def described(schema: dict[str, Any], text: str | None = None) -> dict[str, Any]:
        label = text or (str(f.label) if f.label else None)
        if label:
            schema["description"] = label
        return schema

    if isinstance(f, df.DateFromToRangeFilter):
        return {f"{name}_after": described({"type": "string", "format": "date"}), f"{name}_before": described({"type": "string", "format": "date"})}
    if isinstance(f, df.RangeFilter):
        return {f"{name}_min": described({"type": "number"}), f"{name}_max": described({"type": "number"})}
    if isinstance(f, df.BaseCSVFilter):
        return {name: described({"type": "string"}, f"{f.label or name} (comma-separated values)")}
    schema: dict[str, Any]
    if isinstance(f, (df.MultipleChoiceFilter, df.ModelMultipleChoiceFilter)):
        schema = {"type": "array", "items": _choice_schema(f)}
    elif isinstance(f, (df.ChoiceFilter, df.ModelChoiceFilter)):
        schema = _choice_schema(f)
    elif isinstance(f, df.BooleanFilter):
        schema = {"type": "boolean"}
    elif isinstance(f, df.NumberFilter):
        schema = {"type": "number"}
    elif isinstance(f, df.IsoDateTimeFilter) or isinstance(f, df.DateTimeFilter):
        schema = {"type": "string", "format": "date-time"}
    elif isinstance(f, df.DateFilter):
        schema = {"type": "string", "format": "date"}
    elif isinstance(f, df.TimeFilter):
        schema = {"type": "string", "format": "time"}
    elif isinstance(f, df.UUIDFilter):
        schema = {"type": "string", "format": "uuid"}
    else:
        schema = {"type": "string"}
    return {name: described(schema)}


def _choice_schema(f: Any) -> dict[str, Any]:
    import django_filters as df

    if isinstance(f, (df.ModelChoiceFilter, df.ModelMultipleChoiceFilter)):
        queryset = f.queryset
        model = getattr(queryset, "model", None)
        internal = model._meta.pk.get_internal_type() if model is not None else ""
        return {"type": "integer"} if "Integer" in internal or internal.endswith("AutoField") else {"type": "string"}
    choices = f.extra.get("choices")
    if callable(choices) or choices is None:
        return {"type": "string"}
    values = [schemas._choice(c[0]) for c in choices if c[0] not in ("", None)]
    schema: dict[str, Any] = {"enum": values}
    if all(isinstance(v, str) for v in values):
        schema["type"] = "string"
    return schema


def list_output_schema(view: Any, item: dict[str, Any]) -> dict[str, Any]:
    """What a list action returns: the paginator's envelope, or ``{"results": [...]}`` unpaginated."""
    items = {"type": "array", "items": item}
    paginator = getattr(view, "paginator", None)
    if paginator is None:
        return {"type": "object", "properties": {"results": items}, "required": ["results"]}
    try:
        return openapi_to_json_schema(paginator.get_paginated_response_schema(items))
    except Exception:
        return {"type": "object", "properties": {"results": items}}


def openapi_to_json_schema(schema: Any) -> Any:
    """DRF describes pagination and filters in OpenAPI 3.0; JSON Schema says ``nullable`` as a type."""
    if isinstance(schema, list):
        return [openapi_to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: openapi_to_json_schema(v) for k, v in schema.items() if k not in ("nullable", "example")}
    if schema.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out
