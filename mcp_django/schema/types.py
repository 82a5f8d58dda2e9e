"""Python annotations as JSON schemas, and JSON values converted into them, both by msgspec: the schema a
client sees and the check its arguments meet cannot drift apart. Pydantic and DRF types come in by hooks."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import enum
import functools
import sys
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
from django.core.exceptions import ImproperlyConfigured

from .drf import DECIMAL_PATTERN, enum_type, is_serializer, nullable, serializer_schema
from .validator import validator_for

# JSON Schema keywords with a msgspec constraint of the same meaning: enforced by the converter.
_META_KEYWORDS = {
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "multipleOf": "multiple_of",
    "pattern": "pattern",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_length",
    "maxItems": "max_length",
    "minProperties": "min_length",
    "maxProperties": "max_length",
    "title": "title",
    "description": "description",
    "examples": "examples",
}
# Constraint attributes of annotated-types objects (what pydantic.Field(ge=...) and friends carry).
_CONSTRAINT_ATTRS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern")
# Keywords that describe without constraining: safe to show whatever the converter does.
_ANNOTATION_KEYWORDS = frozenset({"default", "deprecated", "readOnly", "writeOnly", "$comment"})

Email = Annotated[str, msgspec.Meta(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", extra_json_schema={"format": "email"})]
"""A string that must look like an email address; its schema carries ``format: email``."""


_FORMATS = {datetime.datetime: "date-time", datetime.time: "time"}


class SchemaError(ImproperlyConfigured):
    """An annotation that cannot be turned into a JSON schema and a converter."""


@dataclasses.dataclass
class Prepared:
    """An annotation made ready for msgspec, its schema, and whether the converter alone enforces it."""

    type: Any
    schema: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Keywords from Annotated[..., {...}] that only a JSON Schema validator can check.
    needs_validator: bool = False


def prepare(tp: Any, where: str) -> Prepared:
    """The msgspec form of an annotation and its schema; raises :class:`SchemaError` naming ``where``."""
    state = Prepared(None)
    state.type = _prepare(tp, where, state)
    _remember_orders(tp, set(), where)
    try:
        state.schema = json_schema(state.type)  # a type msgspec cannot handle fails here, named
    except SchemaError as exc:
        raise SchemaError(f"{where}: {exc}") from None
    return state


# The declared order of each set of enum values: msgspec sorts them, and a form should
# offer choices in the order the code gives them.
_ORDERS: dict[frozenset[tuple[str, Any]], list[Any]] = {}


def _order_key(values: list[Any]) -> frozenset[tuple[str, Any]]:
    return frozenset((type(v).__name__, v) for v in values)


def _remember_orders(tp: Any, seen: set[int], where: str = "annotation") -> None:
    """Records the enum orders and the class fields' descriptions in a type: of a class field's
    ``Annotated`` extras msgspec reads only ``msgspec.Meta``, and would drop any other constraint."""
    if id(tp) in seen:
        return
    seen.add(id(tp))
    origin = get_origin(tp)
    values: list[Any] | None = None
    if origin is Literal:
        values = list(get_args(tp))
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
    if values is not None:
        with contextlib.suppress(TypeError):  # unhashable values: msgspec's order stays
            _ORDERS[_order_key(values)] = values
        return
    for arg in get_args(tp):
        _remember_orders(arg, seen, where)
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp) or issubclass(tp, msgspec.Struct)):
        try:
            hints = typing.get_type_hints(tp, include_extras=True)
        except Exception:
            return
        docs: dict[str, str] = {}
        for field_name, hint in hints.items():
            if get_origin(hint) is Annotated:
                description = _field_extras(hint, f"{where}: field {tp.__qualname__}.{field_name}")
                if description:
                    docs[field_name] = description
            _remember_orders(hint, seen, where)
        if docs:
            _FIELD_DOCS[tp.__name__] = docs


# Field descriptions of classes (by the name msgspec titles their schema with).
_FIELD_DOCS: dict[str, dict[str, str]] = {}


def _field_extras(hint: Any, where: str) -> str | None:
    """The description among a class field's Annotated extras; a constraint msgspec would drop is an error."""
    description = None
    for extra in get_args(hint)[1:]:
        meta = None if isinstance(extra, msgspec.Meta) else _meta(extra, where, Prepared(None))
        if meta is None:
            continue
        labels = ("description", "title")
        if any(getattr(meta, name) is not None for name in dir(meta) if name[0] != "_" and name not in labels):
            raise SchemaError(
                f"{where}: a constraint inside a dataclass or TypedDict must be written as msgspec.Meta(...) "
                "to be enforced"
            )
        description = meta.description or description
    return description


