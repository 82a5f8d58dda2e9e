"""Validation against JSON schemas given as dicts (``input_schema=``, elicitation, the ``Annotated[..., {...}]``
keywords msgspec cannot enforce): Draft 2020-12 by jsonschema-rs, formats checked, each schema compiled once."""

from __future__ import annotations

import threading
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..protocol.jsonrpc import canonical

# Compiled validators by id(schema), with the schema to confirm the id was not reused; and by
# content, for a schema written as a literal in a handler (a new dict on every call, found by
# content and not kept alive).
_compiled: dict[int, tuple[dict[str, Any], Validator]] = {}
_by_content: dict[bytes, Validator] = {}
_MAX_COMPILED = 4096
_lock = threading.Lock()


class Validator:
    """One compiled schema. ``errors(value)`` lists the problems, each naming where it is."""

    __slots__ = ("_check",)

    def __init__(self, schema: dict[str, Any]) -> None:
        if not isinstance(schema, dict):
            raise ImproperlyConfigured(f"a JSON schema must be an object, not {type(schema).__name__}")
        # Imported with the first schema given as a dict (about 10 MiB): a project whose schemas
        # all come from types never loads it.
        import jsonschema_rs

        try:
            if "$schema" in schema:
                self._check = jsonschema_rs.validator_for(schema, validate_formats=True)
            else:
                self._check = jsonschema_rs.Draft202012Validator(schema, validate_formats=True)
        except (jsonschema_rs.ValidationError, ValueError) as exc:
            first = str(exc).split("\n", 1)[0]
            raise ImproperlyConfigured(f"not a valid JSON schema: {first}") from None

    def errors(self, value: Any) -> list[str]:
        if self._check.is_valid(value):
            return []
        return [f"{where(e.instance_path)}: {e.message}" for e in self._check.iter_errors(value)]


def where(path: Any) -> str:
    """A JSON pointer's parts as ``a.b[0]``; ``value`` for the root."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "value"


def shape_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be a JSON schema (not an object, not JSON), or None; without compiling it."""
    if not isinstance(schema, dict):
        return f"a JSON schema must be an object, not {type(schema).__name__}"
    try:
        canonical(schema)
    except TypeError as exc:
        return f"not a valid JSON schema: {exc}"
    return None


def validator_for(schema: dict[str, Any]) -> Validator:
    """The compiled validator of ``schema``, compiled on first use (schemas are not copied or hashed)."""
    entry = _compiled.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    try:
        key = canonical(schema)
    except TypeError:
        return Validator(schema)  # not JSON: Validator says why
    validator = _by_content.get(key)
    if validator is not None:
        return validator
    validator = Validator(schema)
    with _lock:
        if len(_compiled) >= _MAX_COMPILED:
            _compiled.clear()
        if len(_by_content) >= _MAX_COMPILED:
            _by_content.clear()
        _compiled[id(schema)] = (schema, validator)
        _by_content[key] = validator
    return validator


def validate(value: Any, schema: dict[str, Any]) -> list[str]:
    """Errors of ``value`` against ``schema`` (an empty list when it is valid)."""
    return validator_for(schema).errors(value)
