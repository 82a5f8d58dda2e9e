"""JSON schemas derived from Python: signatures, dataclasses, TypedDicts, DRF serializers.

Also a small validator for the subset of JSON Schema these produce (and that
elicitation allows), so arguments and answers are checked without a runtime
dependency on a full JSON Schema library.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import inspect
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    decimal.Decimal: {"type": "number"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
    uuid.UUID: {"type": "string", "format": "uuid"},
    type(None): {"type": "null"},
    Any: {},
}


def is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


def is_serializer(tp: Any) -> bool:
    try:
        from rest_framework import serializers
    except ImportError:  # pragma: no cover
        return False
    return (isinstance(tp, type) and issubclass(tp, serializers.BaseSerializer)) or isinstance(
        tp, serializers.BaseSerializer
    )


def type_schema(tp: Any, *, _seen: frozenset[Any] = frozenset()) -> dict[str, Any]:
    """The JSON schema of a Python annotation."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        base, *extras = get_args(tp)
        schema = dict(type_schema(base, _seen=_seen))
        for extra in extras:
            if isinstance(extra, str):
                schema["description"] = extra
            elif isinstance(extra, dict):
                schema.update(extra)
        return schema
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    if origin is Literal:
        values = list(get_args(tp))
        schema: dict[str, Any] = {"enum": values}
        kinds = {type(v) for v in values}
        if len(kinds) == 1 and next(iter(kinds)) in _PRIMITIVES:
            schema = {**_PRIMITIVES[next(iter(kinds))], "enum": values}
        return schema
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        nullable = len(args) != len(get_args(tp))
        if len(args) == 1:
            inner = type_schema(args[0], _seen=_seen)
            if nullable and "type" in inner and isinstance(inner["type"], str):
                return {**inner, "type": [inner["type"], "null"]}
            return {"anyOf": [inner, {"type": "null"}]} if nullable else inner
        options = [type_schema(a, _seen=_seen) for a in args]
        if nullable:
            options.append({"type": "null"})
        return {"anyOf": options}
    if origin in (list, tuple, set, frozenset, typing.Sequence) or tp in (list, tuple, set):
        args = get_args(tp)
        schema = {"type": "array"}
        if args and not (origin is tuple and len(args) != 2 and ... not in args):
            schema["items"] = type_schema(args[0], _seen=_seen)
        if origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin in (dict, typing.Mapping) or tp is dict:
        args = get_args(tp)
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = type_schema(args[1], _seen=_seen)
        return schema
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        schema = {"enum": values}
        if all(isinstance(v, str) for v in values):
            schema["type"] = "string"
        elif all(isinstance(v, int) for v in values):
            schema["type"] = "integer"
        return schema
    if tp in _seen:
        # Recursive types would make an endless schema; clients cannot take those.
        return {"type": "object"}
    if dataclasses.is_dataclass(tp) or is_typeddict(tp):
        return object_schema(tp, _seen=_seen | {tp})
    if is_serializer(tp):
        return serializer_schema(tp)
    return {}


