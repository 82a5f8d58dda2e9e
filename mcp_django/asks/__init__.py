"""Asking the client: the context handlers use, and the engines behind it."""

from .questions import (
    Ask,
    ClientError,
    ElicitResult,
    InputRequired,
    MissingCapability,
    Root,
    SampleResult,
    confirm,
    elicit,
    elicit_url,
    list_roots,
    sample,
)

__all__ = [
    "Ask",
    "ClientError",
    "ElicitResult",
    "InputRequired",
    "MissingCapability",
    "Root",
    "SampleResult",
    "confirm",
    "elicit",
    "elicit_url",
    "list_roots",
    "sample",
]
