"""A rate as DRF writes one: ``"100/min"``, ``"5/s"``, ``"1000/day"``, read by DRF's parser
once the text is checked whole (DRF reads only the period's first letter: ``"10/month"``)."""

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
    calls, seconds = _PARSER.parse_rate(text)
    if calls is None or seconds is None or calls < 1:
        raise ValueError(f"a rate allows at least one call per period, not {text!r}")
    return Rate(calls, seconds, text)


# Only for parse_rate, which reads nothing of its throttle (whose __init__ would read DRF's settings).
_PARSER = object.__new__(SimpleRateThrottle)
