"""A rate as DRF writes one: ``"100/min"``, ``"5/s"``, ``"1000/day"``.

The numbers come from DRF's own parser (``SimpleRateThrottle.parse_rate``); before it, the
text is checked whole, because DRF reads only the period's first letter and would take
``"10/month"`` for ten a minute.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from rest_framework.throttling import SimpleRateThrottle

# What a refusal's audit row and error name as the limit that refused.
SCOPES = ("user", "token", "tool", "endpoint")

_RATE = re.compile(r"(\d+)/(s|sec|second|m|min|minute|h|hour|d|day)s?")


class Rate(NamedTuple):
    calls: int
    seconds: int
    text: str

    def __str__(self) -> str:
        return self.text


def parse(value: object) -> Rate:
    """The rate ``value`` says; ``ValueError`` saying what a rate looks like otherwise."""
    if not isinstance(value, str) or _RATE.fullmatch(value.strip()) is None:
        raise ValueError(
            f'a rate is "<calls>/<period>" with a period of s, sec, m, min, h, hour, d or day (e.g. "100/min"), '
            f"not {type(value).__name__} {value!r}"[:200]
        )
    text = value.strip()
    calls, seconds = SimpleRateThrottle.parse_rate(_PARSER, text)
    if calls is None or seconds is None or calls < 1:
        raise ValueError(f"a rate allows at least one call per period, not {text!r}")
    return Rate(calls, seconds, text)


class _Parser(SimpleRateThrottle):
    """Only for ``parse_rate``, which reads nothing of the throttle it is called on."""

    def __init__(self) -> None:  # SimpleRateThrottle's would look a rate up in DRF's settings
        pass


_PARSER = _Parser()
