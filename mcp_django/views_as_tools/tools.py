"""Building view tools: one per viewset action or HTTP method, with their names, schemas and
permissions; and a view registered by its dotted path, built when first needed."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import InterfaceError, OperationalError
from django.utils.module_loading import import_string
from django.utils.text import camel_case_to_spaces

from .. import schema as schemas
from ..breaker import database_down
from ..content import ToolResult
from ..handlers import TOOL_NAME_MAX, Tool, dotted_name
from .operation import Operation, view_class_of
from .parameters import list_output_schema, query_parameters

logger = logging.getLogger("mcp_django")

# The model actions: each one's HTTP method, whether it acts on one object (its lookup an
# argument), and what its tool is said to do.
STANDARD_ACTIONS: dict[str, tuple[str, bool, str]] = {
    "list": ("get", False, "List {plural}."),
    "retrieve": ("get", True, "Get one {name} by its {lookup}."),
    "create": ("post", False, "Create {a_name}."),
    "update": ("put", True, "Replace {a_name} (every writable field)."),
    "partial_update": ("patch", True, "Change some fields of {a_name}."),
    "destroy": ("delete", True, "Delete {a_name}."),
}
HTTP_METHODS = ("get", "post", "put", "patch", "delete")
# What a view without a docstring is said to do with each HTTP method ("Get the order summary.").
METHOD_VERBS = {"get": "Get", "post": "Submit", "put": "Replace", "patch": "Update", "delete": "Delete"}
# Words generic views' class names end with that the tool's action already says (NoteList → note_list, not note_list_list).
GENERIC_SUFFIXES = ("list", "create", "detail", "retrieve", "update", "destroy")
# Words that begin with a vowel letter but a consonant sound, and the reverse.
_A_BEFORE = ("one", "once", "eu", "uni", "use", "usa", "usu", "uti", "ure", "uro", "ufo")
_AN_BEFORE = ("hour", "honest", "honor", "honour", "heir")


@dataclass(eq=False)
class ViewTool(Tool):
    """A tool whose call runs a view; its permission check is the view's own."""

    operation: Operation | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        # DRF views always are guarded: their permission classes (the project default included)
        # decide who sees them in tools/list.
        self.guarded = self.guarded or bool(self.operation and self.operation.drf)

    def classes_permit(self, user: Any, request: Any) -> bool:
        """A DRF view's permission classes for this action, with the tool's own; throttles (a listing
        must not use up the caller's rate) and object permissions are left to the call."""
        op = self.operation
        if op is None or not op.drf:
            return super().classes_permit(user, request)
        try:
            # DRF's Request passes the MCP request's headers, scheme and session through.
            django_request = op.build_request(request, user, op.locate({})[0] if not op.detail else "/")
            view = op.instance()
            view.request = drf_request = view.initialize_request(django_request)
            checks = [cls() for cls in self.permission_classes] + list(view.get_permissions())
            return all(p.has_permission(drf_request, view) for p in checks)
        except Exception as exc:
            # A check that cannot run says no: hiding a tool is the safe failure.
            if isinstance(exc, (OperationalError, InterfaceError)) and database_down():
                # A known outage, logged once by the database's breaker: no line (or traceback) per tool.
                return False
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
    scopes: Iterable[str] = (),
    initkwargs: Mapping[str, Any] | None = None,
    body: str = "json",
) -> list[ViewTool]:
    """The tools for one view. See :meth:`mcp_django.registry.Registry.register_view`."""
    from rest_framework.views import APIView

    cls = view_class_of(view)
    common: dict[str, Any] = dict(
        permissions=tuple(permissions),
        permission_classes=tuple(permission_classes),
        allow_anonymous=allow_anonymous,
        scopes=tuple(scopes),
    )
    if body not in ("json", "form"):
        raise ImproperlyConfigured(f"register_view: body must be 'json' or 'form', not {body!r}")
    builder = _Builder(
        view, cls, dict(initkwargs or {}), basename, names or {}, descriptions or {}, input_schemas or {}
    )
    builder.input_schema, builder.path_params, builder.body = input_schema, tuple(path_params), body
    # HTTP methods are named in either case, as a view's attributes are lower case.
    methods = None if methods is None else [m.lower() for m in methods]
    if is_viewset(cls):
        specs = builder.viewset_specs(actions)
    elif isinstance(cls, type) and issubclass(cls, APIView):
        specs = builder.apiview_specs(methods)
    else:
        specs = builder.plain_specs(methods)
    if not specs:
        raise ImproperlyConfigured(f"register_view: {cls or view!r} has none of the requested actions or methods")
    if len(specs) == 1:
        overrides = {"name": name, "description": description, "output_schema": output_schema}
        specs[0].update({key: value for key, value in overrides.items() if value is not None})
    elif name is not None:
        raise ImproperlyConfigured("register_view: name= names one tool; this view makes several, use names={...}")
    tools = []
    for spec in specs:
        if len(spec["name"]) > TOOL_NAME_MAX:
            raise ImproperlyConfigured(
                f"register_view: tool name {spec['name']!r} is longer than {TOOL_NAME_MAX} characters"
            )
        tools.append(_view_tool(spec.pop("operation"), **spec, **common))
    return tools


