"""What a docstring says: its summary, and its parameters (Google, NumPy and Sphinx/reST styles)."""

from __future__ import annotations

import inspect
from typing import Any

import docstring_parser


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
