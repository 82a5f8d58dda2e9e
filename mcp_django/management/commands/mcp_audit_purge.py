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
        parser.add_argument(
            "--batch-size",
            type=int,
            default=10_000,
            metavar="N",
            help="Rows deleted per statement (each its own transaction; default 10000).",
        )

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
        size = options["batch_size"]
        if size < 1:
            raise CommandError("--batch-size must be 1 or more.")
        # Batches, each committed on its own: no long transaction while the endpoint writes.
        deleted = 0
        while True:
            ids = list(old.order_by("created", "id").values_list("id", flat=True)[:size])
            if not ids:
                break
            deleted += AuditEvent.objects.filter(id__in=ids).delete()[0]
            if len(ids) < size:
                break
        self.stdout.write(f"Deleted {deleted} audit event(s) older than {days} day(s).")
