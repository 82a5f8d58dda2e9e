"""Compiled validators are found again without keeping every copy of a schema alive."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from mcp_django.schema import validator as validators


class Schema(dict[str, Any]):
    """A dict that can be weakly referenced, to see whether the cache keeps it."""


def test_a_schema_written_as_a_literal_is_compiled_once_and_its_copies_are_not_kept() -> None:
    def literal() -> Schema:  # as a handler writes it: a new dict on every call
        return Schema(type="object", properties={"colour": {"type": "string"}}, required=["colour"])

    first = validators.validator_for(literal())
    copies = []
    for _ in range(50):
        schema = literal()
        copies.append(weakref.ref(schema))
        assert validators.validator_for(schema) is first
        del schema
    gc.collect()
    assert all(ref() is None for ref in copies)
    assert first.errors({"colour": 1}) and not first.errors({"colour": "teal"})


def test_a_constant_schema_is_found_by_identity() -> None:
    constant = {"type": "object", "properties": {"n": {"type": "integer"}}}
    compiled = validators.validator_for(constant)
    assert validators.validator_for(constant) is compiled
    assert validators.validator_for(dict(constant)) is compiled  # an equal copy: found by content
