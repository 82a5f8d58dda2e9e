"""JSON schemas from Python (annotations, signatures, DRF serializers, choices, docstrings), and
values checked (schemas given as dicts: jsonschema-rs) and converted (annotations: msgspec) against them.
"""

from __future__ import annotations

from typing import Any

from .drf import enum_schema, field_schema, is_serializer, serializer_schema
from .signature import ArgumentsInvalid, Parameters, SchemaArguments, first_paragraph, output_schema, resolved_hints
from .types import Email, SchemaError, convert, is_typeddict, prepare, problem, to_jsonable, type_schema
from .validator import Validator, validate, validator_for

__all__ = [
    "ArgumentsInvalid",
    "Email",
    "Parameters",
    "SchemaArguments",
    "SchemaError",
    "Validator",
    "convert",
    "enum_schema",
    "field_schema",
    "first_paragraph",
    "is_serializer",
    "is_typeddict",
    "output_schema",
    "prepare",
    "problem",
    "resolved_hints",
    "serializer_schema",
    "signature_schema",
    "to_jsonable",
    "type_schema",
    "validate",
    "validator_for",
]


def signature_schema(func: Any, *, skip: set[str]) -> dict[str, Any]:
    """The input schema of a handler: one property per parameter, except ``skip``."""
    return Parameters(func, skip=skip).schema
