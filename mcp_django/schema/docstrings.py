"""What a handler's docstring says about its parameters (Google, NumPy and Sphinx/reST styles)."""

from __future__ import annotations

import inspect
from typing import Any

import docstring_parser


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
