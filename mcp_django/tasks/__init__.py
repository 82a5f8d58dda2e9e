"""MCP tasks (the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28): long tools as tasks.

A tool registered with ``task="optional"`` or ``task="required"`` answers a client that
opted in with a task; the work runs on Django's task framework (``django.tasks``, or the
``django_tasks`` backport on Django 5.2) and its state lives in :class:`~.models.MCPTask`.
See docs/tasks.md. Imports nothing at package level: the model module is loaded by
``mcp_django.models``.
"""

EXTENSION = "io.modelcontextprotocol/tasks"
