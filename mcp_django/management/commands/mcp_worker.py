"""Run MCP tasks: django-tasks-db's ``db_worker`` loop, which outlives database outages (waiting
with back-off), beside a thread that reports the worker alive and sweeps lost runs.
"""

from __future__ import annotations

import os
import time
from typing import Any

from django.core.management.base import CommandError
from django.db import InterfaceError, OperationalError, close_old_connections, connections, router
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader

from mcp_django.tasks.models import MCPTask
from mcp_django.tasks.workers import Pulse, outage

try:
    from django_tasks_db.management.commands.db_worker import Command as DBWorkerCommand
    from django_tasks_db.management.commands.db_worker import Worker
    from django_tasks_db.models import DBTaskResult
except ImportError as exc:  # pragma: no cover - the command needs the database backend
    raise CommandError("manage.py mcp_worker runs django-tasks-db's worker: pip install django-tasks-db") from exc

# The back-off between tries while the database is away: from the first to the last, doubling.
FIRST_WAIT = 0.1
LONGEST_WAIT = 2.0


class OutlivingWorker(Worker):
    """django-tasks-db's worker whose loop outlives the database going away."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pulse = Pulse(self.worker_id, self.backend_name)
        self.outage = outage("the task worker")

    def run(self) -> None:
        self.pulse.start()
        try:
            while self.running:
                try:
                    super().run()
                    return  # --batch or --max-tasks ended it
                except (OperationalError, InterfaceError) as exc:
                    self.outage.failed(exc)
                    self.startup_delay = False
                    self._wait_for_database()
        finally:
            self.pulse.stop()

    def _wait_for_database(self) -> None:
        wait = FIRST_WAIT
        alias = router.db_for_write(DBTaskResult)
        while self.running:
            close_old_connections()  # the connection the outage broke: a new one is tried
            try:
                connections[alias].ensure_connection()
                # And the tasks' own database, when it is another one.
                connections[router.db_for_write(MCPTask)].ensure_connection()
            except (OperationalError, InterfaceError) as exc:
                self.outage.failed(exc)
                time.sleep(wait)
                wait = min(wait * 2, LONGEST_WAIT)
                continue
            self.outage.closed()
            return

    def run_task(self, db_task_result: DBTaskResult) -> None:
        try:
            super().run_task(db_task_result)
        finally:
            self.pulse.runs += 1


class Command(DBWorkerCommand):
    help = (
        "Run MCP tasks (and any other django-tasks-db task): db_worker's loop that outlives database "
        "outages, with a heartbeat (manage.py mcp_tasks status) and the sweep that retries lost runs."
    )

    def handle(self, *, verbosity: int, reload: bool, batch: bool, **options: Any) -> None:
        self.configure_logging(verbosity)
        reload = reload and not batch  # as db_worker: --batch turns --reload off
        queue_names = options["queue_name"].split(",")
        excluded = options["exclude_queues"].split(",") if options["exclude_queues"] else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        worker = OutlivingWorker(
            queue_names=queue_names,
            interval=options["interval"],
            batch=batch,
            backend_name=options["backend_name"],
            startup_delay=options["startup_delay"],
            max_tasks=options["max_tasks"],
            worker_id=options["worker_id"],
            excluded_queue_names=excluded,
        )
        if reload:
            if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
                worker.configure_signals()
            run_with_reloader(worker.run)
        else:
            worker.configure_signals()
            worker.run()
