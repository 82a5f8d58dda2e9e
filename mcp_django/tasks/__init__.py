"""MCP tasks (the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28): long tools as tasks.

A tool registered with ``task="optional"`` or ``"required"`` answers a client that opted in with
a task, run on Django's task framework, its state in :class:`~.models.MCPTask` (docs/tasks.md).
Imports nothing: the model module is loaded by ``mcp_django.models``.
"""

EXTENSION = "io.modelcontextprotocol/tasks"
