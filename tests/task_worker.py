"""A task worker for tests against the live server (tests/conftest.py's ``live_url``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def task_worker() -> Iterator[None]:
    """A task worker in a thread of this process, on the live server's database: it takes the
    jobs the live server enqueues on django-tasks-db and runs each as ``manage.py db_worker``
    does (its ``Worker.run_task``). It finds them with a plain read rather than the worker's
    exclusive transaction: the only worker, it has no other to keep out, and the in-memory
    SQLite of the tests cannot make the live server wait for such a lock (it refuses at once)."""
    from django.db import OperationalError, close_old_connections, connections
    from django_tasks_db.management.commands.db_worker import Worker
    from django_tasks_db.models import DBTaskResult

    worker = Worker(
        queue_names=["default"],
        interval=0.05,
        batch=False,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="test-clients",
        excluded_queue_names=[],
    )
    stop = threading.Event()

    def serve() -> None:
        try:
            while not stop.is_set():
                close_old_connections()
                try:
                    job = DBTaskResult.objects.ready().filter(backend_name="default").order_by("enqueued_at").first()
                    if job is not None:
                        job.claim(worker.worker_id)
                except OperationalError:  # SQLite's table lock, held by the server a moment
                    job = None
                if job is not None:
                    worker.run_task(job)
                else:
                    stop.wait(worker.interval)
        finally:
            connections.close_all()

    thread = threading.Thread(target=serve, name="task-worker", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)
