"""Delete the MCP tasks whose TTL is over (run it from cron, or schedule the
``mcp_django.tasks.runner.purge_expired_tasks`` task): docs/tasks.md."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from mcp_django.tasks.store import purge


class Command(BaseCommand):
    help = "Delete the MCP tasks whose TTL is over (a tasks/get for them already answers -32602)."

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = purge()
        self.stdout.write(f"Deleted {deleted} expired MCP task(s).")
