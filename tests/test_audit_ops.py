"""Operator tools: the management commands and every system check id."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.checks import WARNING
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from mcp_django import audit, checks, conf
from mcp_django.models import AuditEvent, Kind
from mcp_django.registry import Registry, mcp


def run(*args: Any) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def mcp_with(**values: Any) -> dict[str, Any]:
    return {**settings.MCP_DJANGO, **values}


# -- commands -----------------------------------------------------------------------------


def test_mcp_handlers_table() -> None:
    out = run("mcp_handlers")
    lines = out.splitlines()
    assert len(lines) == len(mcp.all_handlers())
    echo = next(line for line in lines if " echo " in line)
    assert echo.startswith("tool") and "project.demo.mcp.echo" in echo and "Send the text back." in echo
    assert any(line.startswith("template") and "test://template/{id}/data" in line for line in lines)


def test_mcp_handlers_columns_are_aligned() -> None:
    lines = run("mcp_handlers").splitlines()
    echo = next(line for line in lines if " echo " in line)
    # Each column starts where the header-less table's other rows start it.
    for column in ("echo", "project.demo.mcp.echo", "Send the text back."):
        start = echo.index(column)
        assert all(len(line) <= start or line[start - 2 : start] == "  " for line in lines), column
    sources = {line.index("project.") for line in lines if "project." in line}
    assert len(sources) == 1  # every source in one column, whatever the name's length


def test_mcp_handlers_json() -> None:
    rows = json.loads(run("mcp_handlers", "--json"))
    by_name = {(r["type"], r["name"]): r for r in rows}
    echo = by_name[("tool", "echo")]
    assert echo["source"] == "project.demo.mcp.echo" and echo["async"] is False
    assert echo["schema"]["properties"]["text"]["type"] == "string"
    assert by_name[("resource", "static-text")]["address"] == "test://static-text"
    assert {r["type"] for r in rows} == {"tool", "prompt", "resource", "template"}


def test_mcp_handlers_type() -> None:
    rows = json.loads(run("mcp_handlers", "--json", "--type", "prompt"))
    assert rows and {r["type"] for r in rows} == {"prompt"}


@pytest.mark.django_db
def test_mcp_audit_purge() -> None:
    audit.flush()  # rows queued by earlier tests must not land in the middle of this one
    AuditEvent.objects.all().delete()
    now = timezone.now()
    for days in (0, 10, 40, 400):
        AuditEvent.objects.create(
            kind=Kind.COMPLETED, method="tools/call", target=f"t{days}", created=now - timedelta(days=days)
        )
    assert "2 audit event(s) older than 30 day(s) would be deleted." in run(
        "mcp_audit_purge", "--older-than", "30", "--dry-run"
    )
    assert AuditEvent.objects.count() == 4
    assert "Deleted 2 audit event(s)" in run("mcp_audit_purge", "--older-than", "30")
    assert sorted(AuditEvent.objects.values_list("target", flat=True)) == ["t0", "t10"]
    assert "Deleted 0 audit event(s)" in run("mcp_audit_purge", "--older-than", "30")


@pytest.mark.django_db
def test_mcp_audit_purge_deletes_in_batches() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    audit.flush()
    AuditEvent.objects.all().delete()
    old = timezone.now() - timedelta(days=100)
    AuditEvent.objects.bulk_create(
        [AuditEvent(kind=Kind.COMPLETED, method="tools/call", target=f"t{n}", created=old) for n in range(7)]
        + [AuditEvent(kind=Kind.COMPLETED, method="tools/call", target="new")]
    )
    with CaptureQueriesContext(connection) as queries:
        assert "Deleted 7 audit event(s)" in run("mcp_audit_purge", "--older-than", "30", "--batch-size", "3")
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("DELETE")]
    assert len(deletes) == 3  # 3 + 3 + 1 rows, each batch its own statement
    assert list(AuditEvent.objects.values_list("target", flat=True)) == ["new"]
    with pytest.raises(CommandError, match="1 or more"):
        call_command("mcp_audit_purge", "--older-than", "30", "--batch-size", "0")


@pytest.mark.django_db
def test_mcp_audit_purge_needs_days() -> None:
    with pytest.raises(CommandError):
        call_command("mcp_audit_purge")
    with pytest.raises(CommandError, match="0 or more"):
        call_command("mcp_audit_purge", "--older-than", "-1")


def test_mcp_generate_key() -> None:
    first, second = run("mcp_generate_key").strip(), run("mcp_generate_key").strip()
    assert first != second and len(first.encode()) >= conf.MIN_KEY_BYTES
    assert len(run("mcp_generate_key", "--bytes", "8").strip()) >= conf.MIN_KEY_BYTES  # never below the minimum
    with override_settings(DEBUG=False, MCP_DJANGO=mcp_with(REQUEST_STATE_KEY=first)):
        assert checks.check_request_state_key() == []


# -- checks -------------------------------------------------------------------------------


def ids(messages: list[Any]) -> list[str]:
    for message in messages:
        assert message.hint, message  # every message says how to fix it
    return [m.id for m in messages]


def test_w001_no_key_and_a_weak_secret_key_without_debug() -> None:
    strong = "Zq7#kP2!vL9@xM4$wN8%rT3^yB6&uC1*eH5(oJ0)sF-gD_aK+iQ="
    weak = "django-insecure-" + strong
    # Unset, the keys derive from SECRET_KEY: sound when it is a real secret.
    with override_settings(DEBUG=False, SECRET_KEY=strong, MCP_DJANGO=mcp_with(REQUEST_STATE_KEY=None)):
        assert checks.check_request_state_key() == []
    with override_settings(DEBUG=False, SECRET_KEY=weak, MCP_DJANGO=mcp_with(REQUEST_STATE_KEY=None)):
        messages = checks.check_request_state_key()
        assert ids(messages) == ["mcp_django.W001"] and "weak SECRET_KEY " in messages[0].msg
    with override_settings(
        DEBUG=False, SECRET_KEY=strong, SECRET_KEY_FALLBACKS=["short"], MCP_DJANGO=mcp_with(REQUEST_STATE_KEY=None)
    ):
        messages = checks.check_request_state_key()
        assert ids(messages) == ["mcp_django.W001"] and "SECRET_KEY_FALLBACKS[0]" in messages[0].msg
    with override_settings(DEBUG=True, SECRET_KEY=weak, MCP_DJANGO=mcp_with(REQUEST_STATE_KEY=None)):
        assert checks.check_request_state_key() == []
    # A configured key does not depend on SECRET_KEY at all.
    with override_settings(DEBUG=False, SECRET_KEY=weak, MCP_DJANGO=mcp_with(REQUEST_STATE_KEY="k" * 40)):
        assert checks.check_request_state_key() == []


def test_e017_empty_and_short_keys_are_refused() -> None:
    """An empty key (a variable exported empty) or a short one is an error, at check time and at
    use, never a silent fallback to keys derived from SECRET_KEY (issue 29)."""
    from django.core.exceptions import ImproperlyConfigured

    from mcp_django import keyring

    long_key = "k" * 32
    for value, said in [
        ("", "key is empty (an environment variable exported empty?)"),
        (b"", "key is empty"),
        ("short", "key is 5 bytes"),
        ("k" * 31, "key is 31 bytes"),
        ([long_key, "old"], "key at position 1 is 3 bytes"),
        ([long_key, ""], "key at position 1 is empty"),
        ([], "is an empty list"),
    ]:
        with override_settings(MCP_DJANGO=mcp_with(REQUEST_STATE_KEY=value)):
            messages = checks.check_settings()
            assert ids(messages) == ["mcp_django.E017"], (value, messages)
            assert (said in messages[0].msg and "at least 32 bytes" in messages[0].msg) or value == [], messages
            assert checks.check_request_state_key() == []  # said once, by check_settings
            with pytest.raises(ImproperlyConfigured, match=r"mcp_django\.E017"):
                keyring.keyring()  # nothing is sealed or verified with it
    for value in (None, long_key, [long_key, b"b" * 32]):
        with override_settings(MCP_DJANGO=mcp_with(REQUEST_STATE_KEY=value)):
            assert checks.check_settings() == [] and keyring.keyring().signing


def test_w003_anonymous_without_debug() -> None:
    with override_settings(DEBUG=False, MCP_DJANGO=mcp_with(ALLOW_ANONYMOUS=True)):
        assert ids(checks.check_anonymous()) == ["mcp_django.W003"]
    with override_settings(DEBUG=True, MCP_DJANGO=mcp_with(ALLOW_ANONYMOUS=True)):
        assert checks.check_anonymous() == []
    with override_settings(DEBUG=False, MCP_DJANGO=mcp_with(ALLOW_ANONYMOUS=False)):
        assert checks.check_anonymous() == []


def test_w004_daphne_without_asgi_application() -> None:
    # Channels alone never needed ASGI_APPLICATION; daphne's runserver does.
    with override_settings(ASGI_APPLICATION=None):
        assert checks.check_asgi() == []
        with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "daphne"]):
            messages = checks.check_asgi()
            assert ids(messages) == ["mcp_django.W004"] and "runserver" in messages[0].msg
            assert messages[0].level == WARNING
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "daphne"]):
        assert checks.check_asgi() == []  # the demo sets it


def test_e005_tool_names() -> None:
    registry = Registry()

    @registry.tool(name="x" * 65)
    def too_long() -> str:
        return ""

    @registry.tool(name="has space")
    def spaced() -> str:
        return ""

    @registry.tool(name="y" * 64)
    def just_fits() -> str:
        return ""

    messages = checks.handler_problems(registry)
    assert ids(messages) == ["mcp_django.E005", "mcp_django.E005"]
    assert "longer than 64" in messages[0].msg and "has space" in messages[1].msg


def test_e006_duplicates() -> None:
    registry = Registry()

    def make(n: int) -> Any:
        def same() -> str:
            return str(n)

        same.__qualname__ = f"same_{n}"  # a different source, the same name
        return same

    registry.tool(name="same")(make(1))
    registry.tool(name="same")(make(2))
    registry.prompt(name="p")(make(3))
    registry.prompt(name="p")(make(4))
    messages = checks.handler_problems(registry)
    assert ids(messages) == ["mcp_django.E006", "mcp_django.E006"]
    assert "tool 'same'" in messages[0].msg and "prompt 'p'" in messages[1].msg
    assert checks.check_handlers() == []  # the demo's handlers are clean


def test_e012_token_authentication_without_authtoken() -> None:
    without = [app for app in settings.INSTALLED_APPS if app != "rest_framework.authtoken"]
    with override_settings(INSTALLED_APPS=without):
        messages = checks.check_token_authentication()
        assert ids(messages) == ["mcp_django.E012"] and "rest_framework.authtoken" in messages[0].msg
        with override_settings(MCP_DJANGO=mcp_with(AUTHENTICATION_CLASSES=["mcp_django.auth.SessionAuthentication"])):
            assert checks.check_token_authentication() == []
    assert checks.check_token_authentication() == []


@pytest.mark.django_db
def test_checks_run_from_manage_py() -> None:
    from django.core.management.base import SystemCheckError

    with (
        override_settings(MCP_DJANGO=mcp_with(AUDIT={"TYPO": 1})),
        pytest.raises(SystemCheckError, match=r"mcp_django\.E008"),
    ):
        call_command("check")
