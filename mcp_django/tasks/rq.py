"""RQ's worker kept alive through an outage of its Redis, for MCP tasks on django-tasks-rq
(``rqworker --worker-class mcp_django.tasks.rq.Worker``, docs/tasks.md), where RQ's own quits:
a task's state is in the database, so the job runs on."""

from __future__ import annotations

from typing import Any

import redis
from rq import Worker as RQWorker  # type: ignore[import-not-found,unused-ignore]

from .lost import outage

REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def _outlasting(name: str) -> Any:
    """RQ's method ``name``, a Redis outage in it logged (once) instead of raised."""

    def method(self: Worker, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(RQWorker, name)(self, *args, **kwargs)
        except REDIS_DOWN as exc:
            self.outage.failed(exc)  # the job runs on; the next look for work waits for Redis
            return None

    return method


class Worker(RQWorker):  # type: ignore[misc,unused-ignore]
    """RQ's forking worker, whose Redis may go away and come back."""

    heartbeat = _outlasting("heartbeat")
    maintain_heartbeats = _outlasting("maintain_heartbeats")
    check_for_suspension = _outlasting("check_for_suspension")
    run_maintenance_tasks = _outlasting("run_maintenance_tasks")
    execute_job = _outlasting("execute_job")
    set_state = _outlasting("set_state")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outage = outage("the RQ task worker", "its Redis")

    def dequeue_job_and_maintain_ttl(self, *args: Any, **kwargs: Any) -> Any:
        # RQ waits here, with back-off, for a Redis that refuses; what it returns is Redis's answer.
        found = super().dequeue_job_and_maintain_ttl(*args, **kwargs)
        self.outage.closed()
        return found
