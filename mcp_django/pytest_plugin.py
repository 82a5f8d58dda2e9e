"""pytest plugin (the ``pytest11`` entry point): the ``mcp_client`` fixture, an anonymous
:class:`mcp_django.testing.MCPClient`; call it for another (``mcp_client(user=alice)``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["mcp_client"]


class _ClientFactory:
    """The default client's methods, plus ``__call__`` for a client with other options."""

    def __init__(self) -> None:
        self._clients: list[Any] = []
        self._default: Any = None

    def __call__(self, user: Any = None, **options: Any) -> Any:
        from mcp_django.testing import MCPClient

        client = MCPClient(user, **options)
        self._clients.append(client)
        return client

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._default is None:
            self._default = self()
        return getattr(self._default, name)

    def close(self) -> None:
        for client in self._clients:
            with contextlib.suppress(Exception):  # the test database may be gone already
                client.close()


@pytest.fixture
def mcp_client() -> Iterator[Any]:
    """An in-process MCP client (see docs/testing.md); needs the database like any request does."""
    factory = _ClientFactory()
    yield factory
    factory.close()
