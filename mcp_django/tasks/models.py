"""The MCP task row: everything a client sees of a task, so any instance answers ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` (Django's task framework only runs the work). Arguments and
answers are kept to run the task again (the replay rule); all goes with the row when its TTL ends.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


def new_task_id() -> str:
    # A task id is a bearer handle (SEP-2663 security): 256 random bits, never a counter.
    return secrets.token_urlsafe(32)


class Status(models.TextChoices):
    WORKING = "working", _("working")
    INPUT_REQUIRED = "input_required", _("input required")
    COMPLETED = "completed", _("completed")
    FAILED = "failed", _("failed")
    CANCELLED = "cancelled", _("cancelled")


TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)


class MCPTask(models.Model):
    id = models.CharField(_("task id"), max_length=64, primary_key=True, default=new_task_id, editable=False)
    tool = models.CharField(_("tool"), max_length=200, db_index=True)
    # The endpoint whose tool it runs (its Registry's name): only that endpoint shows the task.
    endpoint = models.CharField(_("endpoint"), max_length=64, default="default")
    arguments = models.JSONField(_("arguments"), default=dict, blank=True)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.WORKING)
    status_message = models.CharField(_("status message"), max_length=500, blank=True)
    # The CallToolResult of a completed task, or the JSON-RPC error of a failed one.
    result = models.JSONField(_("result"), null=True, blank=True)
    error = models.JSONField(_("error"), null=True, blank=True)
    # Unanswered asks: key -> the request the client sees (inputRequests), and key -> the
    # question's digest, so an answer counts only for the question that was asked.
    input_requests = models.JSONField(_("pending input requests"), default=dict, blank=True)
    asked = models.JSONField(_("pending question digests"), default=dict, blank=True)
    # Answered asks: key -> {"q": digest, "a": answer}, as the replay engine reads them.
    answers = models.JSONField(_("answers"), default=dict, blank=True)
    # Every key ever asked: keys are unique over a task's life (SEP-2663).
    keys = models.JSONField(_("keys asked"), default=list, blank=True)
    state = models.JSONField(_("ctx.state"), default=dict, blank=True)
    # What the creating request said about its client: the asks are checked against it.
    version = models.CharField(_("protocol revision"), max_length=16, blank=True)
    capabilities = models.JSONField(_("client capabilities"), default=dict, blank=True)
    client_info = models.JSONField(_("client info"), null=True, blank=True)
    # The principal the task is bound to: only it may read, answer or cancel the task.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    principal = models.CharField(_("principal"), max_length=150, blank=True, db_index=True)
    # The principal's keyed hash (mcp_django.tasks.store.binding).
    principal_digest = models.CharField(max_length=100, blank=True, editable=False)
    created = models.DateTimeField(_("created"), db_index=True)
    updated = models.DateTimeField(_("last updated"))
    ttl_ms = models.PositiveBigIntegerField(_("TTL (ms)"), null=True, blank=True)
    expires = models.DateTimeField(_("expires"), null=True, blank=True, db_index=True)
    cancel_requested = models.BooleanField(_("cancel requested"), default=False)
    rounds = models.PositiveIntegerField(_("input rounds"), default=0)
    runs = models.PositiveIntegerField(_("runs"), default=0)
    # Set while a worker runs the task, pushed forward by its heartbeat: past it, the run is lost.
    lease_until = models.DateTimeField(_("worker lease until"), null=True, blank=True)
    # The id django.tasks gave the last enqueued run (for operators; the backend's own row).
    job_id = models.CharField(_("job id"), max_length=100, blank=True)
    # When the backend was last asked about an unclaimed run (mcp_django.tasks.lost.lost_before_claim).
    run_checked = models.DateTimeField(_("unclaimed run last checked"), null=True, blank=True, editable=False)
    # Lost runs started again (a worker killed, a connection lost), up to the tool's ``retries``.
    retried = models.PositiveIntegerField(_("runs retried"), default=0)

    class Meta:
        verbose_name = _("MCP task")
        verbose_name_plural = _("MCP tasks")
        ordering = ["-created"]
        indexes = [models.Index(fields=["status", "-created"], name="mcp_task_status_created_idx")]

    def __str__(self) -> str:
        return f"{self.tool} {self.get_status_display()} ({self.id[:8]}…)"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL


class MCPWorker(models.Model):
    """A task worker's heartbeat, written by ``manage.py mcp_worker`` every few seconds. A worker
    that stopped cleanly deletes its row; a dead one's stays, ``seen`` too old to count."""

    id = models.CharField(_("worker id"), max_length=64, primary_key=True)
    host = models.CharField(_("host"), max_length=200, blank=True)
    pid = models.PositiveIntegerField(_("process id"), default=0)
    backend = models.CharField(_("task backend"), max_length=64, blank=True)
    started = models.DateTimeField(_("started"))
    seen = models.DateTimeField(_("last seen"), db_index=True)
    tasks_run = models.PositiveIntegerField(_("task runs"), default=0)

    class Meta:
        verbose_name = _("MCP task worker")
        verbose_name_plural = _("MCP task workers")
        ordering = ["-seen"]

    def __str__(self) -> str:
        return f"{self.host}:{self.pid} ({self.id[:8]})"
