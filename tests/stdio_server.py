"""The demo project served by ``manage.py mcp_stdio``, plus two tools the stdio tests need.

Run as a script by tests/test_stdio.py: it registers the tools, then runs the
command with the arguments it was given.
"""

from __future__ import annotations

import os
import sys

import django

RUNS = {"count": 0}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    django.setup()
    from django.core.management import call_command

    from mcp_django import SyncContext, mcp

    @mcp.tool()
    def stdio_noisy(ctx: SyncContext) -> str:
        """Writes to stdout three ways, then asks: none of it may reach the protocol stream."""
        RUNS["count"] += 1
        print("print() from a handler")
        sys.stdout.write("sys.stdout from a handler\n")
        os.write(1, b"file descriptor 1 from a handler\n")
        answer = ctx.confirm("Go on?")
        return f"answer={answer} runs={RUNS['count']} user={ctx.user.get_username()}"

    call_command("mcp_stdio", *sys.argv[1:])


if __name__ == "__main__":
    main()
