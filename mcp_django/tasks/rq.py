"""RQ's worker kept alive through an outage of its Redis, for MCP tasks on django-tasks-rq.

RQ's own worker waits out a Redis that refuses while it looks for work, but quits on the
first Redis error anywhere else: its heartbeat while a job runs, or reading the job's
status once the job's process ended (whose own write of the result failed). The MCP task's
state is in the database, so the job's end is recorded whatever Redis does; this worker says
once that Redis is away, lets the job run on, and goes back to waiting for work::

    python manage.py rqworker default --job-class django_tasks_rq.Job \\
        --worker-class mcp_django.tasks.rq.Worker

A queue a Redis without persistence forgot is recovered by the sweep (``manage.py mcp_tasks
sweep --every 10``): a task whose job the backend no longer has is run again. docs/tasks.md.
"""

from __future__ import annotations

from typing import Any

import redis
from rq import Worker as RQWorker  # type: ignore[import-not-found,unused-ignore]

from .workers import Outage

REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class Worker(RQWorker):  # type: ignore[misc,unused-ignore]
    """RQ's forking worker, whose Redis may go away and come back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outage = Outage("the RQ task worker", "its Redis")

    def _through(self, step: Any, *args: Any) -> Any:
        try:
            return step(*args)
        except REDIS_DOWN as exc:
            self.outage.failed(exc)  # the job runs on; the next look for work waits for Redis
            return None

    def heartbeat(self, *args: Any, **kwargs: Any) -> Any:
        return self._through(lambda: super(Worker, self).heartbeat(*args, **kwargs))

    def maintain_heartbeats(self, *args: Any) -> Any:
        return self._through(super().maintain_heartbeats, *args)

    def check_for_suspension(self, *args: Any) -> Any:
        return self._through(super().check_for_suspension, *args)

    def run_maintenance_tasks(self) -> Any:
        return self._through(super().run_maintenance_tasks)

    def execute_job(self, *args: Any) -> Any:
        return self._through(super().execute_job, *args)

    def set_state(self, *args: Any, **kwargs: Any) -> Any:
        return self._through(lambda: super(Worker, self).set_state(*args, **kwargs))

    def dequeue_job_and_maintain_ttl(self, *args: Any, **kwargs: Any) -> Any:
        # RQ waits here, with back-off, for a Redis that refuses; what it returns is Redis's answer.
        found = super().dequeue_job_and_maintain_ttl(*args, **kwargs)
        self.outage.over()
        return found
