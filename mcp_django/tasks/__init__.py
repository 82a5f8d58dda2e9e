"""MCP tasks, the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28 (docs/tasks.md).
Imports nothing: the model module is loaded by ``mcp_django.models``."""

EXTENSION = "io.modelcontextprotocol/tasks"
