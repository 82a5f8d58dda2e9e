"""JSON schemas of DRF serializers (writable fields as input, readable ones as output) and of choices
(DRF and django-filter choices, ``Enum``, ``Literal``)."""

from __future__ import annotations

import decimal
import sys
from collections.abc import Iterable
from copy import deepcopy
from typing import Any

# A decimal written as a string, as DRF's DecimalField and msgspec's Decimal read it (JSON Schema's
# `pattern` and `minimum` each apply to one of the two types only: numbers are not matched, strings not bounded).
DECIMAL_PATTERN = r"^\s*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$"


def is_serializer(tp: Any) -> bool:
    # A serializer cannot exist before DRF's serializers module is imported: asking
    # never imports it (with it DRF's compat imports requests, pygments, psycopg...,
    # which a project that uses no serializer need not carry).
    serializers = sys.modules.get("rest_framework.serializers")
    if serializers is None:
        return False
    return (isinstance(tp, type) and issubclass(tp, serializers.BaseSerializer)) or isinstance(
        tp, serializers.BaseSerializer
    )


def serializer_schema(serializer: Any, *, for_output: bool = False) -> dict[str, Any]:
    """Object schema of a DRF serializer: writable fields as input, readable ones as output."""
    from rest_framework.fields import HiddenField

    instance = serializer() if isinstance(serializer, type) else serializer
    if for_output:
        fields = {name: f for name, f in instance.fields.items() if not f.write_only}
    else:
        # A HiddenField takes its default whatever a client sends (DRF's own OpenAPI leaves it out):
        # listed, it would be an argument that does nothing.
        fields = {name: f for name, f in instance.fields.items() if not (f.read_only or isinstance(f, HiddenField))}
    properties = {name: field_schema(f, for_output=for_output) for name, f in fields.items()}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [name for name, f in fields.items() if f.required and not for_output]
    if required:
        schema["required"] = required
    return schema


_VALUES = {"minimum": "min_value", "maximum": "max_value"}  # JSON Schema keyword: the field's attribute
# DRF fields with no parts of their own, tried in order (a subclass before its base: HStoreField is a
# DictField, EmailField a CharField), their schemas, and the attributes their bounds are in.
_PLAIN_FIELDS: tuple[tuple[str, dict[str, Any], dict[str, str]], ...] = (
    ("BooleanField", {"type": "boolean"}, {}),
    ("IntegerField", {"type": "integer"}, _VALUES),
    # DRF takes a number or a decimal string, so a client may send back the "2.00" it was given;
    # standard keywords only ("format": "decimal" is no JSON Schema format: clients warn of it).
    ("DecimalField", {"type": ["number", "string"], "pattern": DECIMAL_PATTERN}, _VALUES),
    ("FloatField", {"type": "number"}, _VALUES),
    ("EmailField", {"type": "string", "format": "email"}, {}),
    ("URLField", {"type": "string", "format": "uri"}, {}),
    ("UUIDField", {"type": "string", "format": "uuid"}, {}),
    ("DateTimeField", {"type": "string", "format": "date-time"}, {}),
    ("DateField", {"type": "string", "format": "date"}, {}),
    ("DictField", {"type": "object"}, {}),
    ("JSONField", {}, {}),
    ("PrimaryKeyRelatedField", {"type": "integer"}, {}),
    ("CharField", {"type": "string"}, {"minLength": "min_length", "maxLength": "max_length"}),
)


