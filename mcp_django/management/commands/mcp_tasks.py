"""MCP tasks for operators: ``status`` (the workers seen alive and the queue) and ``sweep``
(what the workers' sweep does, once, from here). See docs/tasks.md."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from mcp_django.tasks import workers


class Command(BaseCommand):
    help = "MCP tasks: 'status' shows the task workers seen alive and the queue; 'sweep' sweeps lost runs once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "sweep"])
        parser.add_argument("--json", action="store_true", help="print JSON (status)")
        parser.add_argument(
            "--every",
            type=float,
            default=0,
            help="sweep: again every this many seconds, until stopped (for a backend whose workers "
            "do not sweep, such as RQ's; mcp_worker sweeps by itself)",
        )

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "sweep":
            if options["every"] > 0:
                workers.sweep_forever(options["every"])
            else:
                self.stdout.write(", ".join(f"{key} {value}" for key, value in workers.sweep().items()))
            return
        now = timezone.now()
        alive = workers.alive(now)
        queue = workers.queue()
        if options["json"]:
            out = {
                "workers": [
                    {
                        "id": worker.id,
                        "host": worker.host,
                        "pid": worker.pid,
                        "backend": worker.backend,
                        "started": worker.started.isoformat(),
                        "seen_seconds_ago": round((now - worker.seen).total_seconds(), 1),
                        "task_runs": worker.tasks_run,
                    }
                    for worker in alive
                ],
                **queue,
            }
            self.stdout.write(json.dumps(out, indent=2))
        else:
            self.stdout.write(f"{len(alive)} task worker(s) alive (seen within {workers.alive_within().seconds} s)")
            for worker in alive:
                ago = (now - worker.seen).total_seconds()
                self.stdout.write(
                    f"  {worker.id}  {worker.host}:{worker.pid}  backend {worker.backend}  "
                    f"seen {ago:.1f} s ago  {worker.tasks_run} run(s) since {worker.started:%Y-%m-%d %H:%M:%S}"
                )
            self.stdout.write(
                f"{queue['queued']} task(s) queued, {queue['running']} running, "
                f"{queue['input_required']} waiting for input"
            )
        if not alive and workers.needs_worker():
            # For a monitor: a status that needs a worker and has none is an error.
            raise CommandError("no task worker is alive: start manage.py mcp_worker (docs/tasks.md)", returncode=2)