def _view_tool(op: Operation, **fields: Any) -> ViewTool:
    def handler(ctx: Any, **arguments: Any) -> ToolResult:
        return op.call(ctx, arguments)

    annotations: dict[str, Any] = {"readOnlyHint": op.method == "get"}
    if op.method != "get":
        # Only a create is known to add without changing anything; other writes may.
        annotations["destructiveHint"] = op.action != "create"
        annotations["idempotentHint"] = op.method in ("put", "delete")
    accepts = frozenset(fields["input_schema"].get("properties", {}))
    return ViewTool(func=handler, annotations=annotations, accepts=accepts, context_param="ctx", operation=op, **fields)


@dataclass
class _Builder:
    """Derives names, schemas and operations from a view class."""

    view: Any
    cls: Any
    initkwargs: dict[str, Any]
    basename: str | None
    names: Mapping[str, str]
    descriptions: Mapping[str, str]
    input_schemas: Mapping[str, Any]
    # What register_view() says of a view that is not a viewset.
    input_schema: dict[str, Any] | None = None
    path_params: tuple[str, ...] = ()
    body: str = "json"

    def __post_init__(self) -> None:
        self.model = None
        if self.cls is not None:
            queryset = self.initkwargs.get("queryset", getattr(self.cls, "queryset", None))
            serializer = self.initkwargs.get("serializer_class", getattr(self.cls, "serializer_class", None))
            model = getattr(getattr(serializer, "Meta", None), "model", None)
            self.model = queryset.model if queryset is not None else model
        if self.basename:
            self.prefix = self.basename
        elif self.model is not None and is_viewset(self.cls):
            self.prefix = re.sub(r"[^A-Za-z0-9]+", "_", str(self.model._meta.verbose_name_plural)).strip("_").lower()
        elif self.cls is not None:
            self.prefix = snake_name(self.cls.__name__)
        else:
            self.prefix = getattr(self.view, "__name__", "view")

    def _operation(self, method: str, **fields: Any) -> Operation:
        fields.setdefault("initkwargs", self.initkwargs)
        return Operation(view=self.view, cls=self.cls, method=method, **fields)

    def _spec(
        self,
        key: str,
        name: str,
        text: str,
        op: Operation,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The tool's fields (``name=``, ``description=`` and ``output_schema=`` may yet replace theirs)."""
        return {
            "name": self.names.get(key) or clip_name(name),
            "description": self.descriptions.get(key, text),
            "operation": op,
            "input_schema": input_schema,
            "output_schema": output_schema,
            "source": f"{dotted_name(self.cls or self.view)}:{key}",
        }

    def _lookup(self, view: Any) -> dict[str, Any]:
        """The detail argument (the URL kwarg), typed after the model field it looks up."""
        lookup_field = getattr(view, "lookup_field", "pk")
        schema: dict[str, Any] = {"type": "string"}
        if self.model is not None:
            try:
                model_field = self.model._meta.pk if lookup_field == "pk" else self.model._meta.get_field(lookup_field)
            except Exception:
                model_field = None
            internal = model_field.get_internal_type() if model_field is not None else ""
            if "Integer" in internal or internal.endswith("AutoField"):
                schema = {"type": "integer"}
            elif internal == "UUIDField":
                schema = {"type": "string", "format": "uuid"}
        noun = str(self.model._meta.verbose_name) if self.model is not None else "object"
        schema["description"] = f"The {noun}'s {lookup_field if lookup_field != 'pk' else 'id'}."
        return {getattr(view, "lookup_url_kwarg", None) or lookup_field: schema}

    def _custom_doc(self, attr: str) -> str:
        """The docstring of ``attr`` when the project's class defines it (DRF's mixins say nothing useful)."""
        for klass in self.cls.__mro__:
            if attr in vars(klass):
                if klass.__module__.startswith("rest_framework."):
                    return ""
                return schemas.first_paragraph(inspect.getdoc(vars(klass)[attr]))
        return ""

    def _class_doc(self) -> str:
        """The view class's own docstring (not one inherited from Django's or DRF's classes)."""
        for klass in self.cls.__mro__:
            if klass.__module__.startswith(("rest_framework.", "django.")) or klass is object:
                return ""
            if vars(klass).get("__doc__"):
                return schemas.first_paragraph(vars(klass)["__doc__"])
        return ""

    def viewset_specs(self, actions: Iterable[str] | None) -> list[dict[str, Any]]:
        extra = {a.__name__: a for a in self.cls.get_extra_actions()}
        available = [a for a in STANDARD_ACTIONS if hasattr(self.cls, a)] + list(extra)
        wanted = list(actions) if actions is not None else available
        unknown = [a for a in wanted if a not in available]
        if unknown:
            raise ImproperlyConfigured(f"register_view: {self.cls.__name__} has no action(s) {', '.join(unknown)}")
        specs = []
        for action in wanted:
            if action in STANDARD_ACTIONS:
                specs.append(self._standard(action, viewset=True))
            else:
                func = extra[action]
                methods = [m for m in func.mapping if m in HTTP_METHODS]
                for method in methods:
                    specs.append(self._extra(func, action if len(methods) == 1 else f"{action}_{method}", method))
        return specs

    def _standard(self, action: str, *, viewset: bool, key: str | None = None) -> dict[str, Any]:
        """A model action (list, retrieve, create...) of a viewset or a generic view."""
        key = key or action
        method, detail, says = STANDARD_ACTIONS[action]
        op = self._operation(method, action=action, actions_map={method: action} if viewset else None, detail=detail)
        view = op.instance()
        try:
            serializer = view.get_serializer_class()
        except Exception:  # get_serializer_class may read the request, which schema time has not got
            serializer = getattr(view, "serializer_class", None)
        lookup = self._lookup(view) if op.detail else {}
        op.path_params = tuple(lookup)
        body: dict[str, Any] | None = None
        output = None
        override = self.input_schemas.get(key)
        query = query_parameters(view, self.model) if action == "list" else {}
        if action == "list":
            body = {"properties": query}
        elif override is not None:
            body = _schema_of(override)
        elif action in ("create", "update", "partial_update") and serializer is not None:
            body = schemas.serializer_schema(serializer)
            if action == "partial_update":
                body = {"properties": body["properties"]}  # any field may be left out
        if serializer is not None and action != "destroy":
            item = schemas.serializer_schema(serializer, for_output=True)
            output = list_output_schema(view, item) if action == "list" else item
        noun = str(self.model._meta.verbose_name) if self.model is not None else self.prefix
        plural = str(self.model._meta.verbose_name_plural) if self.model is not None else self.prefix
        text = self._custom_doc(action) or says.format(
            name=noun, a_name=with_article(noun), plural=plural, lookup=op.path_params[0] if lookup else "id"
        )
        if query:
            text += " Filter, search, order and page with the optional arguments."
        return self._spec(key, f"{self.prefix}_{key}", text, op, _object(lookup, body), output)

    def _extra(self, func: Any, key: str, method: str) -> dict[str, Any]:
        """An ``@action`` of a viewset, for one of its HTTP methods."""
        action = func.__name__
        op = self._operation(
            method,
            action=action,
            actions_map={method: action},
            initkwargs={**self.initkwargs, **func.kwargs},
            detail=bool(func.detail),
        )
        lookup = self._lookup(op.instance()) if op.detail else {}
        op.path_params = tuple(lookup)
        # An @action's body is the serializer only when the action names one itself: the
        # viewset's default serializer describes its create/update, rarely a custom action.
        override = self.input_schemas.get(key, self.input_schemas.get(action))
        serializer = func.kwargs.get("serializer_class")
        body: dict[str, Any] | None = None
        if override is not None:
            body = _schema_of(override)
        elif serializer is not None and method != "get":
            body = schemas.serializer_schema(serializer)
        schema = _object(lookup, body)
        doc = schemas.first_paragraph(func.kwargs.get("description") or func.__doc__)
        text = doc or f"{action.replace('_', ' ').capitalize()}."
        return self._spec(key, f"{self.prefix}_{key}", text, op, schema)

    def apiview_specs(self, methods: list[str] | None) -> list[dict[str, Any]]:
        from rest_framework import generics

        wanted = methods if methods is not None else [m for m in HTTP_METHODS if hasattr(self.cls, m)]
        generic = issubclass(self.cls, generics.GenericAPIView)
        if generic and not self.basename:
            # Each tool's name ends with its action: the class name need not say it again
            # (ProductListCreateView → product).
            words = snake_name(self.cls.__name__).split("_")
            while len(words) > 1 and words[-1] in GENERIC_SUFFIXES:
                words.pop()
            self.prefix = "_".join(words)
        specs = []
        for method in wanted:
            if not hasattr(self.cls, method):
                raise ImproperlyConfigured(f"register_view: {self.cls.__name__} does not handle {method.upper()}")
            action = _generic_action(self.cls, method) if generic else None
            if action is not None:
                specs.append(self._standard(action, viewset=False, key=method if method in self.names else action))
            else:
                specs.append(self._method_spec(method, drf=True, alone=len(wanted) == 1))
        return specs

    def plain_specs(self, methods: list[str] | None) -> list[dict[str, Any]]:
        if methods is not None:
            wanted = list(methods)
        elif self.cls is not None:
            wanted = [m for m in HTTP_METHODS if hasattr(self.cls, m)]
        else:
            wanted = ["get"]
        if self.cls is None and not callable(self.view):
            raise ImproperlyConfigured(f"register_view: {self.view!r} is not a view")
        if self.input_schema is None and not self.input_schemas:
            raise ImproperlyConfigured(
                f"register_view: {self.prefix} is a plain Django view; pass input_schema= to say what it takes"
            )
        return [self._method_spec(m, drf=False, alone=len(wanted) == 1) for m in wanted]

    def _method_spec(self, method: str, *, drf: bool, alone: bool) -> dict[str, Any]:
        """One HTTP method of a view; ``alone``: the view's only tool (a plain view's is named without its method)."""
        override = self.input_schemas.get(method, self.input_schema)
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
        for param in self.path_params:
            schema["properties"].setdefault(param, {"type": "string"})
            schema["required"] = sorted({*schema.get("required", []), param})
        doc = self._custom_doc(method) if self.cls is not None else schemas.first_paragraph(self.view.__doc__)
        if not doc and self.cls is not None and alone:
            # The docstring of a view class with one handler says what it does better than a generated
            # sentence (with several, it would describe each tool as the whole view).
            doc = self._class_doc()
        op = self._operation(
            method,
            path_params=self.path_params,
            body_format="json" if drf else self.body,
            drf=drf,
        )
        name = self.prefix if alone and not drf else f"{self.prefix}_{method}"
        text = f"{METHOD_VERBS.get(method, method.upper())} the {self.prefix.replace('_', ' ').strip() or 'view'}."
        return self._spec(method, name, doc or text, op, schema)


def _object(path: dict[str, Any], body: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments: the path's (required), then the body's or the query's."""
    body = body or {}
    schema: dict[str, Any] = {"type": "object", "properties": {**path, **body.get("properties", {})}}
    required = [*path, *body.get("required", [])]
    if required:
        schema["required"] = required
    return schema


def _generic_action(cls: Any, method: str) -> str | None:
    """The model action a generic view performs for ``method`` (ListCreateAPIView: get → list, ...)."""
    from rest_framework import mixins

    for action, (verb, _detail, _says) in STANDARD_ACTIONS.items():
        # DRF's mixin that performs it: ListModelMixin, ... (partial_update's is UpdateModelMixin).
        mixin = getattr(mixins, f"{action.rpartition('_')[2].capitalize()}ModelMixin")
        if verb == method and issubclass(cls, mixin):
            return action
    return None


def _schema_of(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return schemas.type_schema(value) or {"type": "object", "properties": {}}


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an", as it sounds: "an order", "a user", "an hour"."""
    word = noun.strip().lower()
    if word.startswith(_AN_BEFORE):
        return f"an {noun}"
    if not word or word.startswith(_A_BEFORE) or word[0] not in "aeiou":
        return f"a {noun}"
    return f"an {noun}"


def is_viewset(cls: Any) -> bool:
    from rest_framework.viewsets import ViewSetMixin

    return isinstance(cls, type) and issubclass(cls, ViewSetMixin)


def snake_name(name: str) -> str:
    for suffix in ("ViewSet", "APIView", "View"):
        if name.endswith(suffix) and name != suffix:
            name = name[: -len(suffix)]
            break
    return camel_case_to_spaces(name).replace(" ", "_") or "view"


def clip_name(name: str) -> str:
    """A derived name that fits the 64-character limit, kept unique by a hash of the full name."""
    if len(name) <= TOOL_NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: TOOL_NAME_MAX - 9]}_{digest}"


_OPTIONS = frozenset(inspect.signature(view_tools).parameters) - {"view"}


class ViewReference(Sequence[ViewTool]):
    """A view by dotted path: :meth:`build` imports it and makes its tools when first needed (a
    process that never lists or calls them need not import it, nor DRF), checked without the import.
    What ``register_view("dotted.path")`` returns: read as a sequence, the tools it made."""

    def __init__(self, path: str, options: Mapping[str, Any]) -> None:
        module = path.rpartition(".")[0]
        if not module or not all(part.isidentifier() for part in path.split(".")):
            raise ImproperlyConfigured(f"register_view({path!r}): not a dotted path to a view (module.attribute)")
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(f"register_view({path!r}) got unexpected option(s) {', '.join(unknown)}")
        try:
            # Finds the module without running it (its parent packages are imported).
            found = importlib.util.find_spec(module)
        except ImportError:
            found = None
        if found is None:
            raise ImproperlyConfigured(f"register_view({path!r}): there is no module {module!r}")
        self.path = path
        self.options = dict(options)
        # What build() made, once the registry's table (ToolTable.defer sets it) has built it.
        self.tools: list[ViewTool] | None = None
        self.table: Any = None

    def build(self) -> list[ViewTool]:
        """Import the view and make its tools; any failure is an ``ImproperlyConfigured`` naming the path."""
        try:
            view = import_string(self.path)
            return view_tools(view, **self.options)
        except Exception as exc:
            raise ImproperlyConfigured(f"register_view({self.path!r}): {exc}") from exc

    def __getitem__(self, index: Any) -> Any:
        # Typed by Sequence[ViewTool]; the table builds every waiting view at once.
        self.table.resolve()
        return list(self.tools or ())[index]

    def __len__(self) -> int:
        return len(self[:])

    def __repr__(self) -> str:
        return f"<ViewReference {self.path}>"
