"""One-line log records for a refused ``Host``, which Django logs with a whole traceback.

The endpoint logs one line itself (:func:`host_refused`); :class:`OneLine` in ``LOGGING``
makes Django's own record one line too (docs/index.md shows the entry).
"""

from __future__ import annotations

import logging

# Django's logger for the refusal, so one LOGGING entry (a level, a handler, silence) governs both.
disallowed_host = logging.getLogger("django.security.DisallowedHost")


class OneLine(logging.Filter):
    """Keeps a record's message and drops its traceback (``exc_info``, ``stack_info``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def host_refused(host: str) -> None:
    """One line for a request refused for its ``Host``, as Django words it, at its level."""
    shown = host if len(host) <= 100 else host[:100] + "..."
    disallowed_host.error("Invalid HTTP_HOST header: %r. It is not in ALLOWED_HOSTS.", shown)
