"""The in-process test client's machinery (the public names are in :mod:`mcp_django.testing`).

This package's ``__init__`` holds only what the serving code looks at, so that
importing it from the hot path costs nothing.
"""

from __future__ import annotations

import contextvars
from typing import Any

# Set by the test client for the requests it drives: an executor running in the
# test's own thread. Sync work then goes there (thread-sensitive, as Django's
# async test client arranges), on the test's database connection and inside its
# transaction, instead of to the worker pool, whose threads have connections of
# their own. See mcp_django.asks.invoke.run_in_thread.
test_thread: contextvars.ContextVar[Any] = contextvars.ContextVar("mcp_django_test_thread", default=None)

# Set by the test client: told about every attempt a handler makes (see observe.Observer).
observer: contextvars.ContextVar[Any] = contextvars.ContextVar("mcp_django_observer", default=None)