def _prepare(tp: Any, where: str, state: Prepared) -> Any:
    if tp is object or tp is typing.Any:
        return Any
    if isinstance(tp, (str, typing.ForwardRef)):
        raise SchemaError(f"{where}: the annotation {tp!r} could not be resolved (define or import it first)")
    origin = get_origin(tp)
    if origin is Annotated:
        base, *extras = get_args(tp)
        inner = _prepare(base, where, state)
        metas = [m for extra in extras if (m := _meta(extra, where, state)) is not None]
        return Annotated[(inner, *metas)] if metas else inner
    if tp in _FORMATS:
        # msgspec leaves these formats out because it also accepts times without an offset.
        return Annotated[tp, msgspec.Meta(extra_json_schema={"format": _FORMATS[tp]})]
    if origin in (Union, types.UnionType):
        return Union[tuple(_prepare(a, where, state) for a in get_args(tp))]  # noqa: UP007
    if origin is None and is_serializer(tp):
        return serializer_data(tp)
    if origin in (None, Literal, typing.ClassVar) or not get_args(tp):
        return tp  # a class msgspec does not know goes to _schema_hook, which refuses it
    prepared = tuple(a if a is Ellipsis else _prepare(a, where, state) for a in get_args(tp))
    try:
        return origin[prepared] if len(prepared) > 1 else origin[prepared[0]]
    except TypeError:
        return tp


def _meta(extra: Any, where: str, state: Prepared) -> msgspec.Meta | None:
    """A msgspec constraint for one Annotated extra: text, a dict of JSON Schema keywords, a Field, a Meta."""
    if isinstance(extra, msgspec.Meta):
        return extra
    kwargs: dict[str, Any] = {}
    if isinstance(extra, str):
        kwargs["description"] = extra
    elif isinstance(extra, dict):
        rest: dict[str, Any] = {}
        for key, value in extra.items():
            if key in _META_KEYWORDS and _META_KEYWORDS[key] not in kwargs:
                kwargs[_META_KEYWORDS[key]] = value
            else:
                rest[key] = value
                if key not in _ANNOTATION_KEYWORDS:
                    state.needs_validator = True
        if rest:
            kwargs["extra_json_schema"] = rest
    else:
        # typing_extensions.Doc's documentation; pydantic.Field's description and title.
        for attr, key in (("documentation", "description"), ("description", "description"), ("title", "title")):
            if isinstance(value := getattr(extra, attr, None), str):
                kwargs[key] = value
        for item in [extra, *getattr(extra, "metadata", ())]:
            for attr in _CONSTRAINT_ATTRS:
                value = getattr(item, attr, None)
                if value is not None and not callable(value):
                    kwargs.setdefault(attr, getattr(value, "pattern", value))
        if not kwargs:
            return None
    try:
        return msgspec.Meta(**kwargs)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"{where}: {exc}") from None


def dotted_name(obj: Any) -> str:
    """Where a function or class is defined (``module.qualname``): a handler's ``source``, a type in errors."""
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


@dataclasses.dataclass(frozen=True)
class _Custom:
    schema: Callable[[], dict[str, Any]]
    convert: Callable[[Any], Any]
    dump: Callable[[Any], Any] | None = None


# serializer_data's classes -> their serializer.
_SERIALIZER_OF: dict[type, type] = {}


@functools.cache
def serializer_data(serializer: type) -> type[dict[str, Any]]:
    """The type an argument described by a DRF ``serializer`` is converted into: a dict (of a class of
    its own, as msgspec's ``dec_hook`` must return an instance of the type it is asked for)."""
    data = type(f"{serializer.__name__}Data", (dict,), {"__module__": serializer.__module__})
    _SERIALIZER_OF[data] = serializer
    return data


@functools.cache
def _custom(tp: Any) -> _Custom | None:
    """How to describe and convert a type msgspec does not know, or None."""
    serializer = _SERIALIZER_OF.get(tp)
    if serializer is not None:
        schema = serializer_schema(serializer)

        def from_json(value: Any) -> Any:
            errors = validator_for(schema).errors(value)
            if errors:
                raise ValueError("; ".join(errors))
            return tp(value)

        return _Custom(lambda: schema, from_json)
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(tp, type):
        return None
    if issubclass(tp, pydantic.BaseModel):
        adapter = pydantic.TypeAdapter(tp)
    elif tp.__module__.startswith("pydantic"):  # EmailStr, AnyUrl, SecretStr, ...
        try:
            adapter = pydantic.TypeAdapter(tp)
            adapter.json_schema()
        except Exception:
            return None
    else:
        return None
    return _Custom(
        lambda: inline(adapter.json_schema()),
        adapter.validate_python,
        lambda value: adapter.dump_python(value, mode="json"),
    )


def _schema_hook(tp: Any) -> dict[str, Any]:
    custom = _custom(tp)
    if custom is None:
        raise SchemaError(
            f"{dotted_name(tp)} cannot be described as a JSON schema; use a dataclass, a TypedDict, "
            "a standard type, a DRF serializer or a Pydantic model"
        )
    return custom.schema()


def dec_hook(tp: Any, value: Any) -> Any:
    custom = _custom(tp)
    if custom is None:
        raise NotImplementedError(f"no conversion into {dotted_name(tp)}")
    try:
        return custom.convert(value)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError: its lines as one
        lines = (line.strip() for line in str(exc).splitlines())
        raise ValueError("; ".join(line for line in lines if line and not line.startswith("For further"))) from None


