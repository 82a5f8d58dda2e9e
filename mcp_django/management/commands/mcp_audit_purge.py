"""``manage.py mcp_audit_purge --older-than DAYS``: the audit log's retention policy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone


class Command(BaseCommand):
    help = "Delete MCP audit events older than the given number of days."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=int, required=True, metavar="DAYS", help="Age in days.")
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted, delete nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        from ...models import AuditEvent

        days = options["older_than"]
        if days < 0:
            raise CommandError("--older-than must be 0 or more days.")
        cutoff = timezone.now() - timedelta(days=days)
        old = AuditEvent.objects.filter(created__lt=cutoff)
        if options["dry_run"]:
            self.stdout.write(f"{old.count()} audit event(s) older than {days} day(s) would be deleted.")
            return
        # A raw delete: the rows have no dependants and no signals, so skip the collector.
        deleted = old._raw_delete(old.db)
        self.stdout.write(f"Deleted {deleted} audit event(s) older than {days} day(s).")