def field_schema(f: Any, *, for_output: bool = False) -> dict[str, Any]:
    from rest_framework import serializers as s

    schema: dict[str, Any]
    bounds: dict[str, str] = {}
    if isinstance(f, (s.ListSerializer, s.ListField, s.ManyRelatedField)):
        child = f.child_relation if isinstance(f, s.ManyRelatedField) else f.child
        schema = {"type": "array", "items": field_schema(child, for_output=for_output)}
        if isinstance(f, s.ListField):
            bounds = {"minItems": "min_length", "maxItems": "max_length"}
    elif isinstance(f, s.BaseSerializer):
        schema = serializer_schema(f, for_output=for_output)
    elif isinstance(f, s.MultipleChoiceField):
        schema = {"type": "array", "items": enum_schema(f.choices), "uniqueItems": True}
    elif isinstance(f, s.ChoiceField):
        schema = enum_schema(f.choices)
    elif isinstance(f, s.DecimalField) and for_output and _decimal_as_string(f):
        # What DRF puts on the wire: COERCE_DECIMAL_TO_STRING makes decimals strings.
        schema = {"type": "string", "pattern": DECIMAL_PATTERN}
    else:
        schema = {}
        for name, plain_schema, plain_bounds in _PLAIN_FIELDS:
            if isinstance(f, getattr(s, name)):
                schema, bounds = deepcopy(plain_schema), plain_bounds
                break
    for keyword, attribute in bounds.items():
        if (value := _number(getattr(f, attribute, None))) is not None:
            schema[keyword] = value
    label = getattr(f, "label", None)
    if label:
        schema["title"] = str(label)
    if getattr(f, "help_text", None):
        schema["description"] = str(f.help_text)
    default = getattr(f, "default", s.empty)
    if default is not s.empty and not callable(default) and is_json_scalar(default):
        schema["default"] = default
    if not for_output:
        _validator_constraints(schema, f)
    if getattr(f, "allow_blank", False) and "enum" in schema and "" not in schema["enum"]:
        schema["enum"] = [*schema["enum"], ""]
    if getattr(f, "allow_null", False):
        schema = nullable(schema)
    return schema


def _decimal_as_string(f: Any) -> bool:
    from rest_framework.settings import api_settings

    coerce = getattr(f, "coerce_to_string", None)
    return bool(api_settings.COERCE_DECIMAL_TO_STRING if coerce is None else coerce)


def _validator_constraints(schema: dict[str, Any], f: Any) -> None:
    """The constraints of a field's validators that JSON Schema can say (the field still checks them all)."""
    from django.core import validators as v

    limits = (
        (v.MinLengthValidator, "minLength"),
        (v.MaxLengthValidator, "maxLength"),
        (v.MinValueValidator, "minimum"),
        (v.MaxValueValidator, "maximum"),
    )
    for validator in getattr(f, "validators", ()):
        keyword = next((keyword for cls, keyword in limits if isinstance(validator, cls)), None)
        limit = _number(getattr(validator, "limit_value", None))
        if keyword is not None and limit is not None and (isinstance(limit, int) or "Length" not in keyword):
            schema.setdefault(keyword, limit)
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
    pattern = pattern.replace("\\A", "^").replace("\\Z", "$").replace("\\z", "$")
    if "(?" in pattern.replace("(?:", "").replace("(?=", "").replace("(?!", ""):
        return None
    return pattern


def _number(value: Any) -> int | float | None:
    """A bound as JSON: an int stays one, a float or a Decimal is a float; None when it is no number."""
    if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
        return int(value) if isinstance(value, int) else float(value)
    return None


def is_json_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def enum_type(values: list[Any]) -> str | None:
    """``"string"`` or ``"integer"`` when every value is one, else None (a boolean is not an integer)."""
    if all(isinstance(v, str) for v in values):
        return "string"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "integer"
    return None


def enum_schema(choices: Iterable[Any]) -> dict[str, Any]:
    """``{"enum": [...]}`` of ``choices`` as JSON data (lazy text, a Decimal as text), with the type they share."""
    values = [c if is_json_scalar(c) else str(c) for c in choices]
    json_type = enum_type(values)
    return {"enum": values} if json_type is None else {"enum": values, "type": json_type}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also allows null: ``"null"`` joins its type, and None its enum."""
    out = dict(schema)
    json_type = out.get("type")
    if isinstance(json_type, str):
        out["type"] = [json_type, "null"]
    elif isinstance(json_type, list) and "null" not in json_type:
        out["type"] = [*json_type, "null"]
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def error_lines(data: Any, prefix: str = "") -> list[str]:
    """DRF's errors as lines: ``{"quantity": ["Too many."]}`` → ``["quantity: Too many."]``; nested as ``a.b``."""
    if isinstance(data, dict):
        out: list[str] = []
        for key, value in data.items():
            name = "" if key in ("non_field_errors", "detail") else str(key)
            out += error_lines(value, f"{prefix}.{name}" if prefix and name else (name or prefix))
        return out
    if isinstance(data, list):
        if all(isinstance(v, str) for v in data):
            return [f"{prefix}: {v}" if prefix else v for v in data]
        return [line for i, v in enumerate(data) for line in error_lines(v, f"{prefix}[{i}]")]
    return [f"{prefix}: {data}" if prefix else str(data)] if data not in (None, "") else []
