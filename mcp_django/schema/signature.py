"""A handler's parameters: the input schema clients see, and arguments converted into the declared types
(a signature becomes one msgspec Struct at registration: an annotation with no schema fails there)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from typing import Annotated, Any, get_type_hints

import docstring_parser
import msgspec
from django.core.exceptions import ImproperlyConfigured

from .drf import is_serializer, serializer_schema
from .types import SchemaError, dec_hook, is_typeddict, json_schema, prepare, problem, to_jsonable, type_schema
from .validator import Validator, shape_problem, validator_for


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring (its summary), indentation removed as ``inspect.cleandoc`` does."""
    if not doc:
        return ""
    return inspect.cleandoc(doc).split("\n\n", 1)[0].strip()


def parameter_descriptions(func: Any) -> dict[str, str]:
    """Each documented parameter's text, from an ``Args:``/``Parameters``/``:param x:`` section."""
    doc = inspect.getdoc(func)
    if not doc:
        return {}
    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:
        return {}
    return {p.arg_name: " ".join(p.description.split()) for p in parsed.params if p.description}


class ArgumentsInvalid(ValueError):
    """Arguments that do not fit the schema; ``problems`` name each field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def resolved_hints(func: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The annotations of ``func`` that resolve, and the text of those that do not (by name): one
    that cannot (``ctx``'s type imported only for type checking) does not keep the others from being read."""
    try:
        return get_type_hints(func, include_extras=True), {}
    except Exception:
        pass
    hints: dict[str, Any] = {}
    failed: dict[str, str] = {}
    namespace = getattr(inspect.unwrap(func), "__globals__", {})
    for name, annotation in getattr(func, "__annotations__", {}).items():
        holder = types.SimpleNamespace(__annotations__={name: annotation}, __globals__=namespace)
        try:
            hints[name] = get_type_hints(holder, globalns=namespace, include_extras=True)[name]
        except Exception:
            failed[name] = annotation if isinstance(annotation, str) else repr(annotation)
    return hints, failed


def _default(value: Any) -> tuple[Any, str | None]:
    """A parameter default and the description it carries (``x: int = Field(3, description=...)``)."""
    if type(value).__name__ == "FieldInfo" and hasattr(value, "is_required"):
        default = inspect.Parameter.empty if value.is_required() else value.get_default(call_default_factory=True)
        return default, getattr(value, "description", None)
    return value, None


