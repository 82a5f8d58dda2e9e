"""``manage.py mcp_generate_key``: a secret for MCP_DJANGO["REQUEST_STATE_KEY"]."""

from __future__ import annotations

import secrets
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ...conf import MIN_KEY_BYTES


class Command(BaseCommand):
    help = "Print a random secret for MCP_DJANGO['REQUEST_STATE_KEY']."
    # Runs before the setup is right (that is when a key is needed, or a duplicate is looked for).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--bytes", type=int, default=48, help=f"Random bytes in the key (at least {MIN_KEY_BYTES}; default 48)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # n random bytes make about 1.3 n characters: longer than the minimum either way.
        self.stdout.write(secrets.token_urlsafe(max(MIN_KEY_BYTES, options["bytes"])))
