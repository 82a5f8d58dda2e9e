"""``manage.py mcp_stdio --user USERNAME``: serve MCP over stdin/stdout for a local client.

A pipe has no credentials: whoever may start the command acts as the user it names.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...auth import ANONYMOUS, Principal
from ...registry import endpoints, registry_named
from ...transports import stdio


class Command(BaseCommand):
    help = "Serve MCP over stdin/stdout (the stdio transport) as the given user."

    def add_arguments(self, parser: CommandParser) -> None:
        who = parser.add_mutually_exclusive_group()
        who.add_argument("--user", metavar="USERNAME", help="the user every call runs as (by USERNAME_FIELD)")
        who.add_argument(
            "--anonymous", action="store_true", help="run calls anonymously (needs MCP_DJANGO['ALLOW_ANONYMOUS'])"
        )
        parser.add_argument(
            "--endpoint",
            default="default",
            metavar="NAME",
            help="serve this endpoint's handlers (a Registry's name; docs/endpoints.md), the default one's without",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        registry = registry_named(options["endpoint"])
        if registry is None:
            known = ", ".join(r.name for r in endpoints())
            raise CommandError(f"No endpoint {options['endpoint']!r}; the endpoints are {known}.")
        principal = self._principal(options["user"], options["anonymous"], registry.settings.ALLOW_ANONYMOUS)
        # Only protocol messages may reach stdout: keep the real one for them and send
        # everything else that writes to file descriptor 1 (print(), C libraries) to stderr.
        protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        sys.stdout = sys.stderr
        protocol_in = sys.stdin.buffer
        try:
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(stdio.serve(principal, protocol_in, protocol_out, registry))
        finally:
            protocol_out.close()

    def _principal(self, username: str | None, anonymous: bool, anonymous_allowed: bool) -> Principal:
        if anonymous:
            if not anonymous_allowed:
                raise CommandError("--anonymous needs MCP_DJANGO['ALLOW_ANONYMOUS'] = True (for this endpoint).")
            return ANONYMOUS
        if not username:
            raise CommandError("Name the user the calls run as: --user USERNAME (or --anonymous).")
        user_model = get_user_model()
        try:
            user = user_model._default_manager.get_by_natural_key(username)
        except user_model.DoesNotExist:
            raise CommandError(f"No user {username!r}.") from None
        if not user.is_active:
            raise CommandError(f"The user {username!r} is inactive.")
        return Principal(user)
