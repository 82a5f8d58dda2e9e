"""JSON schemas from Python (annotations, signatures, DRF serializers, choices, docstrings), and
values checked (schemas given as dicts: jsonschema-rs) and converted (annotations: msgspec) against them.
"""

from .drf import enum_schema, is_serializer, serializer_schema
from .signature import ArgumentsInvalid, Parameters, SchemaArguments, first_paragraph, output_schema
from .types import Email, SchemaError, convert, prepare, problem, to_jsonable, type_schema
from .validator import validate, validator_for

__all__ = [
    "ArgumentsInvalid",
    "Email",
    "Parameters",
    "SchemaArguments",
    "SchemaError",
    "convert",
    "enum_schema",
    "first_paragraph",
    "is_serializer",
    "output_schema",
    "prepare",
    "problem",
    "serializer_schema",
    "to_jsonable",
    "type_schema",
    "validate",
    "validator_for",
]
