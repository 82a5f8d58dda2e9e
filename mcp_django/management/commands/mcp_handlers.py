"""``manage.py mcp_handlers``: what the MCP endpoint serves."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...handlers import PRIMITIVES


def describe(handler: Any) -> dict[str, Any]:
    from ...handler_report import address, schema

    out: dict[str, Any] = {
        "type": handler.primitive,
        "name": handler.name,
        "address": address(handler),
        "description": handler.description,
        "source": handler.source,
        "async": handler.is_async,
        "schema": schema(handler),
    }
    if handler.permissions:
        out["permissions"] = list(handler.permissions)
    if handler.allow_anonymous is not None:
        out["allow_anonymous"] = handler.allow_anonymous
    if getattr(handler, "task", None):
        out["task"] = handler.task  # runs as an MCP task: "optional" or "required"
    return out


class Command(BaseCommand):
    help = "List the registered MCP tools, prompts, resources and resource templates."
    # Lists what is registered even while the setup is not right yet (what a failing check names).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print a JSON array instead of a table.")
        parser.add_argument("--type", choices=PRIMITIVES, help="Only handlers of this type.")
        parser.add_argument(
            "--endpoint", default="default", metavar="NAME", help="Another endpoint's (docs/endpoints.md)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from ...registry import endpoints, registry_named

        registry = registry_named(options["endpoint"])
        if registry is None:
            known = ", ".join(r.name for r in endpoints())
            raise CommandError(f"No endpoint {options['endpoint']!r}; the endpoints are {known}.")
        handlers = [h for h in registry.all_handlers() if not options["type"] or h.primitive == options["type"]]
        rows = [describe(h) for h in handlers]
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2, default=str))
            return
        if not rows:
            self.stdout.write("No handlers are registered.")
            return
        # Every column as wide as its longest cell: a table a person can scan down.
        table = [
            (
                r["type"] + (f" (task {r['task']})" if r.get("task") else ""),
                r["address"],
                r["source"],
                r["description"].splitlines()[0] if r["description"] else "",
            )
            for r in rows
        ]
        widths = [max(len(cells[i]) for cells in table) for i in range(3)]
        for primitive, where, source, first_line in table:
            line = f"{primitive:<{widths[0]}}  {where:<{widths[1]}}  {source:<{widths[2]}}  {first_line}"
            self.stdout.write(line.rstrip())
