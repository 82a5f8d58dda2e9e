"""Deleting a user while that user's calls are being audited (PostgreSQL).

Django deletes a user in one transaction: it nulls the audit rows' key to the user,
deletes the user's other rows (tokens...), deletes the user, and PostgreSQL checks the
keys when that transaction commits. A batch of the audit writer committed in between,
with a row for the user, failed the whole deletion with ``IntegrityError``. Here two
clients call ``echo`` with the user's token while the user is deleted, again and again:
every deletion must succeed, every answered call must keep its row, and no row may
refer to a user that is gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models.signals import post_delete
from rest_framework.authtoken.models import Token

from mcp_django import audit, signals
from mcp_django.auth import Principal
from mcp_django.models import AuditEvent, Kind
from mcp_django.protocol.revisions import Era
from tests.conftest import Raw

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 8


@pytest.fixture(autouse=True)
def _background_writes(settings: Any, transactional_db: None) -> Iterator[None]:
    if connection.vendor != "postgresql":
        pytest.skip("the race is PostgreSQL's: its key checks wait for the end of the deleting transaction")
    # The production default: rows queued, written by the writer thread after the answer.
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "AUDIT": {"ASYNC_WRITES": True}}
    audit.flush()
    AuditEvent.objects.all().delete()
    yield
    audit.flush()


@pytest.fixture
def slow_token_deletion() -> Iterator[None]:
    # Django deletes the user's tokens after it has nulled the audit rows' key and before
    # it deletes the user: holding the transaction there for a moment gives the writer
    # the time a busy server gives it, so the race is met on every round, not now and then.
    def linger(**kwargs: Any) -> None:
        time.sleep(0.15)

    post_delete.connect(linger, sender=Token, dispatch_uid="test_audit_deletion.linger")
    yield
    post_delete.disconnect(sender=Token, dispatch_uid="test_audit_deletion.linger")


class Caller(threading.Thread):
    """Calls echo with a token until told to stop; counts the calls answered with a result."""

    def __init__(self, url: str, token: str, name: str) -> None:
        super().__init__(daemon=True)
        self.url, self.token, self.label = url, token, name
        self.stop = threading.Event()
        self.answered: list[str] = []
        self.errors: list[str] = []

    def run(self) -> None:
        with httpx.Client(timeout=30) as client:
            raw = Raw(self.url, client)
            i = 0
            while not self.stop.is_set():
                i += 1
                request_id = f"{self.label}-{i}"
                response = raw.call(
                    "echo",
                    {"text": request_id},
                    headers={"Authorization": f"Token {self.token}"},
                    request_id=request_id,
                )
                if response.status_code == 200 and "result" in response.json():
                    self.answered.append(request_id)
                elif response.status_code != 401:  # the token went with its user
                    self.errors.append(f"{response.status_code} {response.text}")


def test_a_user_is_deleted_while_their_calls_are_audited(live_url: str, slow_token_deletion: None) -> None:
    users = get_user_model()
    answered: list[str] = []
    deleted: list[int] = []
    for n in range(ROUNDS):
        user = users.objects.create_user(f"busy-{n}", password="x")
        token = Token.objects.create(user=user).key
        callers = [Caller(live_url, token, f"u{n}c{c}") for c in range(2)]
        for caller in callers:
            caller.start()
        deadline = time.monotonic() + 30
        while sum(len(c.answered) for c in callers) < 6:
            assert time.monotonic() < deadline, "the calls were not answered"
            time.sleep(0.01)
        pk = user.pk
        user.delete()  # raises IntegrityError when a row for the user slipped in
        deleted.append(pk)
        time.sleep(0.1)  # calls go on for a moment after the deletion (the principal may be cached)
        for caller in callers:
            caller.stop.set()
        for caller in callers:
            caller.join(30)
            assert not caller.errors, caller.errors
            answered.extend(caller.answered)

    assert audit.flush()
    rows = AuditEvent.objects.filter(kind=Kind.COMPLETED, target="echo")
    # Every answered call kept its row, once.
    assert sorted(rows.values_list("request_id", flat=True)) == sorted(answered)
    # Each row names its user by label, and no longer by key: every user is gone.
    labels = {f"auth.user:{pk}" for pk in deleted}
    assert set(rows.values_list("principal", flat=True)) == labels
    assert not rows.filter(user__isnull=False).exists()
    # No key points at a missing user (PostgreSQL checks keys at commit; this says so outright).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM mcp_django_auditevent a LEFT JOIN auth_user u ON u.id = a.user_id "
            "WHERE a.user_id IS NOT NULL AND u.id IS NULL"
        )
        assert cursor.fetchone()[0] == 0


def test_a_row_queued_during_a_deletion_waits_for_it_and_loses_only_the_key(live_url: str) -> None:
    """The same turn-taking, step by step: a row for the user queued while the deletion
    is between nulling the keys and deleting the user."""
    users = get_user_model()
    user = users.objects.create_user("leaving", password="x")
    token = Token.objects.create(user=user).key
    with httpx.Client(timeout=30) as client:
        answer = Raw(live_url, client).call("echo", {"text": "x"}, headers={"Authorization": f"Token {token}"})
        assert "result" in answer.json(), answer.text
    assert audit.flush()
    (before,) = AuditEvent.objects.filter(kind=Kind.COMPLETED)
    assert before.user_id == user.pk
    pk = user.pk

    inside = threading.Event()
    go_on = threading.Event()

    def hold(**kwargs: Any) -> None:
        inside.set()
        go_on.wait(10)

    failure: list[BaseException] = []

    def delete() -> None:
        try:
            users.objects.get(pk=pk).delete()
        except BaseException as exc:
            failure.append(exc)
        finally:
            connection.close()

    post_delete.connect(hold, sender=Token, dispatch_uid="test_audit_deletion.hold")
    try:
        deleting = threading.Thread(target=delete)
        deleting.start()
        assert inside.wait(10)
        # The keys are nulled and the user is not yet deleted: a late row for the user arrives.
        late_call = signals.Event(
            kind="completed",
            era=Era.MODERN,
            transport="http",
            method=before.method,
            target=before.target,
            principal=Principal(user),
            request_id="late",
        )
        audit.record(late_call, Kind.COMPLETED)
        time.sleep(0.3)  # the writer's turn comes after the deletion's
        go_on.set()
        deleting.join(10)
    finally:
        go_on.set()
        post_delete.disconnect(sender=Token, dispatch_uid="test_audit_deletion.hold")
    assert not failure, failure
    assert not users.objects.filter(pk=pk).exists()
    assert audit.flush()
    late = AuditEvent.objects.get(request_id="late")
    assert late.user_id is None and late.principal == f"auth.user:{pk}"
    before.refresh_from_db()
    assert before.user_id is None and before.principal == f"auth.user:{pk}"