class Parameters:
    """The arguments a handler takes, from its signature."""

    def __init__(self, func: Any, *, skip: set[str] | frozenset[str] = frozenset(), owner: str = "") -> None:
        self.owner = owner or getattr(func, "__qualname__", repr(func))
        signature = inspect.signature(func)
        hints, unresolved = resolved_hints(func)
        docs = parameter_descriptions(func)
        fields: list[tuple[Any, ...]] = []
        defaults: dict[str, Any] = {}
        checked: list[str] = []
        self.takes_any = False
        for name, param in signature.parameters.items():
            if param.kind is param.VAR_KEYWORD:
                self.takes_any = True
                continue
            if name in skip or param.kind is param.VAR_POSITIONAL:
                continue
            where = f"{self.owner}: parameter {name!r}"
            default, field_doc = _default(param.default)
            # An annotation that did not resolve is its text, which prepare() refuses, naming it.
            prepared = prepare(hints[name] if name in hints else unresolved.get(name, Any), where)
            if prepared.needs_validator:
                checked.append(name)
            tp = prepared.type
            description = field_doc or docs.get(name)
            if description:
                tp = Annotated[tp, msgspec.Meta(description=description)]
            if default is inspect.Parameter.empty:
                fields.append((name, tp))
            else:
                fields.append((name, typing.Union[tp, msgspec.UnsetType], msgspec.UNSET))  # noqa: UP007
                defaults[name] = default
        self.names = tuple(f[0] for f in fields)
        self.required = any(len(f) == 2 for f in fields)
        self.struct = msgspec.defstruct(
            "_HandlerArguments", fields, kw_only=True, forbid_unknown_fields=not self.takes_any, module=__name__
        )
        try:
            schema = json_schema(self.struct)
            # Builds the converter now: a union msgspec cannot decode fails here, not on a call.
            msgspec.convert({}, self.struct)
        except msgspec.ValidationError:
            pass
        except (SchemaError, TypeError, ValueError) as exc:
            raise SchemaError(f"{self.owner}: {exc}") from None
        properties = schema.setdefault("properties", {})
        for name, default in defaults.items():
            try:
                properties[name]["default"] = to_jsonable(default)
            except (TypeError, ValueError):
                pass  # a default with no JSON form is simply not shown
        if self.takes_any:
            schema.pop("additionalProperties", None)
        schema.pop("title", None)
        schema.pop("description", None)
        self.schema: dict[str, Any] = schema
        # The parameters with keywords only a JSON Schema validator enforces (Annotated[str, {"format": ...}]).
        self.checked: dict[str, Any] | None = None
        if checked:
            self.checked = {"type": "object", "properties": {name: properties[name] for name in checked}}
            if "$defs" in schema:
                self.checked["$defs"] = schema["$defs"]

    def convert(self, arguments: dict[str, Any], *, strict: bool = True) -> dict[str, Any]:
        """The handler's keyword arguments, in their declared types; raises :class:`ArgumentsInvalid`.
        ``strict=False`` also reads numbers, booleans... from strings (prompt arguments, URI variables)."""
        if self.checked is not None:
            errors = validator_for(self.checked).errors(arguments)
            if errors:
                raise ArgumentsInvalid(errors)
        if not arguments and not self.required:
            return {}  # nothing sent, nothing required: every parameter keeps its default
        try:
            values = msgspec.convert(arguments, self.struct, strict=strict, dec_hook=dec_hook)
        except msgspec.ValidationError as exc:
            raise ArgumentsInvalid([problem(exc)]) from None
        unset = msgspec.UNSET
        out = {name: value for name in self.names if (value := getattr(values, name)) is not unset}
        if self.takes_any:
            out.update((k, v) for k, v in arguments.items() if k not in out and k not in self.names)
        return out


class SchemaArguments:
    """Arguments checked against a schema given verbatim (``input_schema=``), passed on as sent. Compiled by
    the first call or ``manage.py check`` (E016): jsonschema-rs is imported only when a schema is used."""

    def __init__(self, schema: dict[str, Any], accepts: frozenset[str] | None = None, owner: str = "") -> None:
        self.schema = schema
        self.accepts = accepts
        self.owner = owner
        problem = shape_problem(schema)
        if problem is not None:
            raise ImproperlyConfigured(f"{owner}: input_schema is {problem}")

    @property
    def validator(self) -> Validator:
        """The compiled schema; raises ``ImproperlyConfigured`` when it is no valid schema."""
        try:
            return validator_for(self.schema)
        except ImproperlyConfigured as exc:
            raise ImproperlyConfigured(f"{self.owner}: input_schema is {exc}") from None

    def convert(self, arguments: dict[str, Any], *, strict: bool = True) -> dict[str, Any]:
        problems = self.validator.errors(arguments)
        if self.accepts is not None:
            problems += [f"{name}: unexpected argument" for name in arguments if name not in self.accepts]
        if problems:
            raise ArgumentsInvalid(problems)
        return arguments


def output_schema(func: Any, owner: str = "") -> dict[str, Any] | None:
    """The ``outputSchema`` a return annotation implies (``structuredContent`` is an object), else None."""
    hints, _ = resolved_hints(func)
    tp = hints.get("return")
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    if tp is None or not isinstance(tp, type) or tp.__module__ == "mcp_django.content" or hasattr(tp, "to_dict"):
        return None  # content blocks and ToolResult say what they are themselves
    if is_serializer(tp):
        return serializer_schema(tp, for_output=True)
    pydantic = sys.modules.get("pydantic")  # a model's class exists only if Pydantic was imported
    is_model = pydantic is not None and issubclass(tp, pydantic.BaseModel)
    if not (dataclasses.is_dataclass(tp) or is_typeddict(tp) or issubclass(tp, msgspec.Struct) or is_model):
        return None
    return type_schema(tp, f"{owner or getattr(func, '__qualname__', '?')}: return annotation")
