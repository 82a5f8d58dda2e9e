"""The audit log: one row per round, outcome, refusal and legacy ask.

A row says *that* something happened to whom, never *what* was said (no state, answers,
arguments or secrets). ``principal`` keeps the caller's label when its user is deleted.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

__all__ = ["AuditEvent", "BoundAccessToken", "Kind"]


class Kind(models.TextChoices):
    ROUND = "round", _("input round")
    COMPLETED = "completed", _("completed")
    FAILED = "failed", _("failed")
    CANCELLED = "cancelled", _("cancelled")
    STATE_REFUSED = "state_refused", _("refused state")
    MISSING_CAPABILITY = "missing_capability", _("missing capability")
    ASK = "ask", _("legacy ask")
    REPLAY_UNSAFE = "replay_unsafe", _("replay-unsafe write")
    # MCP tasks (mcp_django.tasks): a task's life, one row per change of status.
    TASK_CREATED = "task_created", _("task created")
    TASK_INPUT_REQUIRED = "task_input_required", _("task input required")
    TASK_COMPLETED = "task_completed", _("task completed")
    TASK_FAILED = "task_failed", _("task failed")
    TASK_CANCELLED = "task_cancelled", _("task cancelled")
    # A call refused by a limit (mcp_django.limits); the reason names it ("user 100/min").
    LIMITED = "limited", _("refused by a limit")


#: Kinds that end a call (their count is a handler's "calls").
CALL_KINDS = (Kind.COMPLETED, Kind.FAILED, Kind.CANCELLED)
#: Kinds that end a handler's run: a call's, and a task's (a tools/call answered with a task
#: writes task_created, not a call's row; the task's end is its run's).
RUN_KINDS = (*CALL_KINDS, Kind.TASK_COMPLETED, Kind.TASK_FAILED, Kind.TASK_CANCELLED)
#: Kinds whose rows carry the asks a handler made (a task's open questions included).
ASKED_KINDS = (Kind.ROUND, Kind.ASK, Kind.TASK_INPUT_REQUIRED)
#: Kinds where the server turned the request away before or instead of the handler's result.
REFUSAL_KINDS = (Kind.STATE_REFUSED, Kind.MISSING_CAPABILITY)


class AuditEvent(models.Model):
    # Indexes: only those a query of the log uses (docs/audit.md, "Indexes"): each is paid on
    # every insert. created's: the ordering, date_hierarchy and mcp_audit_purge.
    created = models.DateTimeField(_("time"), default=timezone.now, db_index=True)
    kind = models.CharField(_("kind"), max_length=24, choices=Kind.choices)
    # The refusal reason (mcp_django.request_state.Reason), the missing capability, or why a call failed.
    reason = models.CharField(_("reason"), max_length=48, blank=True)
    # A failed call's error message as the client got it, cut to 500 characters.
    error = models.CharField(_("error"), max_length=500, blank=True)
    # A legacy ask's outcome: answered, declined, cancelled, error, timeout, disconnect.
    outcome = models.CharField(_("outcome"), max_length=16, blank=True)
    version = models.CharField(_("protocol revision"), max_length=16, blank=True)
    era = models.CharField(_("era"), max_length=8, blank=True)
    transport = models.CharField(_("transport"), max_length=16, blank=True)
    method = models.CharField(_("method"), max_length=64, blank=True)
    # A tool or prompt name, or a resource URI (client-chosen, so truncated to fit).
    target = models.CharField(_("target"), max_length=500, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    principal = models.CharField(_("principal"), max_length=150, blank=True)
    # The credential the principal was found by, when it has a name (an MCP token's name and id).
    credential = models.CharField(_("credential"), max_length=150, blank=True)
    request_id = models.CharField(_("JSON-RPC request id"), max_length=100, blank=True)
    round = models.PositiveIntegerField(_("round"), null=True, blank=True)
    # Input-request key -> ask method ("elicitation/create", ...): what was asked, never the answer.
    asks = models.JSONField(_("input requests"), default=dict, blank=True)
    client_address = models.CharField(_("client address"), max_length=64, blank=True)
    duration_ms = models.FloatField(_("duration (ms)"), null=True, blank=True)
    # The endpoint that served the call (its Registry's name; docs/endpoints.md).
    endpoint = models.CharField(_("endpoint"), max_length=64, default="default")
    # Given when the event's row is made, so that a batch the writer retries after a lost
    # COMMIT reply inserts nothing twice (null for rows made outside the writer).
    event_id = models.UUIDField(_("event id"), null=True, blank=True, unique=True, editable=False)

    class Meta:
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")
        ordering = ["-created", "-id"]
        indexes = [
            # The handler pages' counts and links, and the method filter.
            models.Index(fields=["method", "target", "kind"], name="mcp_audit_handler_idx"),
            # The changelist's commonest view: one kind (or the refusals, the calls), newest first.
            models.Index(fields=["kind", "-created"], name="mcp_audit_kind_created_idx"),
        ]

    def __str__(self) -> str:
        what = self.get_kind_display()
        detail = self.reason or (self.outcome if self.outcome != self.kind else "")
        if detail:
            what = f"{what} ({detail})"
        target = f" {self.target}" if self.target else ""
        when = self.created.strftime("%Y-%m-%d %H:%M:%S") if self.created is not None else "?"
        # The user's username while the account exists, else the label the row was written with.
        who = self.principal or "?"
        if self.user_id is not None and self.user is not None:
            who = str(self.user.get_username())
        return f"{when} {what}: {self.method}{target} by {who}"


class RegisteredHandler(AuditEvent):
    """No table of its own: a proxy that gives the admin's index a "Registered handlers" entry
    (the admin lists models, not views) without a custom ``AdminSite``."""

    class Meta:
        proxy = True
        verbose_name = _("registered handler")
        verbose_name_plural = _("registered handlers")


from .tasks.models import MCPTask, MCPWorker  # noqa: E402, F401 - the tasks extension's model, in its own module
from .tokens.models import BoundAccessToken, MCPToken  # noqa: E402, F401 - the token rows, in their own module