def object_schema(tp: Any, *, _seen: frozenset[Any] = frozenset()) -> dict[str, Any]:
    """Object schema of a dataclass or TypedDict."""
    hints = get_type_hints(tp, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    if dataclasses.is_dataclass(tp):
        for f in dataclasses.fields(tp):
            properties[f.name] = type_schema(hints.get(f.name, Any), _seen=_seen)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            elif f.default is not dataclasses.MISSING and _jsonable(f.default):
                properties[f.name]["default"] = f.default
    else:
        required_keys = getattr(tp, "__required_keys__", frozenset(hints))
        for name, hint in hints.items():
            properties[name] = type_schema(hint, _seen=_seen)
            if name in required_keys:
                required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _jsonable(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def signature_schema(func: Any, *, skip: set[str]) -> dict[str, Any]:
    """The input schema of a handler: one property per parameter, except ``skip``."""
    sig = inspect.signature(func)
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception:
        # An annotation that cannot be resolved (a name imported only for type
        # checking) describes nothing we can use: those parameters take any value.
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in sig.parameters.items():
        if name in skip or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        schema = type_schema(hints.get(name, Any))
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif _jsonable(param.default):
            schema["default"] = param.default
        properties[name] = schema
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def serializer_schema(serializer: Any, *, for_output: bool = False) -> dict[str, Any]:
    """Object schema of a DRF serializer: writable fields as input, readable ones as output."""
    instance = serializer() if isinstance(serializer, type) else serializer
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, f in instance.fields.items():
        if for_output and f.write_only:
            continue
        if not for_output and f.read_only:
            continue
        schema = field_schema(f, for_output=for_output)
        properties[name] = schema
        if not for_output and f.required:
            required.append(name)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def field_schema(f: Any, *, for_output: bool = False) -> dict[str, Any]:
    from rest_framework import serializers as s

    schema: dict[str, Any]
    if isinstance(f, s.ListSerializer):
        schema = {"type": "array", "items": field_schema(f.child, for_output=for_output)}
    elif isinstance(f, s.BaseSerializer):
        schema = serializer_schema(f, for_output=for_output)
    elif isinstance(f, s.MultipleChoiceField):
        schema = {"type": "array", "items": {"enum": [_choice(k) for k in f.choices]}, "uniqueItems": True}
    elif isinstance(f, s.ChoiceField):
        values = [_choice(k) for k in f.choices]
        schema = {"enum": values}
        if all(isinstance(v, str) for v in values):
            schema["type"] = "string"
        elif all(isinstance(v, int) for v in values):
            schema["type"] = "integer"
    elif isinstance(f, s.BooleanField):
        schema = {"type": "boolean"}
    elif isinstance(f, s.IntegerField):
        schema = {"type": "integer"}
        _bounds(schema, f, "minimum", "maximum")
    elif isinstance(f, s.DecimalField) and for_output and _decimal_as_string(f):
        # What DRF puts on the wire: COERCE_DECIMAL_TO_STRING makes decimals strings.
        schema = {"type": "string", "format": "decimal"}
    elif isinstance(f, (s.FloatField, s.DecimalField)):
        schema = {"type": "number"}
        _bounds(schema, f, "minimum", "maximum")
    elif isinstance(f, s.EmailField):
        schema = {"type": "string", "format": "email"}
    elif isinstance(f, s.URLField):
        schema = {"type": "string", "format": "uri"}
    elif isinstance(f, s.UUIDField):
        schema = {"type": "string", "format": "uuid"}
    elif isinstance(f, s.DateTimeField):
        schema = {"type": "string", "format": "date-time"}
    elif isinstance(f, s.DateField):
        schema = {"type": "string", "format": "date"}
    elif isinstance(f, s.ListField):
        schema = {"type": "array", "items": field_schema(f.child, for_output=for_output)}
        _bounds(schema, f, "minItems", "maxItems", attrs=("min_length", "max_length"))
    elif isinstance(f, (s.DictField, s.JSONField, s.HStoreField)):
        schema = {"type": "object"} if not isinstance(f, s.JSONField) else {}
    elif isinstance(f, s.PrimaryKeyRelatedField):
        schema = {"type": "integer"}
    elif isinstance(f, s.ManyRelatedField):
        schema = {"type": "array", "items": field_schema(f.child_relation, for_output=for_output)}
    elif isinstance(f, s.CharField):
        schema = {"type": "string"}
        _bounds(schema, f, "minLength", "maxLength", attrs=("min_length", "max_length"))
    else:
        schema = {}
    label = getattr(f, "label", None)
    if label:
        schema["title"] = str(label)
    if getattr(f, "help_text", None):
        schema["description"] = str(f.help_text)
    default = getattr(f, "default", s.empty)
    if default is not s.empty and not callable(default) and _jsonable(default):
        schema["default"] = default
    if not for_output:
        _validator_constraints(schema, f)
    if getattr(f, "allow_blank", False) and "enum" in schema and "" not in schema["enum"]:
        schema["enum"] = [*schema["enum"], ""]
    if getattr(f, "allow_null", False):
        if isinstance(schema.get("type"), str):
            schema["type"] = [schema["type"], "null"]
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
    return schema


def _decimal_as_string(f: Any) -> bool:
    from rest_framework.settings import api_settings

    coerce = getattr(f, "coerce_to_string", None)
    return bool(api_settings.COERCE_DECIMAL_TO_STRING if coerce is None else coerce)


def _validator_constraints(schema: dict[str, Any], f: Any) -> None:
    """The constraints of a field's validators that JSON Schema can say (the field still checks them all)."""
    from django.core import validators as v

    for validator in getattr(f, "validators", ()):
        limit = getattr(validator, "limit_value", None)
        if isinstance(validator, v.MinLengthValidator) and isinstance(limit, int):
            schema.setdefault("minLength", limit)
        elif isinstance(validator, v.MaxLengthValidator) and isinstance(limit, int):
            schema.setdefault("maxLength", limit)
        elif isinstance(validator, v.MinValueValidator) and isinstance(limit, (int, float, decimal.Decimal)):
            schema.setdefault("minimum", int(limit) if isinstance(limit, int) else float(limit))
        elif isinstance(validator, v.MaxValueValidator) and isinstance(limit, (int, float, decimal.Decimal)):
            schema.setdefault("maximum", int(limit) if isinstance(limit, int) else float(limit))
        elif isinstance(validator, v.URLValidator):
            schema.setdefault("format", "uri")
        elif isinstance(validator, v.EmailValidator):
            schema.setdefault("format", "email")
        elif isinstance(validator, v.RegexValidator) and not validator.inverse_match and not validator.flags:
            pattern = _ecma_pattern(getattr(validator.regex, "pattern", ""))
            if pattern:
                schema.setdefault("pattern", pattern)
    if schema.get("type") == "string" and getattr(f, "allow_blank", True) is False and "enum" not in schema:
        # DRF refuses "" unless allow_blank; say so, so a client does not send it.
        schema.setdefault("minLength", 1)


def _ecma_pattern(pattern: str) -> str | None:
    """A Python regex as JSON Schema's (ECMA-262) dialect, or None when it uses Python-only syntax."""
    if not isinstance(pattern, str):
        return None
    pattern = pattern.replace("\\A", "^").replace("\\Z", "$").replace("\\z", "$")
    if "(?" in pattern.replace("(?:", "").replace("(?=", "").replace("(?!", ""):
        return None
    return pattern


def _choice(value: Any) -> Any:
    return value if _jsonable(value) else str(value)


def _bounds(
    schema: dict[str, Any], f: Any, low: str, high: str, attrs: tuple[str, str] = ("min_value", "max_value")
) -> None:
    for key, attr in zip((low, high), attrs, strict=True):
        value = getattr(f, attr, None)
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            schema[key] = int(value) if isinstance(value, int) else float(value)


# -- validation -------------------------------------------------------------------

_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


Check = Callable[[Any, str], list[str]]

# Compiled checks by id(schema), with the schema itself to confirm the id was not reused.
_compiled: dict[int, tuple[dict[str, Any], Check]] = {}
_MAX_COMPILED = 2048
_MISSING = object()


def validate(value: Any, schema: dict[str, Any], *, path: str = "") -> list[str]:
    """Errors of ``value`` against ``schema`` (an empty list when it is valid).

    Covers type, enum, const, required, properties, additionalProperties, items,
    anyOf/oneOf/allOf, bounds and local ``$ref``; other keywords are not checked.
    A schema is compiled once into a check that looks only at the keywords it has
    (arguments are validated on every call; this keeps that cheap).
    """
    entry = _compiled.get(id(schema))
    if entry is None or entry[0] is not schema:
        if len(_compiled) >= _MAX_COMPILED:
            _compiled.clear()
        entry = (schema, _compile(schema, schema, {}))
        _compiled[id(schema)] = entry
    return entry[1](value, path)


def _always_valid(value: Any, path: str) -> list[str]:
    return []


def _resolve(root: dict[str, Any], ref: str) -> Any:
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
    return target


def _compile(schema: Any, root: dict[str, Any], memo: dict[int, Check]) -> Check:
    if not isinstance(schema, dict):
        return _always_valid
    found = memo.get(id(schema))
    if found is not None:
        return found
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        # Through a slot, so that a recursive $ref compiles once and terminates.
        slot: list[Check] = []

        def by_ref(value: Any, path: str) -> list[str]:
            return slot[0](value, path)

        memo[id(schema)] = by_ref
        slot.append(_compile(_resolve(root, ref), root, memo))
        return by_ref

    expected = schema.get("type")
    type_tests: list[Callable[[Any], bool]] | None = None
    type_message = ""
    if expected is not None:
        kinds = expected if isinstance(expected, list) else [expected]
        if all(k in _TYPES for k in kinds):  # an unknown type name accepts anything
            type_tests = [_TYPES[k] for k in kinds]
            type_message = f": expected {' or '.join(kinds)}"
    enum = schema.get("enum", _MISSING)
    const = schema.get("const", _MISSING)
    any_of = [_compile(sub, root, memo) for sub in schema.get("anyOf", ())] if "anyOf" in schema else None
    one_of = [_compile(sub, root, memo) for sub in schema.get("oneOf", ())] if "oneOf" in schema else None
    all_of = [_compile(sub, root, memo) for sub in schema.get("allOf", ())]
    properties = {name: _compile(sub, root, memo) for name, sub in (schema.get("properties") or {}).items()}
    required = list(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    extra_check = _compile(extra, root, memo) if isinstance(extra, dict) else None
    object_rules = bool(properties or required or extra is not True)
    items = schema.get("items")
    items_check = _compile(items, root, memo) if isinstance(items, dict) else None
    min_items, max_items = schema.get("minItems"), schema.get("maxItems")
    min_length, max_length = schema.get("minLength"), schema.get("maxLength")
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    list_rules = items_check is not None or min_items is not None or max_items is not None
    string_rules = min_length is not None or max_length is not None
    number_rules = minimum is not None or maximum is not None

    def check(value: Any, path: str) -> list[str]:
        where = path or "value"
        if type_tests is not None and not any(test(value) for test in type_tests):
            return [where + type_message]
        errors: list[str] = []
        if enum is not _MISSING and value not in enum:
            errors.append(f"{where}: must be one of {enum!r}")
        if const is not _MISSING and value != const:
            errors.append(f"{where}: must be {const!r}")
        if any_of is not None and not any(not sub(value, path) for sub in any_of):
            errors.append(f"{where}: does not match anyOf")
        if one_of is not None and sum(not sub(value, path) for sub in one_of) != 1:
            errors.append(f"{where}: does not match oneOf")
        for sub in all_of:
            errors.extend(sub(value, path))
        if object_rules and isinstance(value, dict):
            for name in required:
                if name not in value:
                    errors.append(f"{path + '.' if path else ''}{name}: this field is required")
            for name, item in value.items():
                sub_path = f"{path}.{name}" if path else name
                prop = properties.get(name)
                if prop is not None:
                    errors.extend(prop(item, sub_path))
                elif extra is False:
                    errors.append(f"{sub_path}: unexpected property")
                elif extra_check is not None:
                    errors.extend(extra_check(item, sub_path))
        if list_rules and isinstance(value, list):
            if items_check is not None:
                for i, item in enumerate(value):
                    errors.extend(items_check(item, f"{path}[{i}]"))
            if min_items is not None and len(value) < min_items:
                errors.append(f"{where}: at least {min_items} items")
            if max_items is not None and len(value) > max_items:
                errors.append(f"{where}: at most {max_items} items")
        if string_rules and isinstance(value, str):
            if min_length is not None and len(value) < min_length:
                errors.append(f"{where}: at least {min_length} characters")
            if max_length is not None and len(value) > max_length:
                errors.append(f"{where}: at most {max_length} characters")
        if number_rules and isinstance(value, (int, float)) and not isinstance(value, bool):
            if minimum is not None and value < minimum:
                errors.append(f"{where}: must be >= {minimum}")
            if maximum is not None and value > maximum:
                errors.append(f"{where}: must be <= {maximum}")
        return errors

    memo[id(schema)] = check
    return check