def enc_hook(value: Any) -> Any:
    if is_serializer(value) and not isinstance(value, type):
        return value.data
    cls: Any = type(value)
    custom = _custom(cls)
    if custom is not None and custom.dump is not None:
        return custom.dump(value)
    raise TypeError(f"cannot serialise a {type(value).__name__} as JSON")


@functools.cache
def _cached_schema(tp: Any) -> dict[str, Any]:
    try:
        (schema,), components = msgspec.json.schema_components((tp,), schema_hook=_schema_hook)
    except (TypeError, ValueError) as exc:
        raise SchemaError(str(exc)) from None
    return tidy(inline(schema, components))


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON schema of a prepared annotation: inline where it can be, with ``$defs`` for recursive types."""
    try:
        return copy.deepcopy(_cached_schema(tp))
    except TypeError:  # an unhashable annotation (a dict inside Annotated); msgspec's own are SchemaErrors
        return _cached_schema.__wrapped__(tp)


def inline(schema: dict[str, Any], components: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each ``$ref`` replaced by a copy of its target (clients, elicitation forms above all, handle
    flat schemas best); a recursive one stays a ``$ref`` into ``$defs``. Without ``components``, the
    schema's own ``$defs`` (a schema another library made, embedded in ours)."""
    if components is None:
        components = schema.pop("$defs", {})
    kept: dict[str, Any] = {}
    for component in components.values():
        docs = _FIELD_DOCS.get(component.get("title", "")) if isinstance(component, dict) else None
        for field_name, text in (docs or {}).items():
            prop = component.get("properties", {}).get(field_name)
            if isinstance(prop, dict):
                prop.setdefault("description", text)

    def walk(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            siblings = {k: walk(v, stack) for k, v in node.items() if k != "$ref"}
            if name in stack or name not in components:
                if name in components and name not in kept:
                    kept[name] = None
                    kept[name] = walk(components[name], (*stack, name))
                return {"$ref": f"#/$defs/{name}", **siblings}
            target = walk(components[name], (*stack, name))
            target.pop("title", None)  # a class name makes a poor label
            return {**target, **siblings}
        return {k: walk(v, stack) for k, v in node.items()}

    out = walk(schema, ())
    if kept:
        out["$defs"] = {name: tidy(s) for name, s in kept.items()}
    return out


def tidy(schema: Any) -> Any:
    """Small rewrites that read better: enum types stated, ``anyOf [X, null]`` as a type list."""
    if isinstance(schema, list):
        return [tidy(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    schema = {k: tidy(v) for k, v in schema.items()}
    if schema.get("format") == "decimal" and schema.get("type") == "string":
        # A Decimal is accepted as a JSON number or a string (a string keeps every digit); msgspec's
        # "format": "decimal" is no JSON Schema format (clients warn of it), a pattern says the same.
        del schema["format"]
        schema["type"] = ["number", "string"]
        schema.setdefault("pattern", DECIMAL_PATTERN)
    values = schema.get("enum")
    if isinstance(values, list) and values:
        with contextlib.suppress(TypeError):
            schema["enum"] = values = list(_ORDERS.get(_order_key(values), values))
        if "type" not in schema and (json_type := enum_type(values)) is not None:
            schema["type"] = json_type
    options = schema.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = options[0] if options[1] == {"type": "null"} else options[1]
        json_type = other.get("type")
        if isinstance(json_type, (str, list)) and "anyOf" not in other and "$ref" not in other:
            merged = nullable(other)
            rest = {k: v for k, v in schema.items() if k != "anyOf"}
            return {**merged, **rest}
    return schema


def type_schema(tp: Any, where: str = "annotation") -> dict[str, Any]:
    """The JSON schema of a Python annotation (or a DRF serializer); :class:`SchemaError` if it has none."""
    if is_serializer(tp):
        return serializer_schema(tp)
    return prepare(tp, where).schema


def convert(value: Any, tp: Any, *, strict: bool = True) -> Any:
    """``value`` (JSON data) as ``tp``; raises ``msgspec.ValidationError`` naming the field."""
    return msgspec.convert(value, tp, strict=strict, dec_hook=dec_hook)


def to_jsonable(value: Any) -> Any:
    """What a handler returned, as JSON data: dataclasses, Decimals, dates, UUIDs, enums, models..."""
    return msgspec.to_builtins(value, enc_hook=enc_hook)


def problem(exc: Exception) -> str:
    """A msgspec error as ``field: message`` (``$.a.b[0]`` becomes ``a.b[0]``)."""
    text = str(exc)
    message, sep, path = text.rpartition(" - at `")
    if not sep:
        message, path = text, ""
    path = path.rstrip("`").removeprefix("$").removeprefix(".")
    for prefix, says in (
        ("Object missing required field `", "this field is required"),
        ("Object contains unknown field `", "unexpected field"),
    ):
        if message.startswith(prefix):
            return f"{path + '.' if path else ''}{message.removeprefix(prefix).rstrip('`')}: {says}"
    return f"{path or 'value'}: {message}"
