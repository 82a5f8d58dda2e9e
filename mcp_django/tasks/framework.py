"""Django's task framework, wherever it comes from: ``django.tasks`` (Django 6+) or the
``django_tasks`` backport (Django 5.2). Only what mcp_django uses is re-exported."""

from __future__ import annotations

from importlib.util import find_spec

if find_spec("django.tasks") is not None:
    from django.tasks import TaskResultStatus, task, task_backends
else:  # pragma: no cover - Django 5.2 with the backport installed
    from django_tasks import (  # type: ignore[no-redef,import-not-found,assignment,unused-ignore]
        TaskResultStatus,
        task,
        task_backends,
    )

__all__ = ["TaskResultStatus", "task", "task_backends"]
