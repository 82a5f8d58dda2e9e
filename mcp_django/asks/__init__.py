"""Asking the client: the context handlers use, and the engines behind it."""

from .errors import MissingCapability
from .questions import Ask, ElicitResult, Root, SampleResult, confirm, elicit, elicit_url, list_roots, sample

__all__ = [
    "Ask",
    "ElicitResult",
    "MissingCapability",
    "Root",
    "SampleResult",
    "confirm",
    "elicit",
    "elicit_url",
    "list_roots",
    "sample",
]
